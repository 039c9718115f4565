"""Horovod's synthetic benchmark output (examples/*/..._synthetic_benchmark.py of PyTorch, TensorFlow, Keras,
MXNet) -> one run per benchmark run in the file.

Only rank 0 prints: `Model: <name>`, `Batch size: <per GPU>`, `Number of GPUs: N` (or CPUs), `Iter #k: X img/sec
per GPU` per iteration (an iteration = num_batches_per_iter batches), then `Img/sec per GPU: X +-Y` (the mean of
the iterations; Y = 1.96 standard deviations of the per-iteration values) and `Total img/sec on N GPU(s): X +-Y`
(N times rank 0's mean). Under horovodrun/mpirun lines may carry a `[1,0]<stdout>:` prefix (stripped).

throughput_total = the `Total img/sec` value, throughput_per_worker = `Img/sec per GPU`, workers = its N,
batch_per_worker = `Batch size`. Caveats: the total is N x rank 0's mean, not a sum over ranks; the output
names neither the framework (give --framework) nor the GPU (give --device; `CPU(s)` means device cpu); no
time stamps, so the per-iteration values are not stored as a series. A run whose `Model:` line is not followed
by its `Total img/sec` line stopped mid-way: an error (a Python error line makes it a FAILED run instead).

No real output of this benchmark was available to develop against (the project's reference samples hold none):
the format follows the Horovod examples' print statements (see ../shared/reference/logs/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...schema import RunRecord, SchemaError, canonical_model
from . import LogOptions, lines_of, log_record, param, python_error, run_tags, strip_rank

FORMAT = "horovod_synthetic"
MODEL_RE = re.compile(r"^Model:\s*(?P<value>\S+)\s*$")
BATCH_RE = re.compile(r"^Batch size:\s*(?P<value>\d+)\s*$")
COUNT_RE = re.compile(r"^Number of (?P<unit>[GC]PU)s:\s*(?P<value>\d+)\s*$")
PER_RE = re.compile(r"^Img/sec per (?P<unit>[GC]PU):\s*(?P<value>[\d.eE+-]+)\s*\+-\s*(?P<err>[\d.eE+-]+)\s*$")
TOTAL_RE = re.compile(
    r"^Total img/sec on (?P<n>\d+) (?P<unit>[GC]PU)\(s\):\s*(?P<value>[\d.eE+-]+)\s*\+-\s*(?P<err>[\d.eE+-]+)\s*$"
)
# Keras' model names (tensorflow2_keras_synthetic_benchmark.py: ResNet50, InceptionV3...) -> torchvision/tf spelling.
MODEL_NAMES = {"inceptionv3": "inception3", "inception_v3": "inception3", "resnet50v2": "resnet50"}


@dataclass
class _Run:
    start: int
    model: tuple[str, int]
    batch: tuple[int, int] | None = None
    count: tuple[int, int] | None = None
    per: tuple[float, float, int] | None = None
    total: tuple[int, str, float, float, int] | None = None  # (n, unit, value, +-, line)
    error: tuple[int, str] | None = None
    end: int = 0


def sniff(lines: Sequence[str]) -> bool:
    return any(TOTAL_RE.match(strip_rank(line)[1]) or PER_RE.match(strip_rank(line)[1]) for line in lines)


def _number(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SchemaError(f"{where}: {what} {text!r} is not a number") from None


def parse(path: Path, options: LogOptions) -> list[RunRecord]:
    runs: list[_Run] = []
    run: _Run | None = None
    for number, raw in enumerate(lines_of(path), start=1):
        text = strip_rank(raw)[1].strip()
        where = f"{path}:{number}"
        m = MODEL_RE.match(text)
        if m:
            run = _Run(start=number, model=(m["value"], number), end=number)
            runs.append(run)
            continue
        if run is None:
            continue
        run.end = number
        if m := BATCH_RE.match(text):
            run.batch = (int(m["value"]), number)
        elif m := COUNT_RE.match(text):
            run.count = (int(m["value"]), number)
        elif m := PER_RE.match(text):
            run.per = (_number(m["value"], where, "Img/sec"), _number(m["err"], where, "+-"), number)
        elif m := TOTAL_RE.match(text):
            value = _number(m["value"], where, "Total img/sec")
            run.total = (int(m["n"]), m["unit"], value, _number(m["err"], where, "+-"), number)
        elif (error := python_error(text)) and run.error is None:
            run.error = (number, error)
    if not runs:
        raise SchemaError(f"{path}:1: no 'Model:' line: no Horovod synthetic benchmark run in the file")
    return [_record(path, options, run, index if len(runs) > 1 else None) for index, run in enumerate(runs, 1)]


def _record(path: Path, options: LogOptions, run: _Run, index: int | None) -> RunRecord:
    where = f"{path}:{run.start}"
    name, model_line = run.model
    model = canonical_model(MODEL_NAMES.get(name.lower(), name), f"{path}:{model_line}")
    if run.batch is None:
        raise SchemaError(f"{path}:{run.end}: the run starting at line {run.start} has no 'Batch size:' line")
    tags: dict[str, str] = {}
    lines = {"model": model_line, "batch_per_worker": run.batch[1]}
    metrics, status = {}, "FINISHED"
    if run.total is not None:
        n, unit, value, err, line = run.total
        if run.count is not None and run.count[0] != n:
            raise SchemaError(f"{path}:{line}: 'Total img/sec on {n}' but 'Number of {unit}s: {run.count[0]}' "
                              f"(line {run.count[1]})")  # fmt: skip
        metrics["throughput_total"] = value
        tags["throughput_total_pm"] = f"{err:g}"
        lines.update({"throughput_total": line, "workers": line})
        if run.per is not None:
            metrics["throughput_per_worker"] = run.per[0]
            lines["throughput_per_worker"] = run.per[2]
        workers, device_from_log = n, ("cpu" if unit == "CPU" else None)
    elif run.error is not None:
        status = "FAILED"
        tags["failure_reason"] = f"{run.error[1][:200]} ({path.name}:{run.error[0]})"
        if run.count is None:
            raise SchemaError(f"{path}:{run.end}: failed run starting at line {run.start} has no 'Number of GPUs:'")
        workers, device_from_log = run.count[0], None
        lines["workers"] = run.count[1]
    else:
        raise SchemaError(
            f"{path}:{run.end}: the run starting at line {run.start} stops before its 'Total img/sec' line and "
            "without an error: a log cut short?"
        )
    tags.update(run_tags(options, path, lines.get("throughput_total", run.start), lines, FORMAT))
    params: dict[str, object] = {
        "model": model,
        "framework": param("framework", None, options.framework, "--framework", where, tags),
        "api": "horovod_synthetic_benchmark",
        "workers": workers,
        "device": param("device", device_from_log, options.device, "--device", where, tags),
        "data": param("data", "synthetic", options.data, "--data", where, tags),
        "batch_per_worker": run.batch[0],
        "platform": param("platform", None, options.platform, "--platform", where, tags),
        "variable_update": "horovod",
    }
    return log_record(options, path, index, params=params, metrics=metrics, tags=tags, status=status, where=where)
