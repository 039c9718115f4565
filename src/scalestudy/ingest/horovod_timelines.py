"""horovod-timelines-2019: published Horovod timelines -> one run per timeline, split per step.

Each file is one job. Its rank count is not written in the file as such: it is read from the negotiation
marks (each rank marks every tensor's negotiation as it becomes ready, an `X` event named by the rank). The per-step
numbers are scalestudy.profile.timeline's, the same the harness records for a measured run with
profile=timeline; without a training-loop clock the step time is the median gap between steps.
"""

from __future__ import annotations

from pathlib import Path

from ..profile.timeline import Span, read_timeline, summarize_timeline
from ..schema import NOT_STATED, RunRecord, SchemaError
from . import fetched_raw_files, published_tags, read_source


def ranks_of(path: Path) -> int:
    """The job's rank count: the ranks that mark one tensor's negotiation (Horovod's `X:` marks name them)."""
    spans, _, _ = read_timeline(path)
    return ranks_in(spans, path)


def ranks_in(spans: list[Span], path: Path) -> int:
    """The rank count of a timeline's spans (see ranks_of); `path` names the file in the error."""
    marks: dict[int, set[str]] = {}
    for span in spans:
        if span.name.startswith("X:"):
            marks.setdefault(span.pid, set()).add(span.name)
    if not marks:
        raise SchemaError(f"{path}: no negotiation marks, so the timeline does not say how many ranks ran")
    return max(len(names) for names in marks.values())


def read(folder: Path) -> list[RunRecord]:
    files, source = fetched_raw_files(folder, read_source(folder))
    records = []
    for name, path in files.items():
        where = f"{path}:1"
        summary = summarize_timeline(path)
        if not summary.metrics.get("step_time_ms"):
            raise SchemaError(f"{where}: fewer than three steps of allreduces: no step time to split")
        workers = ranks_of(path)
        records.append(
            RunRecord(
                experiment=source["experiment"],
                key=name,
                params={
                    "model": "trivial",
                    "framework": "tensorflow",
                    "api": "horovod",
                    "workers": workers,
                    "device": NOT_STATED,
                    "data": "synthetic",
                    "batch_per_worker": NOT_STATED,
                    "platform": NOT_STATED,
                },
                metrics=summary.metrics,
                tags={**published_tags(source, where), "profile": "timeline", "backend": "mpi"},
                where=where,
            )
        )
    return records
