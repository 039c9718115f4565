"""tf_cnn_benchmarks' text output (TensorFlow 1.x and 2.x) -> one run per benchmark run in the file.

A file may hold several runs one after another (a `set -x` shell trace: each run starts at its
`+ python ... tf_cnn_benchmarks.py ...` line; without a trace, at a `TensorFlow:` header after the previous run's
total). What is read, per run:

- header (lines read with or without leading blanks): `Model:`, `Dataset:` (newer versions; else `--data_dir` on
  the command line means real data, its absence synthetic), `Batch size: G global` / `P per device`
  (batch_per_worker = P, workers = G / P: GPUs of all worker processes together), `Devices:`, `Variables:`
  (variable_update), `Use NCCL:` / `AllReduce:`, `TensorFlow:`;
- the GPU's name from TensorFlow's device lines (`name: Tesla M60`);
- throughput_total: `total images/sec: X` (the mean over the measured steps, warm-up excluded). With
  `--variable_update horovod` every rank prints its own header and total: the job's total is the sum of the
  ranks' totals and throughput_per_worker their mean. The per-step lines (`N images/sec: M +/- U ...`) give
  running means, not instantaneous values: they are not stored as a series.

variable_update is written as the TF 2017 benchmark tables write it, so the runs compare with tf-benchmarks-2017:
`parameter_server (gpu|cpu)` (the --local_parameter_device, gpu by default), `replicated (nccl)`,
`replicated (<device>, no nccl)`, `independent`, `horovod`, `distributed_replicated`...; the raw value, the
parameter device and NCCL use are tags. A run without a total is FAILED when its log has a Python error (its
reason), else the log stops mid-way: an error naming the run's last line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...schema import NOT_STATED, RunRecord, SchemaError, canonical_model
from . import LogOptions, gpu_names, lines_of, log_record, one_device, param, python_error, run_tags, strip_rank
from .resolve import folder_platform, resolved

FORMAT = "tf_cnn_text"
TRACE_RE = re.compile(r"^\++\s+.*\btf_cnn_benchmarks\.py\b(?P<args>.*)$")
HEADER_RE = re.compile(
    r"^(?P<key>TensorFlow|Model|Dataset|Mode|Batch size|Devices|Variables|Use NCCL|AllReduce|Data format):\s*"
    r"(?P<value>.*?)\s*$"
)
# Python 3 versions print the per-device batch as a float (`32.0 per device`); forks add `global (per machine)`.
GLOBAL_RE = re.compile(r"^(?P<n>\d+)\s+global\b")
PER_DEVICE_RE = re.compile(r"^(?P<n>\d+)(?:\.0+)?\s+per device$")
STEP_RE = re.compile(r"^(?P<step>\d+)\s+images/sec:\s+[\d.]+\s+\+/-\s+[\d.]+")
TOTAL_RE = re.compile(r"^total images/sec:\s*(?P<value>\S+)\s*$")
ARG_RE = re.compile(r"--(?P<name>\w+)(?:[= ](?P<value>[^-\s]\S*))?")
TRUE = ("true", "1", "yes")
DEVICE_ITEM_RE = re.compile(r"'[^']*'")  # one device of the 'Devices' header: ['/gpu:0', '/gpu:1']


@dataclass
class _Run:
    start: int
    command: str = ""
    args: dict[str, str] = field(default_factory=dict)
    header: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (value, line) of the first rank
    per_device: tuple[int, int] | None = None
    expect_per_device: bool = False
    gpus: dict[str, int] = field(default_factory=dict)  # GPU name -> first line
    totals: list[tuple[int | None, float, int]] = field(default_factory=list)  # (rank, value, line)
    errors: list[tuple[int, str]] = field(default_factory=list)
    last_step: int | None = None
    end: int = 0


def sniff(lines: Sequence[str]) -> bool:
    for line in lines:
        text = strip_rank(line)[1].strip()
        if TOTAL_RE.match(text) or STEP_RE.match(text) or TRACE_RE.match(text):
            return True
    return False


def _scan(path: Path, lines: Sequence[str]) -> list[_Run]:
    runs: list[_Run] = []
    run: _Run | None = None
    # GPUs TensorFlow lists after a run's total (or before the first run): without a shell trace they belong to
    # the next run, whose header comes after its device lines.
    pending: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        rank, text = strip_rank(raw)
        # Matched without leading or trailing blanks: a log captured through a shell loop (`while read line`)
        # loses the indentation of `             32 per device`; other captures may indent every line.
        text = text.strip()
        m = TRACE_RE.match(text)
        if m:
            run = _Run(start=number, command=text.lstrip("+ ").strip(), end=number)
            run.args = {a["name"]: a["value"] or "" for a in ARG_RE.finditer(m["args"])}
            runs.append(run)
            pending = {}
            continue
        m = HEADER_RE.match(text)
        if m and m["key"] in ("TensorFlow", "Model") and (run is None or run.totals):
            run = _Run(start=number, gpus=pending)  # a new run without a shell trace line
            runs.append(run)
            pending = {}
        name = gpu_names(text)
        if name and (run is None or run.totals):
            pending.setdefault(name, number)
            continue
        if run is None:
            continue  # before the first run: shell set-up lines
        run.end = number
        if m:
            run.header.setdefault(m["key"], (m["value"], number))
            run.expect_per_device = m["key"] == "Batch size"
            continue
        if run.expect_per_device:
            run.expect_per_device = False
            pm = PER_DEVICE_RE.match(text)
            if pm and run.per_device is None:
                run.per_device = (int(pm["n"]), number)
                continue
        if name:
            run.gpus.setdefault(name, number)
        sm = STEP_RE.match(text)
        if sm:
            run.last_step = int(sm["step"])
            continue
        tm = TOTAL_RE.match(text)
        if tm:
            try:
                value = float(tm["value"])
            except ValueError:
                raise SchemaError(f"{path}:{number}: 'total images/sec' {tm['value']!r} is not a number") from None
            run.totals.append((rank, value, number))
            continue
        error = python_error(text)
        if error:
            run.errors.append((number, error))
    return runs


def variable_update(
    raw: str, args: dict[str, str], header: dict[str, tuple[str, int]], command: str
) -> tuple[str, dict[str, str]]:
    """The TF 2017 tables' spelling of a run's variable update, and the tags behind it (`command`: the run's
    command line, where the log has one)."""
    # tf_cnn_benchmarks' default is gpu; without the command line the header does not say which it was
    device = (args.get("local_parameter_device") or ("gpu" if command else "")).lower()
    tags = {"variable_update_raw": raw, "local_parameter_device": device or NOT_STATED}
    if "Use NCCL" in header:
        nccl = header["Use NCCL"][0].lower() in TRUE
    elif "use_nccl" in args:
        nccl = (args["use_nccl"] or "true").lower() in TRUE
    else:
        nccl = None
    if nccl is not None:
        tags["use_nccl"] = str(nccl).lower()
    if raw == "parameter_server":
        return (f"parameter_server ({device})" if device else "parameter_server"), tags
    if raw == "replicated":
        spec = header.get("AllReduce", ("", 0))[0]
        if spec and spec != "None":
            tags["all_reduce_spec"] = spec
            return f"replicated ({spec})", tags
        if nccl is False:
            return (f"replicated ({device}, no nccl)" if device else "replicated (no nccl)"), tags
        return ("replicated (nccl)", tags) if nccl else ("replicated", tags)
    return raw, tags


def _model(path: Path, run: _Run) -> str:
    """The run's model, refusing a run with no 'Model:' header or one that does not train."""
    header = run.header
    if "Model" not in header:
        raise SchemaError(f"{path}:{run.end}: the run starting at line {run.start} has no 'Model:' header line")
    mode = header.get("Mode", ("training", 0))
    if "train" not in mode[0]:
        raise SchemaError(f"{path}:{mode[1]}: a '{mode[0]}' run: only training runs have a training throughput")
    return canonical_model(header["Model"][0], f"{path}:{header['Model'][1]}")


def _batch(path: Path, run: _Run) -> tuple[int, int, int]:
    """(the global batch, the batch per device, the per-device line) of the 'Batch size' header."""
    header = run.header
    if "Batch size" not in header or run.per_device is None:
        raise SchemaError(f"{path}:{run.end}: the run starting at line {run.start} has no 'Batch size: G global' / "
                          "'P per device' header")  # fmt: skip
    gm = GLOBAL_RE.match(header["Batch size"][0])
    if not gm:
        line = header["Batch size"][1]
        raise SchemaError(f"{path}:{line}: 'Batch size: {header['Batch size'][0]}' is not 'G global'")
    batch_global, (per_device, per_line) = int(gm["n"]), run.per_device
    if per_device < 1 or batch_global % per_device:
        raise SchemaError(f"{path}:{per_line}: {per_device} per device does not divide the global batch {batch_global}")
    return batch_global, per_device, per_line


def _outcome(path: Path, run: _Run, ranks: int, what: str, tags: dict[str, str]) -> tuple[str, dict[str, float]]:
    """(status, metrics): the ranks' totals summed, or FAILED with the first Python error (in `tags`); a run with
    more totals than ranks, or with too few and no error, is refused (`what`: the ranks described, for that)."""
    if len(run.totals) > ranks:
        extra = run.totals[ranks][2]
        raise SchemaError(
            f"{path}:{extra}: {len(run.totals)} 'total images/sec' lines in the run starting at line {run.start}, "
            f"but it has {what}: a run without its header?"
        )
    status, metrics = "FINISHED", {}
    if len(run.totals) == ranks:
        values = [v for _, v, _ in run.totals]
        metrics["throughput_total"] = sum(values)
        if ranks > 1:
            metrics["throughput_per_worker"] = sum(values) / ranks
            tags["rank_totals"] = ", ".join(f"{v:g} ({path.name}:{n})" for _, v, n in run.totals)
    elif run.errors:
        status = "FAILED"
        line, text = run.errors[0]
        tags["failure_reason"] = f"{text[:200]} ({path.name}:{line})"
    else:
        have = f"{len(run.totals)} of {ranks} ranks' totals" if run.totals else "no 'total images/sec' line"
        raise SchemaError(
            f"{path}:{run.end}: the run starting at line {run.start} stops with {have} and no error: a log cut short?"
        )
    return status, metrics


def _data_from_log(run: _Run, lines: dict[str, int]) -> str | None:
    """synthetic or real, as the 'Dataset' header or the command line (--data_dir) says; None if neither does."""
    dataset = run.header.get("Dataset")
    if dataset:
        lines["data"] = dataset[1]
        return "synthetic" if "synthetic" in dataset[0].lower() else "real"
    if run.command:
        lines["data"] = run.start
        return "real" if run.args.get("data_dir") else "synthetic"
    return None


def _device_from_log(path: Path, options: LogOptions, run: _Run, where: str, tags: dict[str, str],
                     lines: dict[str, int]) -> tuple[str, str] | None:  # fmt: skip
    """(cpu or the one GPU model the run's lines name, its basis `log:line N`), or None; the GPU's full name in
    `tags`. Several kinds of GPU fail unless --device names the run's."""
    devices, devices_line = run.header.get("Devices", ("", 0))
    if "cpu" in devices.lower() and "gpu" not in devices.lower():
        lines["device"] = devices_line
        return "cpu", f"log:line {devices_line}"
    try:
        gpu, full = one_device(run.gpus, path, where)
    except SchemaError:
        if options.device:
            return None
        raise
    if not full:
        return None
    tags["device_name"] = full
    lines["device"] = run.gpus[full]
    return gpu, f"log:line {run.gpus[full]}"


def _workers_basis(run: _Run, batch_global: int, per_device: int) -> str:
    """Where the GPU count comes from: the 'Batch size' header (global / per device), and what 'Devices' lists."""
    basis = f"log:line {run.header['Batch size'][1]} ({batch_global} global / {per_device} per device)"
    if "Devices" in run.header:
        listed, line = run.header["Devices"]
        basis += f"; line {line} lists {len(DEVICE_ITEM_RE.findall(listed))} device(s)"
    return basis


def _record(path: Path, options: LogOptions, run: _Run, index: int) -> RunRecord:
    where = f"{path}:{run.start}"
    header = run.header
    model = _model(path, run)
    batch_global, per_device, per_line = _batch(path, run)
    workers = batch_global // per_device
    raw_update = header.get("Variables", (run.args.get("variable_update") or "parameter_server", 0))[0]
    update, tags = variable_update(raw_update, run.args, header, run.command)
    ranks = workers if raw_update == "horovod" else 1

    lines = {"model": header["Model"][1], "batch_per_worker": per_line, "workers": header["Batch size"][1]}
    if run.totals:
        lines["throughput_total"] = run.totals[0][2]
    what = f"{ranks} rank(s) ({workers} GPUs, variable_update {raw_update})"
    status, metrics = _outcome(path, run, ranks, what, tags)

    data = param("data", _data_from_log(run, lines), options.data, "--data", where, tags)
    found = _device_from_log(path, options, run, where, tags, lines)
    device = resolved("device", found, options.device, "--device", where, tags)
    in_folder = folder_platform(path, tags.get("device_name"))
    platform = resolved("platform", in_folder, options.platform, "--platform", where, tags)
    tags["workers_basis"] = _workers_basis(run, batch_global, per_device)
    framework = param("framework", "tensorflow", options.framework, "--framework", where, tags)
    if "TensorFlow" in header:
        tags["tensorflow_version"] = header["TensorFlow"][0]
    if run.command:
        tags["command"] = run.command[:250]
    if run.last_step is not None:
        tags["last_logged_step"] = str(run.last_step)
    tags["batch_global"] = str(batch_global)
    throughput_line = lines.get("throughput_total", run.errors[0][0] if run.errors else run.start)
    tags.update(run_tags(options, path, throughput_line, lines, FORMAT))
    params: dict[str, object] = {
        "model": model,
        "framework": framework,
        "api": "tf_cnn_benchmarks",
        "workers": workers,
        "device": device,
        "data": data,
        "batch_per_worker": per_device,
        "platform": platform,
        "variable_update": update,
    }
    return log_record(options, path, index, params=params, metrics=metrics, tags=tags, status=status, where=where)


def parse(path: Path, options: LogOptions) -> list[RunRecord]:
    """Every run of one tf_cnn_benchmarks text log (a file of one run or of several)."""
    lines = lines_of(path)
    runs = _scan(path, lines)
    if not runs:
        raise SchemaError(f"{path}:1: no tf_cnn_benchmarks run (no header, no 'total images/sec') in the file")
    return [_record(path, options, run, index) for index, run in enumerate(runs, start=1)]
