"""The Keras multi-GPU benchmark logs of rossumai/keras-multi-gpu (`benchmark_inception3_resnet50.py`) -> one run per
benchmark run in the file.

A log is a `set -x` trace of many runs; each starts at its `+ python ...` line (without a trace, at its
`architecture:` header line after the previous run's end). Per run the script prints `architecture:`,
`number of GPUs:`, `parameter server:` (cpu | gpu), `parallelization method:` (kuza55 | avolkov1), `epochs:`,
`batch_size:` (the GLOBAL batch, sliced over the GPUs); Keras' progress bars (carriage returns and backspaces
on one physical line) follow, and its SamplesPerSec callback prints `Samples/sec: X` after every epoch and once
after training. X covers all batches so far (the repository's callbacks.py prints the median of batch_size /
batch time; the version that wrote a given log is not pinned): the per-epoch values are running values and are
not stored; throughput_total is the value printed after training (the last of epochs + 1 lines).

Params: workers = number of GPUs; batch_per_worker = batch_size / GPUs where that is a whole number, else
"not stated" (32 over 6 GPUs: the methods slice 5 per GPU and drop or append the rest) with the global batch in
a tag; variable_update `<method> (ps <device>)`; data synthetic (1024 random in-memory images); api keras;
device from TensorFlow's device lines. A run whose log shows a Python error before its result is FAILED with
the error as reason; a run with neither a result nor an error stops mid-way: an error naming its last line.
Note: the benchmark's stderr is unbuffered and its stdout is not, so a failed run's traceback lines may appear
after the next run's first lines; an error line counts for the run whose result is missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...schema import NOT_STATED, RunRecord, SchemaError, canonical_model
from . import LogOptions, gpu_names, lines_of, log_record, one_device, param, python_error, run_tags, strip_rank

FORMAT = "keras_mgpu"
TRACE_RE = re.compile(r"^\++\s+(?:\S+=\S+\s+)*python\S*\s+\S+\.py\b.*$")
HEADER_RE = re.compile(
    r"^(?P<key>architecture|number of GPUs|parameter server|parallelization method|epochs|batch_size):\s*"
    r"(?P<value>\S+)\s*$"
)
SAMPLES_RE = re.compile(r"Samples/sec:\s*(?P<value>[^\s\x08\r]+)")


@dataclass
class _Run:
    start: int
    command: str = ""
    header: dict[str, tuple[str, int]] = field(default_factory=dict)
    gpus: dict[str, int] = field(default_factory=dict)
    samples: list[tuple[float, int]] = field(default_factory=list)  # (Samples/sec, line)
    errors: list[tuple[int, str]] = field(default_factory=list)
    end: int = 0

    def finished(self) -> bool:
        epochs = self.header.get("epochs")
        return bool(epochs and epochs[0].isdigit() and len(self.samples) >= int(epochs[0]) + 1)


def sniff(lines: Sequence[str]) -> bool:
    return any(SAMPLES_RE.search(line) for line in lines) or any(
        HEADER_RE.match(line.lstrip(" \t")) and line.lstrip(" \t").startswith("parallelization method")
        for line in lines
    )


def _scan(path: Path, lines: Sequence[str]) -> list[_Run]:
    runs: list[_Run] = []
    run: _Run | None = None
    # GPUs TensorFlow lists (on unbuffered stderr) before the script's header (buffered stdout) reaches the
    # log: without a shell trace, those seen after a run's end belong to the next run.
    pending: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        text = strip_rank(raw)[1].lstrip(" \t")  # headers with or without leading blanks
        if TRACE_RE.match(text):
            run = _Run(start=number, command=text.lstrip("+ ").strip(), end=number)
            runs.append(run)
            pending = {}
            continue
        m = HEADER_RE.match(text)
        if m and m["key"] == "architecture" and (run is None or "architecture" in run.header):
            run = _Run(start=number, gpus=pending)
            runs.append(run)
            pending = {}
        name = gpu_names(text)
        if name and (run is None or run.finished() or (run.errors and not run.command)):
            pending.setdefault(name, number)
            continue
        if run is None:
            continue
        if m:
            run.header.setdefault(m["key"], (m["value"], number))
            run.end = number
            continue
        if name:
            run.gpus.setdefault(name, number)
        for sm in SAMPLES_RE.finditer(text):
            try:
                run.samples.append((float(sm["value"]), number))
            except ValueError:
                raise SchemaError(f"{path}:{number}: 'Samples/sec: {sm['value']}' is not a number") from None
        error = python_error(text.split("\r")[-1])
        if error:
            # A traceback printed late (see the module's note) belongs to the latest run without a result.
            owner = next((r for r in reversed(runs) if not r.finished()), run)
            owner.errors.append((number, error))
        if text.strip():
            run.end = number
    return runs


def _header(path: Path, run: _Run, key: str) -> tuple[str, int]:
    if key not in run.header:
        raise SchemaError(f"{path}:{run.end}: the run starting at line {run.start} has no '{key}:' line")
    return run.header[key]


def _count(path: Path, run: _Run, key: str) -> tuple[int, int]:
    value, line = _header(path, run, key)
    if not value.isdigit() or int(value) < 1:
        raise SchemaError(f"{path}:{line}: '{key}: {value}' is not a whole number >= 1")
    return int(value), line


def _record(path: Path, options: LogOptions, run: _Run, index: int) -> RunRecord:
    where = f"{path}:{run.start}"
    arch, arch_line = _header(path, run, "architecture")
    model = canonical_model(arch, f"{path}:{arch_line}")
    gpus, gpus_line = _count(path, run, "number of GPUs")
    batch, batch_line = _count(path, run, "batch_size")
    epochs, epochs_line = _count(path, run, "epochs")
    method = run.header.get("parallelization method", ("", 0))[0]
    ps = run.header.get("parameter server", ("", 0))[0]
    tags: dict[str, str] = {"batch_global": str(batch), "parallelization_method": method, "parameter_server": ps}
    lines = {"model": arch_line, "workers": gpus_line, "batch_per_worker": batch_line, "epochs": epochs_line}
    if batch % gpus == 0:
        per_worker: object = batch // gpus
    else:
        per_worker = NOT_STATED
        tags["batch_note"] = (
            f"the global batch of {batch} does not divide over {gpus} GPUs: the per-GPU slices differ "
            f"(kuza55 gives each {batch // gpus} and drops the rest; avolkov1 gives the last GPU the rest)"
        )
    if gpus == 1:
        tags["method_note"] = "1 GPU: the plain model; the parallelization method and parameter server are not used"
    if len(run.samples) > epochs + 1:
        raise SchemaError(
            f"{path}:{run.samples[epochs + 1][1]}: {len(run.samples)} 'Samples/sec' lines in the run starting at "
            f"line {run.start}, which has {epochs} epochs (one per epoch and one after training)"
        )
    metrics, status = {}, "FINISHED"
    if run.finished():
        value, line = run.samples[-1]
        metrics["throughput_total"] = value
        lines["throughput_total"] = line
        tags["samples_per_sec_by_epoch"] = ", ".join(f"{v:g}" for v, _ in run.samples[:-1])
    elif run.errors:
        status = "FAILED"
        line, text = run.errors[0]
        tags["failure_reason"] = f"{text[:200]} ({path.name}:{line})"
    else:
        raise SchemaError(
            f"{path}:{run.end}: the run starting at line {run.start} stops after {len(run.samples)} of "
            f"{epochs + 1} 'Samples/sec' lines and no error: a log cut short?"
        )
    gpu, full = (None, None) if options.device else one_device(run.gpus, path, where)
    if full:
        tags["device_name"] = full
        lines["device"] = run.gpus[full]
    if run.command:
        tags["command"] = run.command[:250]
    tags.update(run_tags(options, path, lines.get("throughput_total", run.errors[0][0] if run.errors else run.start),
                         lines, FORMAT))  # fmt: skip
    params: dict[str, object] = {
        "model": model,
        "framework": param("framework", "tensorflow", options.framework, "--framework", where, tags),
        "api": "keras",
        "workers": gpus,
        "device": param("device", gpu, options.device, "--device", where, tags),
        "data": param("data", "synthetic", options.data, "--data", where, tags),
        "batch_per_worker": per_worker,
        "platform": param("platform", None, options.platform, "--platform", where, tags),
        "variable_update": f"{method} (ps {ps})",
        "epochs": epochs,
    }
    return log_record(options, path, index, params=params, metrics=metrics, tags=tags, status=status, where=where)


def parse(path: Path, options: LogOptions) -> list[RunRecord]:
    """Every run of one Keras multi-GPU benchmark log."""
    runs = _scan(path, lines_of(path))
    if not runs:
        raise SchemaError(f"{path}:1: no Keras benchmark run (no 'architecture:' header) in the file")
    return [_record(path, options, run, index) for index, run in enumerate(runs, start=1)]
