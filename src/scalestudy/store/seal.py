"""What a run holds, sealed by a hash of its values as the builder reads them: a change made behind the
builder's back (a metric logged through the MLflow UI's REST API, a param or tag edited) no longer matches.

A run's `values_hash` tag is written with its content hash, last. It hashes, in three parts, the run's params,
its latest metric values and its tags (all but MLflow's own `mlflow.*`, the two hash tags and the writer's
imported_at and time_basis), as strings read
back from the store: the builder, which reads exactly those in its one query per table, recomputes it for
every run it reads (a few milliseconds for the published store) and refuses a run whose values differ. Each
part is hashed on its own, so the refusal says which part changed. The hash is a seal against mistakes and
local processes, not a signature: a writer that recomputes it can forge it; `make import` still compares every
published run with its source and repairs it (store/write.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from .address import CONTENT_HASH

VALUES_HASH = "values_hash"
# Tags the writer adds about the write itself, not the run's values: unsealed (store/write.py, run_time_tags).
IMPORTED_AT = "imported_at"
TIME_BASIS = "time_basis"
WRITE_TAGS = (CONTENT_HASH, VALUES_HASH, IMPORTED_AT, TIME_BASIS)
PARTS = ("params", "metrics", "tags")


def _part(items: Mapping[str, str]) -> str:
    blob = json.dumps(sorted(items.items()), separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def metric_text(value) -> str:
    """A metric value as the hash sees it: the shortest text that reads back as the same double."""
    return repr(float(value)) if value is not None else "nan"


def sealed_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags the seal covers: not MLflow's own (run name, description, source) nor the writer's (the hash tags,
    the import time and the basis of the run's times)."""
    return {k: str(v) for k, v in tags.items() if not k.startswith("mlflow.") and k not in WRITE_TAGS}


def values_digest(params: Mapping[str, object], metrics: Mapping[str, object], tags: Mapping[str, str]) -> str:
    """'params:<12 hex> metrics:<12 hex> tags:<12 hex>' of a run's params, latest metrics and tags."""
    parts = ({k: str(v) for k, v in params.items()}, {k: metric_text(v) for k, v in metrics.items()}, sealed_tags(tags))
    return " ".join(f"{name}:{_part(part)}" for name, part in zip(PARTS, parts))


def changed_parts(recorded: str | None, now: str) -> list[str]:
    """Which parts (params, metrics, tags) differ between a recorded seal and the values read now."""
    if not recorded:
        return ["no values_hash"]
    was = dict(part.split(":", 1) for part in recorded.split() if ":" in part)
    is_now = dict(part.split(":", 1) for part in now.split())
    return [name for name in PARTS if was.get(name) != is_now[name]]


def expected_values(rec) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """The params, latest metric values and tags a RunRecord's run holds once written (store/write.py): params
    as text, each metric's latest point as MLflow picks it (largest step, then timestamp, then value)."""
    points: dict[str, list[tuple[int, int, float]]] = {}
    t0 = rec.start_ms or 0  # the metrics' timestamp; its order against the series' points does not matter at step 0
    for name, value in rec.metrics.items():
        points.setdefault(name, []).append((0, t0, float(value)))
    for name, series in rec.series.items():
        points.setdefault(name, []).extend((int(s), int(ts), float(v)) for s, ts, v in series)
    latest = {name: max(pts)[2] for name, pts in points.items() if pts}
    tags = {**{k: str(v) for k, v in rec.tags.items()}, "import_key": rec.key}
    return {k: str(v) for k, v in rec.params.items()}, latest, tags


def expected_history(rec) -> list[tuple[str, int, float]]:
    """Every metric point a RunRecord's run holds once written, as sorted (key, step, value)."""
    rows = [(k, 0, float(v)) for k, v in rec.metrics.items()]
    rows += [(k, int(s), float(v)) for k, series in rec.series.items() for s, _, v in series]
    return sorted(rows)


def differences(stored: tuple[Mapping, Mapping, Mapping], expected: tuple[Mapping, Mapping, Mapping],
                ignore_tags: frozenset[str] = frozenset()) -> list[str]:  # fmt: skip
    """'metric throughput_total was 9999.0, the source says 219.0' for each value that differs (`ignore_tags`: the
    tags that say where a source was found, not what it says)."""
    found = []
    for kind, held, wanted in zip(("param", "metric", "tag"), stored, expected):
        if kind == "tag":
            held = {k: v for k, v in sealed_tags(held).items() if k not in ignore_tags}
            wanted = {k: v for k, v in sealed_tags(wanted).items() if k not in ignore_tags}
        for key in sorted(set(held) | set(wanted)):
            h, w = held.get(key), wanted.get(key)
            if kind == "metric":
                h, w = (None if x is None else metric_text(x) for x in (h, w))
            elif h is not None:
                h = str(h)
            if h != w:
                found.append(f"{kind} {key} was {h if h is not None else 'absent'}, the source says "
                             f"{w if w is not None else 'absent'}")  # fmt: skip
    return found
