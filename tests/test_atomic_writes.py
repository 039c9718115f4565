"""Files are written whole: to a hidden temporary name in the same folder, renamed onto the target only when
every file of a set is complete (files.atomic_files), so a failing or killed writer leaves the old files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pandas as pd
import pytest

from scalestudy import files
from scalestudy.paper import figures


def test_the_files_are_written_under_a_temporary_name_then_renamed(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "sub" / "b.txt"
    a.write_text("old a")
    with files.atomic_files(a, b) as (tmp_a, tmp_b):
        assert tmp_a == tmp_path / f".a.json.{os.getpid()}.tmp" and tmp_b.parent == b.parent
        tmp_a.write_text("new a")
        tmp_b.write_text("new b")
        assert a.read_text() == "old a" and not b.exists()  # nothing renamed while the block runs
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert sorted(p.name for p in tmp_path.rglob(".*")) == []


def test_a_failing_block_leaves_every_target_as_it_was(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    b.write_text("old b")
    with pytest.raises(RuntimeError), files.atomic_files(a, b) as (tmp_a, tmp_b):
        tmp_a.write_text("new a")
        tmp_b.write_text("new b")
        raise RuntimeError("the drawing failed")
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_a_set_with_a_temporary_never_written_renames_none(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("old a")
    forgotten = pytest.raises(FileNotFoundError, match=r"b\.txt: nothing was written")
    with forgotten, files.atomic_files(first, second) as (tmp_first, _):
        tmp_first.write_text("new a")  # the second file of the set is forgotten
    assert first.read_text() == "old a" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary left behind


@pytest.mark.parametrize("how", ["KILL", "TERM"])
def test_a_writer_killed_before_the_rename_leaves_the_old_file(tmp_path, how):
    target = tmp_path / "table.json"
    target.write_text('{"old": true}\n')
    script = (
        "import sys; from scalestudy.files import write_text, exit_on_termination; exit_on_termination(); "
        "write_text(__import__('pathlib').Path(sys.argv[1]), '{\"new\": true}\\n')"
    )
    env = dict(os.environ, SCALESTUDY_SIGNAL_BEFORE_RENAME=how)
    proc = subprocess.run([sys.executable, "-c", script, str(target)], env=env, capture_output=True, text=True)
    assert proc.returncode in (-signal.SIGKILL, 128 + signal.SIGTERM), proc.stderr
    assert target.read_text() == '{"old": true}\n'
    left = [p.name for p in tmp_path.iterdir() if p.name != "table.json"]
    if how == "TERM":
        assert left == []  # SIGTERM became an exit: the temporary file was removed
    else:  # SIGKILL: the temporary file, with the dead writer's pid, stays until the next writer clears it
        assert len(left) == 1 and files.TEMPORARY.match(left[0]) and left[0].startswith(".table.json.")
        assert files.remove_stale_temporaries(tmp_path) == [tmp_path / left[0]]
        assert [p.name for p in tmp_path.iterdir()] == ["table.json"]


def tiny_figure(title: str) -> tuple[dict, pd.DataFrame]:
    spec = {"name": "figure-t", "title": title, "caption": "c", "runs": {"published": {"experiment": "e"}},
            "plot": {"x": "workers", "panels": [{"y": ["throughput_total"]}]}}  # fmt: skip
    runs = pd.DataFrame(
        {
            "run_id": ["r1", "r2"],
            "run_name": ["one", "two"],
            "experiment": "e",
            "experiment_id": "1",
            "source": "published",
            "status": "FINISHED",
            "workers": [1, 2],
            "throughput_total": [10.0, 19.0],
            "device": "P100",
        }
    )
    return spec, runs


def test_a_figure_whose_build_fails_while_writing_keeps_all_four_old_files(tmp_path, monkeypatch):
    spec, runs = tiny_figure("first")
    paths = figures.build_figure(spec, runs, source="published", out_dir=tmp_path, commit="c1")
    before = {p.name: p.read_bytes() for p in paths}
    assert sorted(before) == ["figure-t.caption.tex", "figure-t.json", "figure-t.pdf", "figure-t.png"]

    def broken(*args):  # the last of the four files fails, after the PDF, PNG and JSON were written
        raise OSError("disk full")

    monkeypatch.setattr(figures, "caption_tex", broken)
    spec, runs = tiny_figure("second")
    with pytest.raises(OSError, match="disk full"):
        figures.build_figure(spec, runs.assign(throughput_total=[10.0, 15.0]), source="published",
                             out_dir=tmp_path, commit="c2")  # fmt: skip
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # old files, no temporary left


SET_WRITER = (
    "import sys; from pathlib import Path; from scalestudy.files import atomic_files; "
    "folder = Path(sys.argv[1]); names = ['f.pdf', 'f.png', 'f.json', 'f.caption.tex']\n"
    "with atomic_files(*(folder / n for n in names)) as temporaries:\n"
    "    for tmp in temporaries: tmp.write_text('new ' + tmp.name.split('.')[2])\n"
)


@pytest.mark.parametrize("boundary", [1, 2, 3, 4, 5])
def test_a_set_killed_at_any_rename_is_completed_by_the_next_writer(tmp_path, boundary):
    """A figure's four files: SIGKILL before the 1st..4th rename, or after the 4th (before the journal goes):
    the next writer in the folder finishes the set from its journal, so all four are new (never some old)."""
    names = ["f.pdf", "f.png", "f.json", "f.caption.tex"]
    for name in names:
        (tmp_path / name).write_text(f"old {name.split('.')[1]}")
    env = dict(os.environ, SCALESTUDY_KILL_AT_RENAME=str(boundary))
    proc = subprocess.run([sys.executable, "-c", SET_WRITER, str(tmp_path)], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    states = [(tmp_path / n).read_text().split()[0] for n in names]
    assert states == ["new"] * (boundary - 1) + ["old"] * (len(names) - boundary + 1)  # half a set, as the issue saw
    journals = [p.name for p in tmp_path.iterdir() if files.JOURNAL.match(p.name)]
    assert len(journals) == 1 and journals[0].startswith(".f.pdf.")  # a reader can tell a set is being replaced
    files.remove_stale_temporaries(tmp_path)
    assert [(tmp_path / n).read_text() for n in names] == [f"new {n.split('.')[1]}" for n in names]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # journal and temporaries gone


def test_sigterm_during_the_renames_waits_for_the_last(tmp_path):
    """SIGTERM arriving while a set is renamed is held until the set is whole, then exits as usual."""
    names = ["f.pdf", "f.png", "f.json", "f.caption.tex"]
    script = (
        "import os, signal; from scalestudy import files; files.exit_on_termination(); "
        "real = os.replace\n"
        "def slow(a, b):\n    os.kill(os.getpid(), signal.SIGTERM); real(a, b)\n"
        "files.os.replace = slow\n" + SET_WRITER
    )
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert [(tmp_path / n).read_text() for n in names] == [f"new {n.split('.')[1]}" for n in names]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
