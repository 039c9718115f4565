"""Where a step's time goes: summaries of profiler output, outside any GUI (`python -m scalestudy.profile`).

- gpu.py: Nsight Systems and nvprof SQLite exports -> time per kernel class (compute, NCCL, memcpy by
  direction, memset, idle), top kernels.
- timeline.py: Horovod timelines (Gloo, MPI or NCCL) -> time per Horovod activity, and per training step the
  allreduce time, negotiation, fusion-buffer copies, fused allreduces and their bytes, and how much of the
  communication overlapped the computation.

`summarize(path)` tells the formats apart by their content, not their names. A file that is truncated, damaged
or not one of these formats raises ProfileError with one line naming the file and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"


class ProfileError(ValueError):
    """A profile file that cannot be summarized; the message names the file and what is wrong."""


@dataclass
class Summary:
    """What a profile says, in plain numbers (ms unless a name says otherwise)."""

    path: str
    kind: str  # nsys | nvprof | horovod-timeline
    facts: dict[str, object] = field(default_factory=dict)  # tool, version, devices, span...
    classes: list[dict] = field(default_factory=list)  # {class, count, ms, share, [bytes]}
    top: list[dict] = field(default_factory=list)  # {name, class, count, ms, share}
    steps: list[dict] = field(default_factory=list)  # per training step (timelines)
    metrics: dict[str, float] = field(default_factory=dict)  # schema.METRICS names, for an MLflow run


Window = tuple[float | None, float | None]


def parse_window(text: str | None) -> Window | None:
    """'START:END' in seconds from the first recorded activity ('2:', ':5.5' leave one side open)."""
    if not text:
        return None
    if ":" not in text:
        raise ValueError(f"--window {text!r}: write START:END in seconds, e.g. 10:12.5 or 10:")
    start, end = (part.strip() for part in text.split(":", 1))
    try:
        window = (float(start) if start else None, float(end) if end else None)
    except ValueError:
        raise ValueError(f"--window {text!r}: START and END must be numbers of seconds") from None
    if window[0] is not None and window[1] is not None and window[1] <= window[0]:
        raise ValueError(f"--window {text!r}: END must be after START")
    return window


def summarize(path: str | Path, window: Window | None = None, top: int = 10) -> Summary:
    """Summary of one profile file, whichever of the known formats it is (read from its first bytes)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError as err:
        raise ProfileError(f"{path}: cannot read ({err.strerror})") from None
    if not head:
        raise ProfileError(f"{path}: empty file")
    if head.startswith(SQLITE_MAGIC):
        from .gpu import summarize_sqlite

        return summarize_sqlite(path, window=window, top=top)
    if head.lstrip()[:1] in (b"[", b"{"):
        from .timeline import summarize_timeline

        return summarize_timeline(path, window=window, top=top)
    if head.startswith(b"SQLite format"):
        raise ProfileError(f"{path}: damaged SQLite header")
    raise ProfileError(
        f"{path}: neither an SQLite database (Nsight Systems or nvprof export) nor a JSON Horovod timeline"
        " (an .nsys-rep report must be exported first: nsys export --type sqlite FILE.nsys-rep)"
    )
