"""Where the warm-up of a per-step throughput series ends: one rule, for the harness (timing.aggregate, at the
end of each measured job) and the figures (the warm-up figure draws it on every series). NumPy only.

The rule is MSER-5, the Marginal Standard Error Rule on batch means of 5 observations (White 1997; White,
Cobb and Spratt 2000), a standard truncation rule of simulation output analysis: cut the first d batches where
the standard error of the mean of what is left, Var(rest) / (k - d), is smallest, d in the first half of the
series only (a minimum in the second half means the series is too short to show its steady state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BATCH = 5  # the "5" of MSER-5: observations per batch mean
MIN_BATCHES = 4  # fewer batch means than this cannot tell a warm-up from noise


@dataclass(frozen=True)
class Truncation:
    """Where MSER-5 cuts a series: `step` is the index of the first steady observation (0: nothing to cut)."""

    step: int
    batches: int  # batch means the series gives
    detectable: bool  # False: too short (fewer than MIN_BATCHES batch means), or the minimum lies past the half

    @property
    def outcome(self) -> str:
        """cut (a warm-up ends at `step`), none (steady from the first observation) or unjudged."""
        if not self.detectable:
            return "unjudged"
        return "cut" if self.step > 0 else "none"


def mser(values: Sequence[float], *, batch: int = BATCH) -> Truncation:
    """MSER-`batch` truncation of a series (see the module's docstring)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("warm-up of an empty series")
    if not np.all(np.isfinite(x)):
        raise ValueError("warm-up of a series with missing or infinite values")
    k = x.size // batch
    if k < MIN_BATCHES:
        return Truncation(step=0, batches=k, detectable=False)
    means = x[: k * batch].reshape(k, batch).mean(axis=1)
    # MSER(d) = sum of squared deviations of means[d:] from their mean / (k - d)^2, for d = 0 .. k - 1
    scores = [np.sum((means[d:] - means[d:].mean()) ** 2) / (k - d) ** 2 for d in range(k - 1)]
    d = int(np.argmin(scores))
    if d > k // 2:
        return Truncation(step=0, batches=k, detectable=False)
    return Truncation(step=d * batch, batches=k, detectable=True)


def warmup_end(values: Sequence[float], *, batch: int = BATCH) -> int:
    """The index of the first observation after the warm-up (0 when there is none to cut or the series is too
    short to tell; `mser` says which)."""
    return mser(values, batch=batch).step
