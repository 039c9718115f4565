"""horovod-timelines-2019 (ingest/horovod_timelines.py), in-process and fast: the run the importer builds from a
timeline, its rank count and its refusals, on the real 4-rank timeline cut to its first lines in tmp_path (the
whole files are read by tests/test_horovod_timelines.py; a cut keeps each test small). The per-step numbers are
scalestudy.profile.timeline's, tested there."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REFERENCE, raw_dir

from scalestudy.ingest import horovod_timelines, read_source
from scalestudy.profile.timeline import summarize_timeline
from scalestudy.schema import NOT_STATED, SchemaError

NAME = "tflogs_e2205b9_horovod_timeline.json"  # 4 ranks
FOLDER = REFERENCE / "horovod-timelines-2019"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return (raw_dir("horovod-timelines-2019") / "horovod_timeline" / NAME).read_text().splitlines()


def cut(lines: list[str], tmp_path: Path, n: int) -> Path:
    """The timeline's first n lines: a JSON array left open, as Horovod leaves a timeline of a job that is cut."""
    path = tmp_path / NAME
    path.write_text("\n".join(lines[:n]) + "\n")
    return path


def read_cut(path: Path, monkeypatch) -> list:
    """The importer on one cut file, in place of the two fetched ones (the fetch is tested in test_fetch*.py)."""
    source = read_source(FOLDER)

    def fetched(folder, given):
        assert folder == FOLDER and given == source
        return {f"horovod_timeline/{NAME}": path}, {**source, "raw_dir": str(path.parent)}

    monkeypatch.setattr(horovod_timelines, "fetched_raw_files", fetched)
    return horovod_timelines.read(FOLDER)


def test_the_run_of_a_timeline(lines, tmp_path, monkeypatch):
    # the first 1500 lines hold 4 steps of allreduces and each of the 4 ranks' negotiation marks ('X' events 0-3)
    path = cut(lines, tmp_path, 1500)
    assert horovod_timelines.ranks_of(path) == 4
    [rec] = read_cut(path, monkeypatch)
    assert rec.key == f"horovod_timeline/{NAME}" and rec.experiment == "horovod-timelines-2019"
    assert rec.params == {"model": "trivial", "framework": "tensorflow", "api": "horovod", "workers": 4,
                          "device": NOT_STATED, "data": "synthetic", "batch_per_worker": NOT_STATED,
                          "platform": NOT_STATED}  # fmt: skip
    assert rec.metrics == summarize_timeline(path).metrics and rec.metrics["timeline_steps"] == 4.0
    assert rec.where == f"{path}:1" and rec.status == "FINISHED"
    assert rec.tags["profile"] == "timeline" and rec.tags["backend"] == "mpi"
    assert rec.tags["source_line"] == f"{NAME}:1" and rec.tags["dataset"] == "horovod-timelines-2019"


def test_ranks_counted_from_the_marks_so_far(lines, tmp_path):
    # by line 300 no tensor has more than two ranks' negotiation marks; by line 1000 one has all four
    assert horovod_timelines.ranks_of(cut(lines, tmp_path, 300)) == 2
    assert horovod_timelines.ranks_of(cut(lines, tmp_path, 1000)) == 4
    path = cut(lines, tmp_path, 20)  # CYCLE_START marks only
    with pytest.raises(SchemaError) as err:
        horovod_timelines.ranks_of(path)
    assert str(err.value) == f"{path}: no negotiation marks, so the timeline does not say how many ranks ran"


def test_a_timeline_of_fewer_than_three_steps(lines, tmp_path, monkeypatch):
    path = cut(lines, tmp_path, 1000)  # one step of allreduces
    with pytest.raises(SchemaError) as err:
        read_cut(path, monkeypatch)
    assert str(err.value) == f"{path}:1: fewer than three steps of allreduces: no step time to split"
