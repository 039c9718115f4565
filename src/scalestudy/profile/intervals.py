"""Time intervals: clipping to a window, the length of a union, and groups of overlapping intervals.

Busy time is a union, not a sum: two kernels on two streams at once keep a device busy once, and the fused
allreduce of ten tensors is one collective whose ten spans overlap."""

from __future__ import annotations

import numpy as np


def clip(starts: np.ndarray, ends: np.ndarray, lo: float | None, hi: float | None):
    """(starts, ends, kept) of the intervals that overlap [lo, hi], cut to it (None: open side)."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    lo = -np.inf if lo is None else lo
    hi = np.inf if hi is None else hi
    kept = (ends > lo) & (starts < hi)
    return np.clip(starts[kept], lo, hi), np.clip(ends[kept], lo, hi), kept


def merged(starts, ends) -> list[tuple[float, float]]:
    """The union of the intervals as disjoint intervals, sorted."""
    order = np.argsort(starts, kind="stable")
    out: list[list[float]] = []
    for s, e in zip(np.asarray(starts, dtype=float)[order], np.asarray(ends, dtype=float)[order]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def union_length(starts, ends) -> float:
    """Length of the union of the intervals."""
    return float(sum(e - s for s, e in merged(starts, ends)))


def overlap_length(starts, ends, lo: float, hi: float) -> float:
    """Length of the union of the intervals inside [lo, hi]."""
    cut_s, cut_e, _ = clip(np.asarray(starts, dtype=float), np.asarray(ends, dtype=float), lo, hi)
    return union_length(cut_s, cut_e)


def overlapping_groups(starts, ends) -> int:
    """Number of groups of intervals that overlap one another (chains count as one group)."""
    return len(merged(starts, ends))
