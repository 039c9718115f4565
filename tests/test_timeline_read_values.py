"""profile.timeline's reading and summary of a Horovod timeline on a small hand-made one (two tensors, two steps),
each value worked out by hand: the spans of rank-ready marks, the names and start time of the metadata events, the
facts, the activity classes and top tensors in order, a window's end, the loop's step times; and the files it
refuses, each with its whole message (a Chrome trace wrapped in traceEvents, bytes that are not UTF-8)."""

from __future__ import annotations

import json

import pytest

from scalestudy.profile import ProfileError
from scalestudy.profile.timeline import Span, read_timeline, summarize_timeline


def ev(ph: str, pid: int, ts: float, name: str | None = None, **more) -> dict:
    return {"ph": ph, "pid": pid, "ts": ts, **({"name": name} if name else {}), **more}


def step(t0: float) -> list[dict]:
    """One step from t0 (us): tensor_a (pid 1) negotiates 100 us then reduces 40 us, tensor_b (pid 2) 200 then 80."""
    return [ev("i", 0, t0, "CYCLE_START"),
            ev("B", 1, t0, "NEGOTIATE_ALLREDUCE"), ev("B", 2, t0, "NEGOTIATE_ALLREDUCE"),
            ev("E", 1, t0 + 100), ev("B", 1, t0 + 100, "ALLREDUCE"), ev("E", 1, t0 + 140),
            ev("E", 2, t0 + 200), ev("B", 2, t0 + 200, "ALLREDUCE"), ev("E", 2, t0 + 280)]  # fmt: skip


META = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "tensor_a"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "tensor_b"}},
        {"ph": "M", "pid": 3, "name": "thread_name", "args": {"name": "a thread, not a tensor"}},
        {"ph": "M", "pid": 0, "name": "clock", "args": {"start_time_since_epoch_in_micros": 1.5e15}}]  # fmt: skip
# rank-ready marks inside the negotiations: one with a duration, one without
MARKS = [ev("X", 1, 1050, "0", dur=3), ev("X", 2, 11050, "1")]


@pytest.fixture
def timeline(tmp_path):
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(META + step(1000) + step(11000) + MARKS))
    return path


def test_the_spans_names_and_facts_of_a_timeline(timeline):
    spans, names, facts = read_timeline(timeline)
    assert names == {1: "tensor_a", 2: "tensor_b"}  # the thread's name is no tensor's
    assert [s for s in spans if s.name.startswith("X:")] == [Span(1, "X:0", 1050, 1053, {}),
                                                             Span(2, "X:1", 11050, 11050, {})]  # fmt: skip
    assert Span(2, "ALLREDUCE", 11200, 11280, {}) in spans and len(spans) == 10
    assert facts == {"events": 24, "instant_events": {"CYCLE_START": 2}, "open_spans": 0, "unmatched_ends": 0,
                     "first_ts_us": 1000, "span_s": (11280 - 1000) / 1e6, "start_unix": 1.5e9,
                     "tensors": 2}  # fmt: skip


def test_ends_without_a_begin_are_counted_and_events_without_a_time_skipped(tmp_path):
    path = tmp_path / "odd.json"
    odd = [ev("E", 4, 500), {"ph": "i", "pid": 0, "name": "no time"}, ev("E", 4, 600)]
    path.write_text(json.dumps(META + odd + step(1000)))
    spans, _, facts = read_timeline(path)
    assert (facts["unmatched_ends"], facts["instant_events"], len(spans)) == (2, {"CYCLE_START": 1}, 4)


def test_a_timeline_opened_before_any_activity(tmp_path):
    # only the metadata Horovod writes first: a timeline all the same (its start time says so), with no events timed
    path = tmp_path / "new.json"
    path.write_text(json.dumps(META[3:]))
    spans, names, facts = read_timeline(path)
    assert (spans, names) == ([], {})
    assert (facts["first_ts_us"], facts["span_s"], facts["start_unix"]) == (None, 0.0, 1.5e9)
    path.write_text(json.dumps(META[:1] + step(0)[1:3]))  # no start time stated
    assert read_timeline(path)[2]["start_unix"] is None


def test_the_summary_by_hand(timeline):
    s = summarize_timeline(timeline)
    assert s.path == str(timeline) and s.kind == "horovod-timeline"
    # negotiations 2 x (100 + 200) us, allreduces 2 x (40 + 80) us: the longer first
    assert s.classes == [{"class": "NEGOTIATE_ALLREDUCE", "count": 4, "ms": 0.6},
                         {"class": "ALLREDUCE", "count": 4, "ms": 0.24}]  # fmt: skip
    b, a = (pytest.approx(2 / 3), pytest.approx(1 / 3))  # each tensor's share of the allreduce time
    assert s.top == [{"name": "tensor_b", "class": "allreduce", "count": 2, "ms": 0.16, "share": b},
                     {"name": "tensor_a", "class": "allreduce", "count": 2, "ms": 0.08, "share": a}]  # fmt: skip
    assert "first_ts_us" not in s.facts and s.facts["steps_summarized"] == 2 and s.facts["start_unix"] == 1.5e9
    assert "step_time_ms" not in s.metrics  # two steps: too few for a median gap
    # the loop's own step times: 25 ms a step. Its allreduces take 40 + 80 us; both tensors are ready once the
    # second negotiation ends (t0 + 200 us), after which tensor_b's 80 us are exposed: compute is the rest
    timed = summarize_timeline(timeline, step_times_s=[0.02, 0.03]).metrics
    assert (timed["step_time_ms"], timed["step_comm_ms"], timed["step_comm_exposed_ms"]) == pytest.approx(
        (25.0, 0.12, 0.08))  # fmt: skip
    assert timed["step_compute_ms"] == pytest.approx(24.92) and timed["step_comm_share"] == pytest.approx(0.12 / 25)
    # a window ending 5 ms after the first event: the second step (at 10 ms) is left out
    cut = summarize_timeline(timeline, window=(None, 0.005))
    assert cut.facts["steps_summarized"] == 1 and len(cut.steps) == 1
    assert cut.classes == [{"class": "NEGOTIATE_ALLREDUCE", "count": 2, "ms": 0.3},
                           {"class": "ALLREDUCE", "count": 2, "ms": 0.12}]  # fmt: skip


def test_a_chrome_trace_object_and_bytes_that_are_not_utf8(tmp_path):
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": META + step(1000), "displayTimeUnit": "ms"}))
    assert read_timeline(wrapped)[1] == {1: "tensor_a", 2: "tensor_b"}
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps(META + step(1000)).replace("tensor_a", "tensor_\\u00e9").encode().replace(
        b"tensor_\\u00e9", b"tensor_\xe9"))  # fmt: skip
    assert read_timeline(latin)[1][1] == "tensor_\ufffd"  # a byte that is not UTF-8 read as the replacement


def refused(path) -> str:
    with pytest.raises(ProfileError) as err:
        read_timeline(path)
    return str(err.value)


def test_files_that_are_not_horovod_timelines_each_with_its_message(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[\n{"ph": "B", "name": "ALLREDUCE", "ts": 1, "pid": 1},\n{"ph": "E", "ts"')
    assert refused(path) == (
        f"{path}: truncated or damaged JSON trace: it breaks at line 3 column 17 of 3 (Expecting ':' delimiter); "
        "a Horovod timeline may lack its closing ']', but not part of an event")  # fmt: skip
    chrome = f"{path}: JSON, but not a Chrome trace (a list of events with 'ph')"
    for text in ("{}", '[{"name": "ALLREDUCE", "ts": 1}]'):  # an empty object; an event without its phase
        path.write_text(text)
        assert refused(path) == chrome, text
    path.write_text(json.dumps([{"ph": "X", "name": "conv2d", "ts": 1, "dur": 2, "pid": 0}, {"ph": "i", "ts": 3}]))
    assert refused(path) == (f"{path}: a Chrome trace, but not a Horovod timeline (no NEGOTIATE_*, ALLREDUCE, "
                             "BROADCAST or CYCLE_START event)")  # fmt: skip
