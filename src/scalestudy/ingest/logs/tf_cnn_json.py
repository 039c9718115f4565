"""tf_cnn_benchmarks' `--benchmark_log_dir` output -> one run per folder.

The folder holds `benchmark.log` (one JSON line: the run's metadata: `model_name`, `dataset.name` such as
`imagenet (synthetic)`, `run_parameters` with `batch_size` (images per step of this worker process, all its
devices), `batch_size_per_device`, `devices`, `num_batches`, `variable_update` where set, and `machine_config`),
`metric.log` (JSON lines `{"name", "value", "global_step", "timestamp", ...}`) and possibly `eval.log` (the
metadata of an evaluation pass that followed).

throughput_total is the last `average_examples_per_sec` (the mean over the measured steps, warm-up excluded).
`current_examples_per_sec` lines are running means, not instantaneous values: they are not stored as a series.
`eval_*` metrics come from an evaluation pass and are not training throughput. workers = batch_size /
batch_size_per_device (the devices used; `machine_config.gpu_info.count` is the number of GPUs in the machine,
not the number used: tag machine_gpus); the device is `machine_config.gpu_info.model`; the platform, which the
files do not name, defaults to the machine `machine_config` describes ('4x GeForce GTX 980 Ti, <CPU model>').
A metric.log without an `average_examples_per_sec` line is a run that stopped mid-way: an error naming its last line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from ...schema import RunRecord, SchemaError, canonical_model
from . import LogOptions, device_name, lines_of, log_record, param, run_tags

FORMAT = "tf_cnn_json"
METRIC_KEYS = ("name", "value", "global_step", "timestamp")


def sniff(lines: Sequence[str]) -> bool:
    """A metric.log or benchmark.log: JSON lines with tf_cnn_benchmarks' metric or run-metadata keys."""
    for line in lines[:5]:
        try:
            entry = json.loads(line)
        except ValueError:
            return False
        if isinstance(entry, dict) and (
            {"run_parameters", "model_name"} <= entry.keys()
            or (set(METRIC_KEYS) <= entry.keys() and str(entry["name"]).endswith("examples_per_sec"))
        ):
            return True
    return False


def _json(path: Path, number: int, text: str) -> dict:
    try:
        entry = json.loads(text)
    except ValueError as err:
        raise SchemaError(f"{path}:{number}: not a JSON line (cut short?): {err.msg}") from None
    if not isinstance(entry, dict):
        raise SchemaError(f"{path}:{number}: a JSON line that is not an object")
    return entry


def _ms(text: str, where: str) -> int:
    try:
        moment = datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    except (ValueError, AttributeError):
        raise SchemaError(f"{where}: timestamp {text!r} is not 'YYYY-MM-DDTHH:MM:SS.ffffffZ'") from None
    return round(moment.timestamp() * 1000)


def _machine(config: dict) -> str | None:
    """The machine as `machine_config` describes it (the log names no host): '4x GeForce GTX 980 Ti, Intel(R)
    Xeon(R) CPU E7-4830 v3 @ 2.10GHz'; None if it says neither its GPUs nor its CPU."""
    gpus, cpu = config.get("gpu_info") or {}, (config.get("cpu_info") or {}).get("cpu_info")
    parts = []
    if gpus.get("model"):
        parts.append(f"{gpus['count']}x {gpus['model']}" if gpus.get("count") else str(gpus["model"]))
    if cpu:
        parts.append(" ".join(str(cpu).split()))
    return ", ".join(parts) or None


def parse(path: Path, options: LogOptions) -> list[RunRecord]:  # noqa: C901 -- still to split (issue 22): issue 21 was rewriting it
    """The run of one --benchmark_log_dir folder; `path` is the folder or a file in it."""
    folder = path if path.is_dir() else path.parent
    metric_path, bench_path = folder / "metric.log", folder / "benchmark.log"
    for needed in (metric_path, bench_path):
        if not needed.is_file():
            raise SchemaError(f"{needed}: missing (a --benchmark_log_dir folder has benchmark.log and metric.log)")
    bench_lines = lines_of(bench_path)
    if not bench_lines:
        raise SchemaError(f"{bench_path}:1: empty (expected the run's metadata as one JSON line)")
    meta = _json(bench_path, 1, bench_lines[0])
    where = f"{bench_path}:1"
    run_params: dict[str, object] = {}
    for item in meta.get("run_parameters") or []:
        if isinstance(item, dict) and "name" in item:
            value = next((item[k] for k in ("long_value", "float_value", "string_value", "bool_value") if k in item),
                         None)  # fmt: skip
            run_params[str(item["name"])] = value
    model_name = meta.get("model_name") or run_params.get("model")
    if not model_name:
        raise SchemaError(f"{where}: no model_name in the run's metadata")
    model = canonical_model(str(model_name), where)
    if str(run_params.get("mode", "training")) != "training":
        raise SchemaError(f"{where}: a '{run_params['mode']}' run: only training runs have a training throughput")
    try:
        batch = int(run_params["batch_size"])  # type: ignore[arg-type]
        per_device = int(float(run_params["batch_size_per_device"]))  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        raise SchemaError(f"{where}: run_parameters lack a whole batch_size and batch_size_per_device") from None
    if per_device < 1 or batch % per_device:
        raise SchemaError(f"{where}: batch_size_per_device {per_device} does not divide batch_size {batch}")
    update = run_params.get("variable_update")
    if update == "horovod":
        raise SchemaError(
            f"{where}: a horovod run's benchmark log holds one rank's view (its batch and its throughput), "
            "not the job's: import the ranks' text output instead"
        )
    dataset = str((meta.get("dataset") or {}).get("name") or run_params.get("dataset") or "")
    tags: dict[str, str] = {"batch_global": str(batch)}
    machine_config = meta.get("machine_config") or {}
    gpu_info = machine_config.get("gpu_info") or {}
    machine = _machine(machine_config)
    if gpu_info.get("count") is not None:
        tags["machine_gpus"] = str(gpu_info["count"])
    devices = str(run_params.get("devices") or "")
    if "gpu" not in devices.lower() and "cpu" in devices.lower():
        device_from_log: str | None = "cpu"
    elif gpu_info.get("model"):
        device_from_log = device_name(str(gpu_info["model"]))
        tags["device_name"] = str(gpu_info["model"])
    else:
        device_from_log = None
    if "tensorflow_version" in meta and isinstance(meta["tensorflow_version"], dict):
        tags["tensorflow_version"] = str(meta["tensorflow_version"].get("version"))
    if run_params.get("num_batches") is not None:
        tags["num_batches"] = str(run_params["num_batches"])

    average: tuple[float, int, int] | None = None  # (value, line, ms)
    metric_lines = lines_of(metric_path)
    for number, text in enumerate(metric_lines, start=1):
        if not text.strip():
            continue
        entry = _json(metric_path, number, text)
        missing = [k for k in METRIC_KEYS if k not in entry]
        if missing:
            raise SchemaError(f"{metric_path}:{number}: metric entry lacks {missing}")
        if entry["name"] == "average_examples_per_sec":
            value = entry["value"]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(f"{metric_path}:{number}: average_examples_per_sec {value!r} is not a number")
            average = (float(value), number, _ms(str(entry["timestamp"]), f"{metric_path}:{number}"))
    if average is None:
        raise SchemaError(
            f"{metric_path}:{max(len(metric_lines), 1)}: no 'average_examples_per_sec' entry: the run stopped "
            "before its end (a log cut short?)"
        )
    value, line, end_ms = average
    lines = {"throughput_total": line, "model": 1, "batch_per_worker": 1, "workers": 1}
    tags.update(run_tags(options, metric_path, line, lines, FORMAT))
    tags["source_lines"] = f"throughput_total: metric.log:{line}; model, batch, workers, device: benchmark.log:1"
    data = ("synthetic" if "synthetic" in dataset else "real") if dataset else None
    params: dict[str, object] = {
        "model": model,
        "framework": param("framework", "tensorflow", options.framework, "--framework", where, tags),
        "api": "tf_cnn_benchmarks",
        "workers": batch // per_device,
        "device": param("device", device_from_log, options.device, "--device", where, tags),
        "data": param("data", data, options.data, "--data", where, tags),
        "batch_per_worker": per_device,
        "platform": param("platform", machine, options.platform, "--platform", where, tags),
    }
    if update:
        params["variable_update"] = str(update)
    start_ms = _ms(str(meta["run_date"]), where) if meta.get("run_date") else None
    return [
        log_record(
            options,
            folder,
            None,
            params=params,
            metrics={"throughput_total": value},
            tags=tags,
            start_ms=start_ms,
            end_ms=end_ms if start_ms is not None else None,
            where=where,
        )
    ]
