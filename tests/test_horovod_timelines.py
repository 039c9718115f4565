"""horovod-timelines-2019: the two published Horovod timelines imported as runs (ingest/horovod_timelines.py), checked
against the files read here by a reader of this test's own, and against the facts of the mirror's README
(../shared/reference/profiles/README.md: 660 ALLREDUCE spans per file, 47,484.826 ms at 4 ranks, 88,216.685 ms
at 12)."""

import json
from pathlib import Path

import pytest
from helpers import REFERENCE, raw_dir

from scalestudy.ingest import horovod_timelines

FILES = {4: "tflogs_e2205b9_horovod_timeline.json", 12: "tflogs_72f32f9_horovod_timeline.json"}


def _events(path: Path) -> list[dict]:
    text = path.read_text().rstrip()
    return json.loads(text if text.endswith("]") else text.rstrip(",") + "]")  # the 12-rank file is not closed


def _allreduce_spans(events: list[dict]) -> dict[int, list[tuple[float, float]]]:
    """ALLREDUCE (start, end) per tensor (pid), B/E paired by a stack per pid, in microseconds."""
    open_, spans = {}, {}
    for e in events:
        if e.get("ph") == "B":
            open_.setdefault(e["pid"], []).append((e.get("name"), e["ts"]))
        elif e.get("ph") == "E" and open_.get(e["pid"]):
            name, start = open_[e["pid"]].pop()
            if name == "ALLREDUCE":
                spans.setdefault(e["pid"], []).append((start, e["ts"]))
    return spans


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total / 1e3


@pytest.fixture(scope="module")
def records():
    return {r.params["workers"]: r for r in horovod_timelines.read(REFERENCE / "horovod-timelines-2019")}


def test_each_timeline_is_one_run_of_its_rank_count(records):
    assert sorted(records) == [4, 12]
    for workers, record in records.items():
        assert record.key == f"horovod_timeline/{FILES[workers]}"
        assert record.params["model"] == "trivial" and record.tags["source"] == "published"
        assert record.tags["citation"].startswith("andrewor14/tf-logs")
        assert record.metrics["timeline_steps"] == 110  # 660 ALLREDUCE spans over 6 gradient tensors
        record.validate()


@pytest.mark.parametrize("workers,total_ms", [(4, 47484.826), (12, 88216.685)])
def test_the_per_step_allreduce_time_from_the_file(records, workers, total_ms):
    events = _events(raw_dir("horovod-timelines-2019") / "horovod_timeline" / FILES[workers])
    spans = _allreduce_spans(events)
    assert sum(len(v) for v in spans.values()) == 660 and len(spans) == 6
    assert sum(stop - start for v in spans.values() for start, stop in v) / 1e3 == pytest.approx(total_ms, abs=1e-3)
    # the k-th allreduce of every tensor is step k: the union of those spans, averaged over the 110 steps
    per_step = [_union_ms([v[k] for v in spans.values()]) for k in range(110)]
    assert records[workers].metrics["step_comm_ms"] == pytest.approx(sum(per_step) / 110)
    ranks = {e["name"] for e in events if e.get("ph") == "X"}
    assert ranks == {str(r) for r in range(workers)}


def test_a_timeline_in_the_mirror_folder_is_found_and_a_wrong_one_refused(tmp_path, monkeypatch):
    """source.yaml's mirror_folder: the files lie at <mirror>/profiles/horovod_timeline/, not under the dataset's
    name; a file there whose SHA-256 differs stops the import naming it."""
    from scalestudy.ingest import fetched_raw_files, read_source
    from scalestudy.schema import SchemaError

    real = raw_dir("horovod-timelines-2019") / "horovod_timeline"
    mirror = tmp_path / "mirror" / "profiles" / "horovod_timeline"
    mirror.mkdir(parents=True)
    for name in FILES.values():
        (mirror / name).write_bytes((real / name).read_bytes())
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    folder = REFERENCE / "horovod-timelines-2019"
    files, _ = fetched_raw_files(folder, read_source(folder))
    assert sorted(p.name for p in files.values()) == sorted(FILES.values())
    assert all(str(p).startswith(str(tmp_path / "cache")) for p in files.values())
    (tmp_path / "cache").rename(tmp_path / "old-cache")
    (mirror / FILES[4]).write_bytes(b"[]")
    with pytest.raises(SchemaError, match=f"{FILES[4]}: SHA-256 .* is not the 03771dbff605"):
        fetched_raw_files(folder, read_source(folder))
