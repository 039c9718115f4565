"""What `python -m scalestudy.profile summarize` prints, row by row, against the numbers it computed (issue 45: a
printed row can show another quantity while the summary's numbers are right). For each real profile of
../shared/reference/profiles/: every activity or kernel-class row (count, total, mean or share), every per-step
line of a timeline (each label with the metric it names, by the meaning written out here), and every top row."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_profile import PROFILES, needs_profiles

from scalestudy.profile import summarize
from scalestudy.profile.__main__ import main, render

FILES = sorted(PROFILES.rglob("*")) if PROFILES else []
FILES = [p for p in FILES if p.suffix in (".sqlite", ".nvvp", ".json")]
# The per-step lines of a timeline: what each label means, as the metric that holds it and how it is shown.
PER_STEP = {
    "allreduce (communication)": ("step_comm_ms", 1, 2),
    "not overlapped with computation": ("step_comm_exposed_ms", 1, 2),
    "share overlapped": ("step_comm_overlap_share", 100, 1),
    "negotiation (waiting for the ranks)": ("step_negotiate_ms", 1, 2),
    "fusion-buffer copies": ("step_fusion_copy_ms", 1, 2),
    "fused allreduces": ("step_allreduces", 1, 1),
    "gradient bytes reduced": ("step_allreduce_mb", 1, 2),
    "step time": ("step_time_ms", 1, 2),
    "communication share of the step": ("step_comm_share", 100, 1),
}


def shown(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def block(out: str, path) -> list[str]:
    """The lines `summarize` printed for `path` (from its name to the next file's)."""
    start = out.index(f"{path}\n")
    following = [out.index(f"{p}\n") for p in FILES if f"{p}\n" in out and out.index(f"{p}\n") > start]
    return out[start : min(following, default=len(out))].splitlines()


@needs_profiles
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_printed_row_is_the_number_computed(path, capsys):
    assert main(["summarize", str(path), "--top", "5"]) == 0
    lines = block(capsys.readouterr().out, path)
    summary = summarize(str(path), top=5)
    by_first = {cells(line)[0]: cells(line) for line in lines if line.strip() and not line.startswith(str(path))}
    timeline = summary.kind == "horovod-timeline"
    for c in summary.classes:
        row = by_first[c["class"]]
        assert row[1] == str(c["count"]) and row[2] == shown(c["ms"], 3), (path.name, c["class"], row)
        if timeline:
            assert row[3] == shown(c["ms"] / c["count"], 3)
        elif c["share_of_kernel_time"] is not None:
            assert row[3] == shown(100 * c["share_of_kernel_time"], 2)
    for label, (key, scale, digits) in PER_STEP.items():
        if key in summary.metrics:
            assert by_first[label][1] == shown(scale * summary.metrics[key], digits), (path.name, label)
    assert timeline == any(label in by_first for label in PER_STEP)  # a timeline's lines, and only its
    tops = [cells(line) for line in lines if re.match(r"^\s*\d+\s{2,}", line)]
    assert len(tops) == len(summary.top) > 0
    for i, (top, row) in enumerate(zip(summary.top, tops)):
        assert row[0] == str(i + 1) and row[1] == top["name"][:100] and row[2] == top["class"]
        assert row[3:] == [str(top["count"]), shown(top["ms"], 3), shown(100 * top["share"], 2)], (path.name, i)


GOLDEN = Path(__file__).parent / "golden" / "profile"


@needs_profiles
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_whole_printed_summary_is_the_reviewed_one(path, capsys, monkeypatch):
    """Headers, units, alignment and the lines between the rows too, word for word against tests/golden/profile/
    (made with SCALESTUDY_WRITE_GOLDEN=1, read by hand; the file's path, which differs per machine, as <FILE>)."""
    assert main(["summarize", str(path)]) == 0
    text = capsys.readouterr().out.replace(str(path), "<FILE>")
    golden = GOLDEN / f"{path.name}.txt"
    if os.environ.get("SCALESTUDY_WRITE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"profile summarize {path.name}: differs from {golden}"


@needs_profiles
def test_window_json_and_refusals_of_the_command(capsys):
    """--window summarizes that part only, --json prints the summary's fields, and the two refusals of the command."""
    import json

    path = next(p for p in FILES if p.suffix == ".json")  # a Horovod timeline: 212 s long
    assert main(["summarize", str(path), "--window", "10:20", "--top", "3"]) == 0
    windowed = capsys.readouterr().out
    part = summarize(str(path), window=(10.0, 20.0), top=3)
    assert windowed == render(part) and windowed != render(summarize(str(path), top=3))
    assert main(["summarize", str(path), "--json"]) == 0
    assert capsys.readouterr().out == json.dumps([summarize(str(path)).__dict__], indent=1, default=str) + "\n"
    usage = "usage: python -m scalestudy.profile [-h] {summarize} ...\npython -m scalestudy.profile: error: "
    for argv, why in (
        ([str(path), "--window", "abc"], "--window 'abc': write START:END in seconds, e.g. 10:12.5 or 10:"),
        ([str(path), str(path), "--run", "r1"], "--run takes the numbers of one FILE"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(["summarize", *argv])
        assert (stop.value.code, capsys.readouterr().err) == (2, f"{usage}{why}\n")
