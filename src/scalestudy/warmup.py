"""Where the warm-up of a per-step throughput series ends: one rule, for the harness (timing.aggregate, at
the end of each measured job) and the figures (the warm-up figure draws it on every series). NumPy only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def warmup_end(values: Sequence[float], *, tolerance: float = 0.10) -> int:
    """Index of the first step whose throughput reaches (1 - tolerance) of the steady state.

    Steady state = median of the second half of the series (the end of a run is the least
    disturbed by start-up: graph building, autotuning, input pipeline filling). Returns 0 for
    a series that starts steady, and len(values) - 1 at most.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("warm-up of an empty series")
    steady = float(np.median(x[x.size // 2 :]))
    reached = np.nonzero(x >= (1.0 - tolerance) * steady)[0]
    return int(reached[0]) if reached.size else x.size - 1
