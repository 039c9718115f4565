"""scaling/held_out.py in the test's own process, each output against a value worked out by hand: the errors of
study.validation()'s checks and of MLPerf's table, every refusal as its exact line, the rule's ranges taken by their
`above` (not their order) and the largest error over a range's tests (not the first). tests/test_scaling_held_out.py
has the rule's first checks and figure 7's intervals."""

from __future__ import annotations

import pandas as pd
import pytest

from scalestudy.scaling.held_out import HeldOutError, check_rule, error_of, margins, mlperf_error, study_errors, widen

WHERE = "conf/scaling/default.yaml held_out_error"
ERRORS = {  # largest optimistic miss in "a", largest pessimistic in "b": a max over the tests needs both
    "a": HeldOutError("a", optimistic=0.20, pessimistic=0.01, points=2, gpus_min=32, gpus_max=64),
    "b": HeldOutError("b", optimistic=0.05, pessimistic=0.30, points=3, gpus_min=512, gpus_max=4320),
}


def test_error_of_every_field_and_its_refusals():
    # predicted - measured: -0.2, +0.1, +0.3 -> optimistic 0.3, pessimistic 0.2
    e = error_of("t", [0.6, "0.9", 0.8], [0.8, 0.8, 0.5], [64, 8, 32])
    assert e == HeldOutError("t", pytest.approx(0.3), pytest.approx(0.2), 3, 8, 64)
    assert error_of("t", [0.5, 0.4], [0.6, 0.5], [2, 4]).optimistic == 0.0  # never above: 0, not the largest gap
    assert error_of("t", [0.7, 0.8], [0.6, 0.5], [2, 4]).pessimistic == 0.0
    for predicted, measured, gpus, line in [
        ([], [], [], "0 predictions for 0 measurements"),
        ([0.5, 0.6], [0.6], [512], "2 predictions for 1 measurements"),
        ([0.5], [0.6], [512, 1024], "1 predictions for 1 measurements"),
    ]:
        with pytest.raises(ValueError, match=rf"^held-out test 't': {line}$"):
            error_of("t", predicted, measured, gpus)


def test_study_errors_per_dataset_with_held_out_points():
    checks = [
        {
            "dataset": "tf",
            "held_out": [
                {"predicted": 0.9, "observed": 0.8, "workers": 32},
                {"predicted": 0.7, "observed": 0.75, "workers": 64},
            ],
        },
        {"dataset": "none", "held_out": []},
    ]
    assert study_errors(checks) == {"tf": HeldOutError("tf", pytest.approx(0.1), pytest.approx(0.05), 2, 32, 64)}


def test_mlperf_error_is_the_midpoint_against_the_measured():
    table = pd.DataFrame({"midpoint": [0.2188, 0.6], "measured": [0.5799, 0.5], "accelerators": [768, 4320]})
    assert mlperf_error(table) == HeldOutError(
        "mlperf-training-resnet", pytest.approx(0.1), pytest.approx(0.5799 - 0.2188), 2, 768, 4320
    )
    assert mlperf_error(table, test="m").test == "m"


def test_check_rule_refusals_are_exact_lines():
    with pytest.raises(ValueError, match=rf"^{WHERE}.side: None; choose per_side or symmetric$"):
        check_rule({})
    rule = {"side": "symmetric", "ranges": [{"above": 1, "tests": ["a"]}, {"above": 2, "tests": ["x", "a", "y"]}]}
    with pytest.raises(ValueError, match=rf"^{WHERE}.ranges\[1\].tests: no held-out test x, y \(known: a, b\)$"):
        check_rule(rule, ["b", "a"])
    check_rule(rule)  # no known tests given: any name passes
    check_rule({"side": "per_side", "ranges": None}, ["a"])


def test_margins_take_the_range_with_the_largest_above_and_the_largest_error_of_its_tests():
    rule = {"side": "per_side", "ranges": [{"above": "64", "tests": ["a", "b"]}, {"above": 16, "tests": ["b"]}]}
    assert margins(16, ERRORS, rule) == (0.0, 0.0)
    assert margins("17", ERRORS, rule) == (0.05, 0.30)  # b only
    assert margins(65, ERRORS, rule) == (0.20, 0.30)  # a's optimism, b's pessimism
    assert margins(65, ERRORS, {**rule, "side": "symmetric"}) == (0.30, 0.30)
    assert margins(17, ERRORS, {**rule, "side": "symmetric"}) == (0.30, 0.30)
    assert margins(10_000, ERRORS, {"side": "per_side"}) == (0.0, 0.0)


def test_widen_every_key():
    rule = {"side": "per_side", "ranges": [{"above": 16, "tests": ["a", "b"]}]}
    wide = widen({"efficiency": 0.5, "low": "0.45", "high": 0.55, "workers": 32}, 32, ERRORS, rule)
    assert wide == {
        "efficiency": 0.5,
        "workers": 32,
        "bootstrap_low": 0.45,
        "bootstrap_high": 0.55,
        "low": pytest.approx(0.25),
        "high": pytest.approx(0.85),
        "margin_down": 0.20,
        "margin_up": 0.30,
    }
    assert widen({"low": 0.1, "high": 0.2}, 32, ERRORS, rule)["low"] == 0.0
