"""Shared timing of training steps: one clock per rank, and pure functions that turn the clock
readings of all ranks into the run's numbers. Both runners use it; nothing here imports a
framework or MLflow.

Method (docs/harness.md, "Method"):
- A rank reads its clock AFTER the device finished a step (the runner syncs first: TF returns a
  numpy loss, MXNet `asnumpy()`), so a step's time is the gap between two such readings.
  Clock: time.perf_counter (monotonic), with one time.time() anchor taken at the same moment to
  turn readings into wall-clock times for MLflow's step timestamps.
- Steps 0 .. warmup_steps-1 are warm-up and are excluded from every throughput number; they stay
  in the per-step series, where MSER-5 (derive.warmup_end) reports where the warm-up looks over.
- A rank's throughput = images it processed in the measured steps / time those steps took.
  throughput_total = sum over ranks of what each rank measured (not rank 0 x N);
  throughput_per_worker = mean over ranks.
- Per-step statistics are over the per-step totals (sum over ranks of each rank's images/s at
  that step): mean, median, standard error of the mean, and a 95 % interval for the mean from
  Student's t with n-1 degrees of freedom (steps are treated as independent draws; on a busy
  machine neighbouring steps are correlated, so the interval is then too narrow, never too wide).
- Times are measured from the job start (when the launcher started the ranks):
  time_init_s = the last rank's first step start; time_total_s = the last rank's last step end;
  time_work_s = total - init; time_launch_s = the last rank's program start (the launcher's share of
  init); time_per_epoch_s = mean over complete epochs of the slowest rank's
  epoch time (epoch 0 includes the warm-up).
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..schema import SERIES

STEP_SERIES = "step_throughput_total"
assert STEP_SERIES in SERIES


class TimingError(ValueError):
    """The clock readings cannot give the numbers asked for (too few steps, ranks disagree)."""


# --------------------------------------------------------------------------------------------
# The clock of one rank


@dataclass
class StepTimer:
    """Clock readings of one rank: call start() before the first step and step_done() after each step
    has finished on the device; every `steps_per_epoch` steps end an epoch."""

    images_per_step: int
    steps_per_epoch: int | None = None
    clock: Callable[[], float] = time.perf_counter
    wall: Callable[[], float] = time.time
    loop_start: float | None = None
    step_ends: list[float] = field(default_factory=list)
    epoch_ends: list[int] = field(default_factory=list)  # number of steps done at each epoch end

    def __post_init__(self) -> None:
        self._perf0 = self.clock()
        self._wall0 = self.wall()

    def to_unix(self, reading: float) -> float:
        """A clock reading as a unix time (s), through the anchor taken at construction."""
        return self._wall0 + (reading - self._perf0)

    def start(self) -> None:
        self.loop_start = self.clock()

    def step_done(self) -> int:
        """Record the end of a step; returns the number of the step just finished (0-based)."""
        if self.loop_start is None:
            raise RuntimeError("StepTimer.step_done() before start()")
        self.step_ends.append(self.clock())
        if self.steps_per_epoch and len(self.step_ends) % self.steps_per_epoch == 0:
            self.epoch_ends.append(len(self.step_ends))
        return len(self.step_ends) - 1

    @property
    def steps(self) -> int:
        return len(self.step_ends)

    def record(self, **extra) -> dict:
        """This rank's readings as unix times, JSON-ready, for rank 0 to gather."""
        if self.loop_start is None:
            raise RuntimeError("StepTimer.record() before start()")
        return {
            "images_per_step": int(self.images_per_step),
            "loop_start_unix": self.to_unix(self.loop_start),
            "step_end_unix": [self.to_unix(t) for t in self.step_ends],
            "epoch_end_steps": list(self.epoch_ends),
            **extra,
        }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------------------------
# Pure functions of clock readings


def step_rates(images_per_step: int, loop_start: float, step_ends: Sequence[float]) -> np.ndarray:
    """images/s of each step: images_per_step over the gap since the previous step ended."""
    ends = np.asarray(step_ends, dtype=float)
    gaps = np.diff(np.concatenate([[float(loop_start)], ends]))
    if np.any(gaps <= 0):
        bad = int(np.nonzero(gaps <= 0)[0][0])
        raise TimingError(f"step {bad} took {gaps[bad]!r} s: clock readings must increase")
    return images_per_step / gaps


def mean_interval(values: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Mean, median, standard error and the `level` interval of the mean (Student's t, n-1 dof)."""
    from scipy.stats import t as student_t

    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        raise TimingError(f"an interval needs at least 2 values, got {n}")
    mean = float(x.mean())
    stderr = float(x.std(ddof=1) / math.sqrt(n))
    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * stderr
    return {
        "mean": mean,
        "median": float(np.median(x)),
        "stderr": stderr,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "n": n,
    }


def check_steps(total_steps: int, warmup_steps: int, min_measured: int) -> int:
    """Number of measured steps, or TimingError naming the numbers when there are too few."""
    measured = total_steps - warmup_steps
    need = max(int(min_measured), 2)
    if measured < need:
        raise TimingError(
            f"only {measured} measured steps ({total_steps} steps run, {warmup_steps} of them warm-up); "
            f"at least {need} are required (min_measured_steps={min_measured}): run more steps or fewer warm-up steps"
        )
    return measured


def epoch_times(loop_start: float, step_ends: Sequence[float], epoch_end_steps: Sequence[int]) -> list[float]:
    """Wall time of each complete epoch of one rank (the first one starts at loop_start)."""
    out, begin = [], float(loop_start)
    for n in epoch_end_steps:
        if n <= 0:
            continue
        end = float(step_ends[n - 1])
        out.append(end - begin)
        begin = end
    return out


def aggregate(ranks: Sequence[dict], *, warmup_steps: int, min_measured: int, job_start_unix: float) -> dict:
    """Turn every rank's StepTimer.record() into the run's metrics and per-step series.

    Returns {"metrics": {...}, "series": {STEP_SERIES: [(step, unix ms, value), ...]},
    "per_rank": [{rank, throughput, steps}, ...]}. Raises TimingError when there are too few
    measured steps or the ranks did not run the same number of steps.
    """
    from ..derive import warmup_end  # here, not at the top: a rank imports this module, and derive imports pandas

    if not ranks:
        raise TimingError("no rank reported any timing")
    counts = {len(r["step_end_unix"]) for r in ranks}
    if len(counts) != 1:
        raise TimingError(f"ranks ran different numbers of steps: {sorted(counts)}")
    total_steps = counts.pop()
    measured = check_steps(total_steps, warmup_steps, min_measured)

    rates = np.vstack([step_rates(r["images_per_step"], r["loop_start_unix"], r["step_end_unix"]) for r in ranks])
    per_rank = []
    for r in ranks:
        ends = r["step_end_unix"]
        start = ends[warmup_steps - 1] if warmup_steps > 0 else r["loop_start_unix"]
        per_rank.append(r["images_per_step"] * measured / (ends[-1] - start))
    totals = rates.sum(axis=0)  # per step, summed over ranks
    stats = mean_interval(totals[warmup_steps:])

    init = max(r["loop_start_unix"] for r in ranks) - job_start_unix
    total = max(r["step_end_unix"][-1] for r in ranks) - job_start_unix
    metrics = {
        "throughput_total": float(sum(per_rank)),
        "throughput_per_worker": float(np.mean(per_rank)),
        "throughput_mean": stats["mean"],
        "throughput_median": stats["median"],
        "throughput_stderr": stats["stderr"],
        "throughput_ci95_low": stats["ci_low"],
        "throughput_ci95_high": stats["ci_high"],
        "measured_steps": float(measured),
        "warmup_steps_configured": float(warmup_steps),
        "warmup_detected_step": float(warmup_end(totals)),
        "time_total_s": float(total),
        "time_init_s": float(init),
        "time_work_s": float(total - init),
    }
    if all("process_start_unix" in r for r in ranks):
        metrics["time_launch_s"] = float(max(r["process_start_unix"] for r in ranks) - job_start_unix)
    epochs = [epoch_times(r["loop_start_unix"], r["step_end_unix"], r["epoch_end_steps"]) for r in ranks]
    n_epochs = min(len(e) for e in epochs)
    if n_epochs:
        slowest = [max(e[i] for e in epochs) for i in range(n_epochs)]
        metrics["time_per_epoch_s"] = float(np.mean(slowest))
    stamps = ranks[0]["step_end_unix"]
    series = [(step, round(stamps[step] * 1000), float(totals[step])) for step in range(total_steps)]
    return {
        "metrics": metrics,
        "series": {STEP_SERIES: series},
        "per_rank": [{"rank": i, "throughput": float(v), "steps": total_steps} for i, v in enumerate(per_rank)],
    }
