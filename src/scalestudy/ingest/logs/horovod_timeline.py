"""A Horovod timeline (HOROVOD_TIMELINE: the Chrome trace JSON rank 0 writes) -> one run: where the job's steps went.

What the timeline says: the ranks (the negotiation marks, as horovod-timelines-2019 counts them:
ingest.horovod_timelines.ranks_in), the backend (its MPI_/NCCL_/GLOO_ activities), and the per-step split of
scalestudy.profile.timeline: the run's metrics are exactly those `python -m scalestudy.profile summarize FILE --run
RUN_ID` logs (step_time_ms, step_negotiate_ms, step_comm_ms, step_comm_exposed_ms... : what figure 9 draws), the
whole timeline, no step left out. What it does not say: the model, framework, data, device and platform (`--model`,
`--framework`, `--data`, `--device`, `--platform`; the platform also from a Lambda benchmark folder's name,
resolve.py), all missing ones named in one error; the batch per worker is `not stated`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ...profile import ProfileError
from ...profile.timeline import BACKEND, read_timeline, summarize_timeline
from ...schema import NOT_STATED, RunRecord, SchemaError, canonical_model
from ..horovod_timelines import ranks_in
from . import LogOptions, log_record, run_tags
from .resolve import folder_platform, resolved

FORMAT = "horovod_timeline"
# An event of Horovod's own (not any Chrome trace): a negotiation, a collective or a cycle mark.
HOROVOD_EVENT_RE = re.compile(r'"name":\s*"(?:NEGOTIATE_[A-Z_]+|ALLREDUCE|BROADCAST|ALLGATHER|CYCLE_START)"')
NOT_IN_TIMELINE = ("model", "framework", "data", "device", "platform")


def sniff(lines: Sequence[str]) -> bool:
    """A JSON array or object of trace events with a Horovod activity among them."""
    first = next((line.strip() for line in lines if line.strip()), "")
    return first[:1] in ("[", "{") and any(HOROVOD_EVENT_RE.search(line) for line in lines)


def _summary(path: Path):
    """The timeline's summary (profile.timeline), refused with file:1 when it cannot be split into steps."""
    try:
        summary = summarize_timeline(path)
    except ProfileError as err:
        raise SchemaError(f"{path}:1: {err}") from None
    if not summary.metrics.get("step_time_ms"):
        raise SchemaError(f"{path}:1: fewer than three steps of allreduces in the timeline: no step time to split")
    return summary


def _backend(classes: list[dict]) -> str:
    """mpi, nccl, gloo... : the backend whose collectives the timeline shows ('+'-joined where several)."""
    names = sorted({c["class"].split("_")[0].lower() for c in classes if BACKEND.match(c["class"])})
    return "+".join(names) or NOT_STATED


def _check_given(path: Path, options: LogOptions, in_folder: tuple[str, str] | None) -> None:
    """Every param the timeline does not say is given (the platform may come from the folder), or one error
    naming all the options missing."""
    missing = [w for w in NOT_IN_TIMELINE if not getattr(options, w) and not (w == "platform" and in_folder)]
    if missing:
        wanted = " ".join(f"--{w} {w.upper()}" for w in missing)
        raise SchemaError(f"{path}:1: a Horovod timeline does not say the run's {', '.join(missing)}: give {wanted}")


def parse(path: Path, options: LogOptions) -> list[RunRecord]:
    """The one run of a Horovod timeline."""
    in_folder = folder_platform(path, None)
    _check_given(path, options, in_folder)
    summary = _summary(path)
    spans, _, _ = read_timeline(path)
    workers = ranks_in(spans, path)
    where = f"{path}:1"
    tags = {"profile": "timeline", "backend": _backend(summary.classes)}
    tags["workers_basis"] = f"timeline: negotiation marks of {workers} ranks"
    params: dict[str, object] = {
        "model": canonical_model(str(options.model), "--model"),
        "framework": resolved("framework", None, options.framework, "--framework", where, tags),
        "api": "horovod",
        "workers": workers,
        "device": resolved("device", None, options.device, "--device", where, tags),
        "data": resolved("data", None, options.data, "--data", where, tags),
        "batch_per_worker": NOT_STATED,
        "platform": resolved("platform", in_folder, options.platform, "--platform", where, tags),
    }
    tags.update(run_tags(options, path, 1, {"steps": f"{int(summary.metrics['timeline_steps'])} steps"}, FORMAT))
    return [log_record(options, path, None, params=params, metrics=summary.metrics, tags=tags, where=where)]
