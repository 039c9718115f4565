"""A user's Horovod timeline imported as a run by `python -m scalestudy.ingest logs` (ingest/logs/horovod_timeline.py,
issue 43), then drawn by figure 9's path: on the two real timelines of ../shared/reference/profiles/horovod_timeline/
(read in place, never copied into the project). The ranks and the per-step numbers are recomputed here from the
JSON with code of this test's own (B/E paired per pid, the k-th ALLREDUCE of each gradient tensor in step k), and
the totals checked against the facts of the profiles' README."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path

import pytest
from helpers import REPO, shared_reference

from scalestudy.ingest.__main__ import main as ingest
from scalestudy.ingest.logs import LogOptions, read_logs, user_source
from scalestudy.paper.__main__ import main as paper
from scalestudy.store import load_runs

FOLDER = (shared_reference("profiles") or REPO / "absent") / "profiles" / "horovod_timeline"
FOUR = FOLDER / "tflogs_e2205b9_horovod_timeline.json"  # 4 ranks
TWELVE = FOLDER / "tflogs_72f32f9_horovod_timeline.json"  # 12 ranks, no closing ']'
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(not FOUR.is_file(), reason=f"{FOLDER} is not here")]
GIVEN = ["--model", "trivial", "--framework", "tensorflow", "--data", "synthetic", "--device", "V100"]
# README facts: ALLREDUCE spans' total ms, as printed there (3 decimals)
README_ALLREDUCE_MS = {FOUR: 47484.826, TWELVE: 88216.685}


def events(path: Path) -> list[dict]:
    text = path.read_text().rstrip()
    return json.loads(text if text.endswith("]") else text.rstrip(",") + "]")


def spans(path: Path, name: str) -> dict[int, list[tuple[float, float]]]:
    """{pid: [(start, end) of each `name` span, in order]}: an E closes its pid's last open B."""
    open_: dict[int, list] = {}
    out: dict[int, list] = {}
    for e in events(path):
        if e.get("ph") == "B":
            open_.setdefault(e["pid"], []).append((e["name"], e["ts"]))
        elif e.get("ph") == "E" and open_.get(e["pid"]):
            began, start = open_[e["pid"]].pop()
            if began == name:
                out.setdefault(e["pid"], []).append((start, e["ts"]))
    return {pid: sorted(v) for pid, v in out.items()}


def ranks(path: Path) -> int:
    marks: dict[int, set] = {}
    for e in events(path):
        if e.get("ph") == "X":
            marks.setdefault(e["pid"], set()).add(e["name"])
    return max(len(m) for m in marks.values())


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def by_hand(path: Path) -> dict[str, float]:
    """Per-step means (ms) of the gradient tensors (those with the most common ALLREDUCE count)."""
    reduces, negotiations = spans(path, "ALLREDUCE"), spans(path, "NEGOTIATE_ALLREDUCE")
    n = statistics.mode(len(v) for v in reduces.values())
    tensors = [p for p, v in reduces.items() if len(v) == n]
    comm, exposed, negotiate, firsts = [], [], [], []
    for k in range(n):
        red = merged([reduces[p][k] for p in tensors])
        neg = [negotiations[p][k] for p in tensors]
        ready, done = max(e for _, e in neg), max(e for _, e in red)
        comm.append(sum(e - s for s, e in red) / 1e3)
        exposed.append(sum(max(0.0, min(e, done) - max(s, ready)) for s, e in red) / 1e3)
        negotiate.append(sum(e - s for s, e in merged(neg)) / 1e3)
        firsts.append(min(s for s, _ in neg))
    gaps = [(b - a) / 1e3 for a, b in itertools.pairwise(firsts)]
    return {"timeline_steps": float(n), "step_comm_ms": statistics.fmean(comm),
            "step_comm_exposed_ms": statistics.fmean(exposed), "step_negotiate_ms": statistics.fmean(negotiate),
            "step_time_ms": statistics.median(gaps)}  # fmt: skip


def test_the_hand_reading_agrees_with_the_readme():
    for path, total in README_ALLREDUCE_MS.items():
        assert round(sum(e - s for v in spans(path, "ALLREDUCE").values() for s, e in v) / 1e3, 3) == total
    assert (ranks(FOUR), ranks(TWELVE)) == (4, 12)


def test_timelines_import_as_runs_that_figure_9_draws(empty_store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    assert ingest(["logs", str(FOLDER), "--experiment", "mine", *GIVEN, "--platform", "my-cluster"]) == 0
    assert "2 runs (0 failed) from 2 file(s) in experiment 'mine': 2 created" in capsys.readouterr().out
    runs = load_runs(empty_store)
    runs = runs[runs["experiment"] == "mine"].set_index("workers")
    for path, workers in ((FOUR, 4), (TWELVE, 12)):
        run = runs.loc[workers]
        assert (run["model"], run["device"], run["platform"]) == ("trivial", "V100", "my-cluster")
        assert run["api"] == "horovod" and run["data"] == "synthetic" and run["framework"] == "tensorflow"
        assert run["log_format"] == "horovod_timeline" and run["backend"] == "mpi"  # MPI_ALLREDUCE spans
        assert run["workers_basis"] == f"timeline: negotiation marks of {workers} ranks"
        for name, value in by_hand(path).items():
            assert math.isclose(run[name], value, rel_tol=1e-9), (path.name, name)
    built = tmp_path / "built"
    # beside the study (this store holds none of its timelines): the user's two runs, as their own series
    assert paper(["figure-9", "compare=mine", f"out_dir={built}"]) == 0
    drawn = json.loads((built / "figures" / "figure-9.json").read_text())
    assert {r["experiment"] for r in drawn["mlflow_runs"]} == {"mine"} and len(drawn["mlflow_runs"]) == 2
    assert drawn["compare"] == {"experiment": "mine", "drawn": sorted(runs["run_id"]), "not_drawn": []}
    assert drawn["title"] == "Where a step's time goes, beside mine"
    for point in drawn["points"]:
        assert math.isclose(point["value"], runs.loc[point["workers"], point["y"]], rel_tol=1e-9)
    assert {p["y"] for p in drawn["points"]} == {"step_time_ms", "step_negotiate_ms", "step_comm_ms",
                                                 "step_comm_exposed_ms"}  # fmt: skip


def test_what_a_timeline_does_not_say_is_asked_for_at_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'none.db'}")
    assert ingest(["logs", str(FOUR), "--experiment", "mine", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"error: {FOUR}:1: a Horovod timeline does not say the run's model, framework, data, device, platform: "
        "give --model MODEL --framework FRAMEWORK --data DATA --device DEVICE --platform PLATFORM; nothing was "
        "written\n"
    )
    # in a Lambda benchmark folder the folder's name is the platform (a timeline names no GPU: the whole name);
    # --workers does not override the ranks the timeline shows, and says so
    copy = tmp_path / "7662-Tesla_V100-SXM2-16GB.logs" / "timeline.json"
    copy.parent.mkdir()
    copy.write_bytes(FOUR.read_bytes())
    (rec,) = read_logs([copy], LogOptions(source=user_source("mine"), model="trivial", framework="tensorflow",
                                          data="synthetic", device="V100"))  # fmt: skip
    assert rec.params["platform"] == "7662-Tesla_V100-SXM2-16GB" and rec.params["workers"] == 4
    assert rec.tags["platform_basis"] == "folder name (7662-Tesla_V100-SXM2-16GB.logs)"
    assert rec.tags["device_basis"] == "given (--device)" and rec.params["batch_per_worker"] == "not stated"
    assert ingest(["logs", str(copy), "--experiment", "mine", *GIVEN, "--workers", "8", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "horovod_timeline  trivial  4 " in out and "nothing written (--dry-run)" in out
    assert err == f"warning: {copy}: --workers 8 not used: the log says 4 GPUs\n"
    assert not (tmp_path / "none.db").exists()
