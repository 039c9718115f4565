"""The model's held-out error, put into every prediction interval (the rule: conf/scaling/default.yaml
`held_out_error`). Pure functions.

A prediction's bootstrap band (fit.py) carries the fitted parameters' uncertainty only. How far the model itself
is off shows where it predicted points it was not fitted on, and there are two such tests: the study's own held-out
points (study.validation: fitted on 1-16 GPUs, predicting 32 and 64) and MLPerf's large GPU systems
(mlperf_check: fitted below 512 GPUs, predicting 512 to 4,320; the prediction there is the midpoint of the
admissible range). Each test gives two numbers: the most the model was too optimistic (predicted above measured)
and the most it was too pessimistic (below).

The rule: a prediction at N GPUs takes the tests of the last `ranges` entry whose `above` is below N (none: N is
inside the fit, the band stays as it is). With `side: per_side` its band's lower end moves down by the largest
optimistic error of those tests and its upper end up by the largest pessimistic one (the model erred on that
side, so the truth may lie there); with `side: symmetric` both move by the larger of the two. The lower end stops
at 0 (no efficiency is negative); the upper end does not stop at 1 (measured efficiencies above 1 exist).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

SIDES = ("per_side", "symmetric")


@dataclass(frozen=True)
class HeldOutError:
    """One held-out test: the largest error on each side, in efficiency (0.05 = 5 points), and where it was."""

    test: str
    optimistic: float  # max(predicted - measured), 0 when the model never predicted above the measurement
    pessimistic: float  # max(measured - predicted), 0 when never below
    points: int
    gpus_min: int
    gpus_max: int


def error_of(test: str, predicted: Sequence[float], measured: Sequence[float], gpus: Sequence[int]) -> HeldOutError:
    """The held-out error of one test from its predictions and the measured values at the same points."""
    if not len(predicted) or len(predicted) != len(measured) or len(measured) != len(gpus):
        raise ValueError(f"held-out test {test!r}: {len(predicted)} predictions for {len(measured)} measurements")
    gap = [float(p) - float(m) for p, m in zip(predicted, measured)]
    return HeldOutError(test, max(0.0, *gap), max(0.0, *(-g for g in gap)), len(gap), int(min(gpus)), int(max(gpus)))


def study_errors(checks: Iterable[Mapping]) -> dict[str, HeldOutError]:
    """Per dataset of study.validation() with held-out points: its held-out error."""
    out = {}
    for check in checks:
        held = check["held_out"]
        if held:
            out[check["dataset"]] = error_of(
                check["dataset"], [h["predicted"] for h in held], [h["observed"] for h in held],
                [h["workers"] for h in held],
            )  # fmt: skip
    return out


def mlperf_error(table: pd.DataFrame, test: str = "mlperf-training-resnet") -> HeldOutError:
    """MLPerf's test (mlperf_check.check_families): the midpoint of each admissible range against the measured."""
    return error_of(test, table["midpoint"].tolist(), table["measured"].tolist(), table["accelerators"].tolist())


def check_rule(rule: Mapping, known: Iterable[str] = ()) -> None:
    """The rule's keys, named in the error (conf/scaling/default.yaml held_out_error)."""
    where = "conf/scaling/default.yaml held_out_error"
    if rule.get("side") not in SIDES:
        raise ValueError(f"{where}.side: {rule.get('side')!r}; choose {' or '.join(SIDES)}")
    known = set(known)
    for i, entry in enumerate(rule.get("ranges") or []):
        unknown = [t for t in entry["tests"] if known and t not in known]
        if unknown:
            raise ValueError(f"{where}.ranges[{i}].tests: no held-out test {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(known))})")  # fmt: skip


def margins(workers: int, errors: Mapping[str, HeldOutError], rule: Mapping) -> tuple[float, float]:
    """(down, up): how far the rule moves the ends of a band at `workers` GPUs (0, 0 inside the fit)."""
    check_rule(rule, errors)
    applying = [r for r in rule.get("ranges") or [] if int(workers) > int(r["above"])]
    if not applying:
        return 0.0, 0.0
    tests = [errors[t] for t in max(applying, key=lambda r: int(r["above"]))["tests"]]
    down, up = max(e.optimistic for e in tests), max(e.pessimistic for e in tests)
    if rule["side"] == "symmetric":
        down = up = max(down, up)
    return down, up


def widen(band: Mapping[str, float], workers: int, errors: Mapping[str, HeldOutError], rule: Mapping) -> dict:
    """A prediction {efficiency, low, high} (the bootstrap band) with its interval widened by the held-out error:
    low and high become the widened ends, bootstrap_low and bootstrap_high keep the band."""
    down, up = margins(workers, errors, rule)
    return {
        **band,
        "bootstrap_low": float(band["low"]),
        "bootstrap_high": float(band["high"]),
        "low": max(0.0, float(band["low"]) - down),
        "high": float(band["high"]) + up,
        "margin_down": down,
        "margin_up": up,
    }
