"""profile.timeline's per-step numbers on small hand-made timelines, each value worked out by hand: which tensors
make the steps, which activities fall inside an allreduce, the window's edges, steps without a negotiation or a
size, and step_metrics' step time (the loop's clock, else the median gap from 3 steps on) and overlap share."""

import pytest

from scalestudy.profile.timeline import Span, per_step, step_metrics, tensor_bytes


def test_tensor_bytes_needs_a_known_dtype_and_a_shape_without_unknown_dimensions():
    assert tensor_bytes({"dtype": "float32"}) is None  # no shape
    assert tensor_bytes({"shape": "[3]"}) is None  # no dtype
    assert tensor_bytes({"dtype": "complex_thing", "shape": "[3]"}) is None
    assert tensor_bytes({"dtype": "float32", "shape": "[-1, 10]"}) is None  # a dimension not known yet
    assert tensor_bytes({"dtype": "float32", "shape": "[0, 10]"}) == 0  # an empty tensor: known, 0 bytes
    assert tensor_bytes({"dtype": "float16", "shape": "[1, 3]"}) == 6


def reduce(pid: int, start: float, end: float, **args) -> Span:
    return Span(pid, "ALLREDUCE", start, end, args)


def test_no_allreduce_no_steps():
    assert per_step([Span(1, "NEGOTIATE_ALLREDUCE", 0, 5, {})]) == (
        [], {"steps": 0, "gradient_tensors": 0, "tensors_with_other_counts": 0})  # fmt: skip


def test_the_step_count_is_the_allreduce_count_most_tensors_share():
    # tensors 1-3 reduced twice, tensor 4 three times (e.g. a variable reduced once more): 2 steps, 4 left out
    spans = [reduce(p, s, s + 10) for p in (1, 2, 3) for s in (0, 100)] + [reduce(4, s, s + 10) for s in (0, 50, 100)]
    steps, facts = per_step(spans)
    assert facts == {"steps": 2, "gradient_tensors": 3, "tensors_with_other_counts": 1}
    assert [s["step"] for s in steps] == [0, 1]
    # a tie (2 tensors with 1 allreduce, 2 with 2): the larger count
    spans = [reduce(p, 0, 10) for p in (1, 2)] + [reduce(p, s, s + 10) for p in (3, 4) for s in (0, 100)]
    assert per_step(spans)[1]["steps"] == 2


@pytest.mark.filterwarnings("error")  # numpy warns of a `side` it reads leniently
def test_a_fusion_copy_counts_in_the_allreduce_it_lies_in_edges_included():
    # step 0's allreduce 0-100 us, step 1's 200-300 us; copies at exactly the allreduce's start and end count,
    # one that runs past the end does not, nor one before the first allreduce
    copy_in, copy_out = "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"
    spans = [reduce(1, 0, 100), reduce(1, 200, 300), Span(1, copy_in, 0, 10, {}), Span(1, copy_out, 90, 100, {}),
             Span(1, copy_in, 250, 310, {}), Span(1, copy_in, -20, -10, {})]  # fmt: skip
    steps, _ = per_step(spans)
    assert [s["fusion_copy_ms"] for s in steps] == [0.02, 0.0]


def test_the_backends_collectives_count_the_fused_allreduces_not_the_tensors_spans():
    # two tensors' allreduces overlap (one request), but the backend ran two collectives one after the other
    spans = [reduce(1, 0, 100), reduce(2, 0, 100), Span(1, "NCCL_ALLREDUCE", 10, 40, {}),
             Span(2, "NCCL_ALLREDUCE", 50, 90, {})]  # fmt: skip
    assert per_step(spans)[0][0]["fused_allreduces"] == 2
    assert per_step(spans[:2])[0][0]["fused_allreduces"] == 1  # without backend spans: the allreduces themselves


def test_a_step_without_negotiation_starts_and_is_ready_at_its_first_allreduce_and_has_no_size():
    steps, _ = per_step([reduce(1, 100, 150), reduce(2, 120, 200)])
    (step,) = steps
    # comm: the union 100-200 us; exposed: all of it after ready (100) up to done (200); no dtype, no bytes
    assert (step["first_us"], step["allreduce_ms"], step["exposed_ms"], step["negotiate_ms"]) == (100, 0.1, 0.1, 0.0)
    assert step["bytes"] is None
    sized = per_step([reduce(1, 100, 150, dtype="float32", shape="[10]"), reduce(2, 120, 200)])[0][0]
    assert sized["bytes"] == 40.0  # the known sizes summed


def test_the_window_keeps_steps_whose_first_negotiation_starts_at_its_start_not_at_its_end():
    spans = [reduce(1, s, s + 10) for s in (0, 100, 200)]
    steps, _ = per_step(spans, window=(100, 200))
    assert [s["step"] for s in steps] == [1]


def step(first_us: float, allreduce_ms: float, exposed_ms: float) -> dict:
    return {"first_us": first_us, "allreduce_ms": allreduce_ms, "exposed_ms": exposed_ms, "negotiate_ms": 0.0,
            "fusion_copy_ms": 0.0, "fused_allreduces": 1, "bytes": None}  # fmt: skip


def test_step_time_from_the_loops_clock_else_the_median_gap_of_three_steps_or_more():
    two = [step(0, 0.5, 0.25), step(10_000, 0.5, 0.25)]
    assert "step_time_ms" not in step_metrics(two)  # one gap: too few to tell
    metrics = step_metrics(two, step_times_s=[0.1, 0.3])
    assert metrics["step_time_ms"] == pytest.approx(200.0)  # 1000 x the mean, 0.2 s
    assert metrics["step_compute_ms"] == pytest.approx(200.0 - 0.25)
    assert metrics["step_comm_share"] == pytest.approx(0.5 / 200.0)
    three = step_metrics([step(0, 0.5, 0.25), step(10_000, 0.5, 0.25), step(40_000, 0.5, 0.25)])
    assert three["step_time_ms"] == pytest.approx(20.0)  # gaps 10 and 30 ms: the median


def test_every_per_step_mean_by_hand():
    # two steps; their means, with bytes as megabytes of 10^6 bytes (the schema's MB), not MiB
    a = {**step(0, 0.5, 0.25), "negotiate_ms": 0.1, "fusion_copy_ms": 0.02, "fused_allreduces": 3, "bytes": 4e6}
    b = {**step(10_000, 1.5, 0.75), "negotiate_ms": 0.3, "fusion_copy_ms": 0.04, "fused_allreduces": 5, "bytes": 6e6}
    metrics = step_metrics([a, b])
    assert metrics == pytest.approx({
        "step_comm_ms": 1.0, "step_comm_exposed_ms": 0.5, "step_negotiate_ms": 0.2, "step_fusion_copy_ms": 0.03,
        "step_allreduces": 4.0, "timeline_steps": 2.0, "step_allreduce_mb": 5.0,
        "step_comm_overlap_share": 1 - 1.0 / 2.0,  # 1 of the 2 ms exposed
    })  # fmt: skip
    assert "step_allreduce_mb" not in step_metrics([a, {**b, "bytes": None}])  # one step's size unknown: no mean


def test_the_overlap_share_needs_some_communication():
    # 0.5 ms of allreduce per step, 0.25 exposed: half of it hidden behind compute
    assert step_metrics([step(0, 0.5, 0.25)])["step_comm_overlap_share"] == pytest.approx(0.5)
    assert "step_comm_overlap_share" not in step_metrics([step(0, 0.0, 0.0)])  # nothing to hide


def test_summarize_timeline_cuts_every_activity_to_the_windows_end(tmp_path):
    import json

    from scalestudy.profile.timeline import summarize_timeline

    # tensor 1: ALLREDUCE 0-2 s after the first event (at ts 1000 us); "X:" activities are not timed
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "grad_w"}},
              {"ph": "B", "pid": 1, "ts": 1000, "name": "ALLREDUCE"},
              {"ph": "B", "pid": 1, "ts": 1000, "name": "X:inner"}, {"ph": "E", "pid": 1, "ts": 3000},
              {"ph": "E", "pid": 1, "ts": 2_001_000}]  # fmt: skip
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(events))
    whole = summarize_timeline(path)
    assert [(c["class"], c["ms"]) for c in whole.classes] == [("ALLREDUCE", 2000.0)]
    cut = summarize_timeline(path, window=(0.5, 1.5))  # 0.5 s to 1.5 s after the first event: 1000 ms of it
    assert [(c["class"], c["ms"]) for c in cut.classes] == [("ALLREDUCE", 1000.0)]
    assert [(t["name"], t["ms"]) for t in cut.top] == [("grad_w", 1000.0)]


def test_summarize_timeline_top_ten_by_default_and_a_window_from_a_first_event_at_zero(tmp_path):
    import json

    from scalestudy.profile.timeline import summarize_timeline

    events = [e for p in range(1, 13) for e in ({"ph": "B", "pid": p, "ts": 0, "name": "ALLREDUCE"},
                                                {"ph": "E", "pid": p, "ts": 1_000_000 * p})]  # fmt: skip
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(events))
    assert len(summarize_timeline(path).top) == 10  # of 12 tensors
    # the first event at ts 0: the window counts from 0, so tensor 1's 1 s allreduce is cut to 0.25 s exactly
    cut = summarize_timeline(path, window=(None, 0.25))
    assert {t["name"]: t["ms"] for t in cut.top}["pid 1"] == 250.0
