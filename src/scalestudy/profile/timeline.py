"""Horovod timelines (HOROVOD_TIMELINE): Chrome trace events written by rank 0, one `pid` per tensor.

What a timeline holds (Horovod 0.16 .. 0.28, Gloo, MPI or NCCL):
- per tensor, a NEGOTIATE_<OP> span from the first rank asking to reduce it until every rank has (an `X`
  mark named after each rank as it becomes ready), then the <OP> span (ALLREDUCE, BROADCAST, ALLGATHER...)
  holding the backend's activities: MEMCPY_IN_FUSION_BUFFER, MPI_ALLREDUCE / NCCL_ALLREDUCE /
  GLOO_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER...; the span's end carries the tensor's dtype and shape;
- `B`/`E` pairs per pid (an `E` closes the last open `B` of its pid), `ts` in microseconds;
- the file is a JSON array that Horovod closes only at shutdown: a timeline of a job still running or
  killed has no closing bracket, and is read all the same. A file cut inside an event is an error.

Steps. In synchronous data-parallel training every gradient tensor is reduced exactly once per step, so the
k-th ALLREDUCE of a tensor belongs to step k: the per-step numbers need no clock shared with the training
loop. Per step: the union of the ALLREDUCE spans (communication), of the negotiations (waiting for the
ranks) and of the fusion-buffer copies; the number of fused allreduces (groups of overlapping backend
collectives) and the bytes reduced; and the exposed communication: from the moment the last gradient of
the step was ready on every rank (the end of the last negotiation) to the end of the last allreduce. What
ran before that moment overlapped the computation of the gradients still to come.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import ProfileError, Summary, Window
from .intervals import clip, overlap_length, overlapping_groups, union_length

# A tensor's collective on the backend (MPI_ALLREDUCE, NCCL_ALLREDUCE, GLOO_ALLREDUCE, NCCL_REDUCESCATTER...).
BACKEND = re.compile(r"^(MPI|NCCL|GLOO|CCL|DDL|ADASUM)_[A-Z_]+$")
FUSION_COPIES = ("MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER")
HOROVOD_ACTIVITY = re.compile(r"^(NEGOTIATE_[A-Z_]+|ALLREDUCE|ALLGATHER|BROADCAST|ALLTOALL|REDUCESCATTER|CYCLE_START)$")
DTYPE_BYTES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
}


@dataclass
class Span:
    pid: int
    name: str
    start: float  # us
    end: float  # us
    args: dict


def _load_events(path: Path) -> list:
    text = path.read_text(errors="replace")
    try:
        events = json.loads(text)
    except json.JSONDecodeError:
        body = text.rstrip()
        if body.endswith(","):
            body = body[:-1]
        try:
            events = json.loads(body + "]")  # a timeline Horovod has not closed yet
        except json.JSONDecodeError as err:
            raise ProfileError(
                f"{path}: truncated or damaged JSON trace: it breaks at line {err.lineno} column {err.colno}"
                f" of {text.count(chr(10)) + 1} ({err.msg}); a Horovod timeline may lack its closing ']',"
                " but not part of an event"
            ) from None
    if isinstance(events, dict) and isinstance(events.get("traceEvents"), list):
        events = events["traceEvents"]
    if not isinstance(events, list) or not all(isinstance(e, dict) and "ph" in e for e in events):
        raise ProfileError(f"{path}: JSON, but not a Chrome trace (a list of events with 'ph')")
    horovod = any(HOROVOD_ACTIVITY.match(str(e.get("name", ""))) for e in events) or any(
        "start_time_since_epoch_in_micros" in (e.get("args") or {}) for e in events if e.get("ph") == "M"
    )
    if not horovod:
        raise ProfileError(
            f"{path}: a Chrome trace, but not a Horovod timeline (no NEGOTIATE_*, ALLREDUCE, BROADCAST or"
            " CYCLE_START event)"
        )
    return events


def _check_event(path: Path, number: int, event: dict) -> None:
    """An event's pid a whole number, its ts and dur finite numbers; else ProfileError naming the event."""
    what = f"{path}: event {number} ({event.get('ph')!r} {str(event.get('name'))[:40]!r})"
    pid = event.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        raise ProfileError(f"{what}: pid {pid!r:.40} is not a whole number")
    for key in ("ts", "dur"):
        if key not in event:
            continue
        value = event[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            shown = "null" if value is None else f"{value!r:.40}"
            raise ProfileError(f"{what}: {key} {shown} is not a finite number of microseconds")


def read_timeline(path: str | Path) -> tuple[list[Span], dict[int, str], dict]:
    """(spans, tensor name per pid, facts) of a Horovod timeline; B/E paired per pid with a stack."""
    path = Path(path)
    events = _load_events(path)
    names: dict[int, str] = {}
    stacks: dict[int, list[tuple[str, float]]] = {}
    spans: list[Span] = []
    marks = Counter()
    unmatched = 0
    start_unix = None
    stamps = []
    for number, event in enumerate(events, 1):
        _check_event(path, number, event)
        phase, pid = event.get("ph"), event.get("pid")
        if phase == "M":
            args = event.get("args") or {}
            if event.get("name") == "process_name" and "name" in args:
                names[pid] = str(args["name"])
            if "start_time_since_epoch_in_micros" in args:
                start_unix = float(args["start_time_since_epoch_in_micros"]) / 1e6
            continue
        if "ts" not in event:
            continue
        ts = float(event["ts"])
        stamps.append(ts)
        if phase == "B":
            stacks.setdefault(pid, []).append((str(event.get("name")), ts))
        elif phase == "E":
            stack = stacks.get(pid)
            if not stack:
                unmatched += 1
                continue
            name, begin = stack.pop()
            spans.append(Span(pid, name, begin, ts, event.get("args") or {}))
        elif phase == "X":
            # rank-ready marks inside a negotiation (named after the rank), with a duration of 0
            spans.append(Span(pid, "X:" + str(event.get("name")), ts, ts + float(event.get("dur") or 0), {}))
        else:
            marks[str(event.get("name"))] += 1
    open_spans = sum(len(s) for s in stacks.values())
    facts = {
        "events": len(events),
        "instant_events": dict(marks),
        "open_spans": open_spans,
        "unmatched_ends": unmatched,
        "first_ts_us": min(stamps) if stamps else None,
        "span_s": (max(stamps) - min(stamps)) / 1e6 if stamps else 0.0,
        "start_unix": start_unix,
        "tensors": len(names),
    }
    return spans, names, facts


def tensor_bytes(args: dict) -> int | None:
    """Bytes of a tensor from the dtype and shape Horovod writes at the end of its op span."""
    dtype, shape = args.get("dtype"), args.get("shape")
    if dtype is None or shape is None:
        return None
    size = DTYPE_BYTES.get(str(dtype))
    dims = [int(d) for d in re.findall(r"-?\d+", str(shape))]
    if size is None or any(d < 0 for d in dims):
        return None
    return size * int(np.prod(dims, dtype=np.int64)) if dims else size


def fused_count(collectives: list[Span]) -> int:
    """Fused allreduces among one step's collectives: the tensors of one fused allreduce share its collective, so
    their spans overlap. A hierarchical allreduce runs several collectives one after the other (NCCL_REDUCESCATTER,
    MPI_ALLREDUCE, NCCL_ALLGATHER), so the groups are counted per collective and the largest count is taken."""
    names = {s.name for s in collectives}
    return max(
        overlapping_groups([s.start for s in collectives if s.name == n], [s.end for s in collectives if s.name == n])
        for n in names
    )


def per_step(spans: list[Span], window: tuple[float, float] | None = None) -> tuple[list[dict], dict]:
    """Per training step: the allreduce numbers (see the module doc). Returns (steps, facts)."""
    by_pid: dict[int, dict[str, list[Span]]] = {}
    for span in spans:
        by_pid.setdefault(span.pid, {}).setdefault(span.name, []).append(span)
    for kinds in by_pid.values():
        for items in kinds.values():
            items.sort(key=lambda s: s.start)
    counts = {pid: len(kinds.get("ALLREDUCE", [])) for pid, kinds in by_pid.items() if kinds.get("ALLREDUCE")}
    if not counts:
        return [], {"steps": 0, "gradient_tensors": 0, "tensors_with_other_counts": 0}
    tally = Counter(counts.values())
    n_steps = max(tally, key=lambda c: (tally[c], c))  # the count most tensors share: one per step
    tensors = sorted(pid for pid, c in counts.items() if c == n_steps)
    # The activities inside each allreduce (fusion copies, the backend's collective), by step.
    inside: list[list[Span]] = [[] for _ in range(n_steps)]
    for pid in tensors:
        reduces = by_pid[pid]["ALLREDUCE"]
        starts = np.array([r.start for r in reduces])
        for name, items in by_pid[pid].items():
            if name in FUSION_COPIES or BACKEND.match(name):
                for span in items:
                    k = int(np.searchsorted(starts, span.start, side="right")) - 1
                    if k >= 0 and span.end <= reduces[k].end:
                        inside[k].append(span)
    steps = []
    for k in range(n_steps):
        reduce_ = [by_pid[p]["ALLREDUCE"][k] for p in tensors]
        negotiate = [
            by_pid[p]["NEGOTIATE_ALLREDUCE"][k]
            for p in tensors
            if len(by_pid[p].get("NEGOTIATE_ALLREDUCE", [])) == n_steps
        ]
        copies = [s for s in inside[k] if s.name in FUSION_COPIES]
        backend = [s for s in inside[k] if BACKEND.match(s.name)] or reduce_
        first = min(s.start for s in negotiate or reduce_)
        if window is not None and not window[0] <= first < window[1]:
            continue
        done = max(s.end for s in reduce_)
        ready = max(s.end for s in negotiate) if negotiate else min(s.start for s in reduce_)
        comm = union_length([s.start for s in reduce_], [s.end for s in reduce_])
        exposed = overlap_length([s.start for s in reduce_], [s.end for s in reduce_], ready, done)
        sizes = [tensor_bytes(s.args) for s in reduce_]
        steps.append(
            {
                "step": k,
                "first_us": first,
                "allreduce_ms": comm / 1e3,
                "exposed_ms": exposed / 1e3,
                "negotiate_ms": union_length([s.start for s in negotiate], [s.end for s in negotiate]) / 1e3,
                "fusion_copy_ms": union_length([s.start for s in copies], [s.end for s in copies]) / 1e3,
                "fused_allreduces": fused_count(backend),
                "bytes": float(sum(s for s in sizes if s is not None)) if any(s is not None for s in sizes) else None,
            }
        )
    facts = {
        "steps": n_steps,
        "gradient_tensors": len(tensors),
        "tensors_with_other_counts": len(counts) - len(tensors),
    }
    return steps, facts


def step_metrics(steps: list[dict], step_times_s: list[float] | None = None) -> dict[str, float]:
    """Mean per-step numbers of `steps` as run metrics (schema.METRICS names).

    step_times_s: the training loop's own step times for these steps (the harness's clock); without them
    the step time is the median gap between consecutive steps' first negotiation in the timeline."""
    if not steps:
        return {}
    mean = lambda key: float(np.mean([s[key] for s in steps]))  # noqa: E731
    comm, exposed = mean("allreduce_ms"), mean("exposed_ms")
    metrics = {
        "step_comm_ms": comm,
        "step_comm_exposed_ms": exposed,
        "step_negotiate_ms": mean("negotiate_ms"),
        "step_fusion_copy_ms": mean("fusion_copy_ms"),
        "step_allreduces": mean("fused_allreduces"),
        "timeline_steps": float(len(steps)),
    }
    if all(s["bytes"] is not None for s in steps):
        metrics["step_allreduce_mb"] = mean("bytes") / 1e6
    if comm > 0:
        metrics["step_comm_overlap_share"] = float(
            1
            - min(sum(s["exposed_ms"] for s in steps), sum(s["allreduce_ms"] for s in steps))
            / sum(s["allreduce_ms"] for s in steps)
        )
    if step_times_s:
        step_ms = 1e3 * float(np.mean(step_times_s))
    elif len(steps) > 2:
        gaps = np.diff([s["first_us"] for s in steps]) / 1e3
        step_ms = float(np.median(gaps))
    else:
        return metrics
    metrics["step_time_ms"] = step_ms
    metrics["step_compute_ms"] = step_ms - exposed
    metrics["step_comm_share"] = comm / step_ms
    return metrics


def summarize_timeline(
    path: str | Path,
    window: Window | None = None,
    top: int = 10,
    *,
    skip_steps: int = 0,
    step_times_s: list[float] | None = None,
) -> Summary:
    """Time per Horovod activity, top tensors by allreduce time, and the per-step numbers.

    window: seconds from the first event; spans are cut to it, and a step counts when its first negotiation
    starts inside. skip_steps: leave the first steps (warm-up) out of the per-step means. step_times_s: the
    training loop's times of the steps kept (after skip_steps), see step_metrics."""
    path = Path(path)
    spans, names, facts = read_timeline(path)
    origin = facts["first_ts_us"] or 0.0
    lo = None if not window or window[0] is None else origin + window[0] * 1e6
    hi = None if not window or window[1] is None else origin + window[1] * 1e6
    timed = [s for s in spans if not s.name.startswith("X:")]
    classes = []
    for name in sorted({s.name for s in timed}):
        group = [s for s in timed if s.name == name]
        starts, ends, _ = clip([s.start for s in group], [s.end for s in group], lo, hi)
        if starts.size:
            classes.append({"class": name, "count": int(starts.size), "ms": float((ends - starts).sum() / 1e3)})
    classes.sort(key=lambda row: -row["ms"])

    per_tensor: dict[int, list[float]] = {}
    for span in timed:
        if span.name == "ALLREDUCE":
            s, e, _ = clip([span.start], [span.end], lo, hi)
            if s.size:
                per_tensor.setdefault(span.pid, []).append(float(e[0] - s[0]))
    total_ar = sum(sum(v) for v in per_tensor.values()) or 1.0
    top_rows = sorted(
        (
            {
                "name": names.get(pid, f"pid {pid}"),
                "class": "allreduce",
                "count": len(v),
                "ms": sum(v) / 1e3,
                "share": sum(v) / total_ar,
            }
            for pid, v in per_tensor.items()
        ),
        key=lambda row: -row["ms"],
    )[:top]

    steps, step_facts = per_step(spans, (lo if lo is not None else -np.inf, hi if hi is not None else np.inf))
    kept = [s for s in steps if s["step"] >= skip_steps]
    metrics = step_metrics(kept, step_times_s)
    facts.update(step_facts)
    facts["steps_summarized"] = len(kept)
    facts.pop("first_ts_us", None)
    return Summary(
        path=str(path),
        kind="horovod-timeline",
        facts=facts,
        classes=classes,
        top=top_rows,
        steps=steps,
        metrics=metrics,
    )
