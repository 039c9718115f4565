"""TensorFlow's LoggingTensorHook as HackSA's logs print it: `... global_step = N (X sec)` every tenth step, X
the seconds since the hook's previous line (steps N-10 to N), one line per rank."""

from __future__ import annotations

import re

INTERVAL_RE = re.compile(r"global_step = (\d+) \((\d+(?:\.\d+)?) sec\)")


def logged_intervals(text: str) -> dict[int, list[float]]:
    """{step N: the ranks' seconds for steps N-10 to N} of a log's text."""
    found: dict[int, list[float]] = {}
    for step, seconds in INTERVAL_RE.findall(text):
        found.setdefault(int(step), []).append(float(seconds))
    return found


def warmup_intervals(text: str) -> dict[str, float]:
    """time_first_interval_s, the logging hook's seconds for steps 0 to 10 (the ranks' mean), and
    time_steady_interval_s, the median over the later ten-step intervals of their ranks' mean: the first steps'
    extra time is the warm-up the throughput hook, which logs from step 21, cannot see. A log without the
    lines gives neither."""
    intervals = logged_intervals(text)
    out = {}
    if intervals.get(10):
        out["time_first_interval_s"] = sum(intervals[10]) / len(intervals[10])
    later = sorted(sum(v) / len(v) for step, v in intervals.items() if step > 10)
    if later:
        mid = len(later) // 2
        out["time_steady_interval_s"] = later[mid] if len(later) % 2 else (later[mid - 1] + later[mid]) / 2
    return out
