"""MLPerf training result logs (`:::MLLOG {...}` lines, e.g. `<submitter>/results/<system>/<benchmark>/result_N.txt`)
-> one run per file.

The file may be a whole job's output (shell trace, launcher and framework lines around the MLLOG lines); only
`:::MLLOG` lines are read (their JSON is parsed here: one json.loads per line needs no extra package). Read:

- `submission_benchmark` (only `resnet`, ResNet-50 v1.5 on ImageNet, maps to the study's models), `global_batch_size`,
  `train_samples`, the first `init_start` (several ranks log it), `run_start`, `run_stop` (with its `status`),
  `epoch_start`/`epoch_stop` or, where a submitter logs none, `block_start`/`block_stop` (`epoch_count` each),
  and the last `eval_accuracy`.
- throughput_total: training images over the time spent in training epochs only: epochs x train_samples / the sum
  of the epoch_start -> epoch_stop intervals (blocks where no epochs are logged; a block may include its
  evaluation, depending on the submitter: a tag says which was used).
- throughput_run: over the whole timed run, as MLPerf's time to train counts it: epochs x train_samples /
  (run_stop - run_start); time_total_s = run_stop - run_start; time_init_s = run_start - first init_start.
- epochs: the number of epochs that ended (epoch_stop lines, whatever the first epoch's number), or the sum of
  the finished blocks' epoch_count.
- GPUs: `number_of_nodes` x `accelerators_per_node` of the system description `<submitter>/systems/<system>.json`
  beside `results/` where it exists (also the device, from `accelerator_model_name`, the framework and the
  platform, the system's name); else global_batch_size / the per-device batch (`d_batch_size`) where logged; else
  --workers. batch_per_worker = global_batch_size / GPUs.

`run_stop` with `"status": "aborted"` (the run did not reach the target) is a FAILED run that keeps its
throughput; a log without `run_stop` stopped mid-way: an error naming its last line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...schema import RunRecord, SchemaError
from .. import read_text
from . import LogOptions, device_name, lines_of, log_record, param, run_tags

FORMAT = "mlperf"
MARK = ":::MLLOG "
BENCHMARK_MODELS = {"resnet": "resnet50"}  # MLPerf's benchmark name -> the study's model
PER_DEVICE_BATCH_KEYS = ("d_batch_size",)  # logged by NVIDIA's submissions: images per GPU per step
FRAMEWORKS = ("mxnet", "pytorch", "tensorflow", "jax", "paddle", "mindspore")


@dataclass
class _Log:
    values: dict[str, tuple[object, int, int]] = field(default_factory=dict)  # key -> (value, line, ms), last seen
    first: dict[str, tuple[object, int, int]] = field(default_factory=dict)  # key -> (value, line, ms), first seen
    epochs: list[tuple[int, int, int]] = field(default_factory=list)  # (start ms, stop ms, stop line)
    blocks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (start ms, stop ms, epochs, line)
    open_epoch: tuple[int, int] | None = None  # (start ms, line)
    open_block: tuple[int, int, int] | None = None  # (start ms, epoch_count, line)
    stop_status: str | None = None
    n_lines: int = 0


def sniff(lines: Sequence[str]) -> bool:
    return any(MARK in line for line in lines)


def _scan(path: Path, lines: Sequence[str]) -> _Log:
    log = _Log(n_lines=len(lines))
    for number, text in enumerate(lines, start=1):
        at = text.find(MARK)
        if at < 0:
            continue
        try:
            entry = json.loads(text[at + len(MARK) :])
        except ValueError as err:
            raise SchemaError(f"{path}:{number}: MLLOG line is not valid JSON (cut short?): {err.msg}") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise SchemaError(f"{path}:{number}: MLLOG line without a 'key'")
        ms = entry.get("time_ms")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)):
            raise SchemaError(f"{path}:{number}: MLLOG line {entry['key']!r} has no numeric time_ms")
        ms, key, meta = int(ms), entry["key"], entry.get("metadata") or {}
        log.values[key] = (entry.get("value"), number, ms)
        log.first.setdefault(key, (entry.get("value"), number, ms))
        if key == "epoch_start":
            log.open_epoch = (ms, number)
        elif key == "epoch_stop":
            if log.open_epoch is None:
                raise SchemaError(f"{path}:{number}: epoch_stop without an epoch_start before it")
            log.epochs.append((log.open_epoch[0], ms, number))
            log.open_epoch = None
        elif key == "block_start":
            count = meta.get("epoch_count")
            log.open_block = (ms, int(count) if isinstance(count, (int, float)) else 0, number)
        elif key == "block_stop":
            if log.open_block is None:
                raise SchemaError(f"{path}:{number}: block_stop without a block_start before it")
            log.blocks.append((log.open_block[0], ms, log.open_block[1], number))
            log.open_block = None
        elif key == "run_stop":
            log.stop_status = str(meta.get("status", "")).lower()
    return log


def _system(path: Path) -> tuple[dict, Path | None]:
    """The submission's system description: `<submitter>/systems/<system>.json` for
    `<submitter>/results/<system>/<benchmark>/result_N.txt`."""
    parts = path.resolve().parts
    if len(parts) >= 5 and parts[-4] == "results":
        candidate = Path(*parts[:-4]) / "systems" / f"{parts[-3]}.json"
        if candidate.is_file():
            try:
                system = json.loads(read_text(candidate))
            except ValueError as err:
                raise SchemaError(f"{candidate}:{err.lineno}: not valid JSON: {err.msg}") from None
            if not isinstance(system, dict):
                raise SchemaError(f"{candidate}:1: not a JSON object")
            return system, candidate
    return {}, None


def _count(value: object, where: str, what: str) -> int:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise SchemaError(f"{where}: {what} {value!r} is not a whole number") from None
    if not number.is_integer() or number < 1:
        raise SchemaError(f"{where}: {what} {value!r} is not a whole number >= 1")
    return int(number)


def parse(path: Path, options: LogOptions) -> list[RunRecord]:  # noqa: C901 -- split after issues 21 and 23 land (their branches rewrite this parser)
    lines = lines_of(path)
    log = _scan(path, lines)
    end = f"{path}:{log.n_lines}"
    for key in ("submission_benchmark", "run_start", "global_batch_size", "train_samples"):
        if key not in log.values:
            raise SchemaError(f"{end}: no MLLOG '{key}' line")
    if "run_stop" not in log.values:
        raise SchemaError(f"{end}: the log has no run_stop: the run stopped mid-way (a log cut short?)")
    benchmark, bench_line, _ = log.values["submission_benchmark"]
    where = f"{path}:{bench_line}"
    if str(benchmark) not in BENCHMARK_MODELS:
        raise SchemaError(
            f"{where}: MLPerf benchmark {benchmark!r}: only {', '.join(BENCHMARK_MODELS)} (image classification) "
            "maps to the study's models"
        )
    _, start_line, start_ms = log.values["run_start"]
    _, stop_line, stop_ms = log.values["run_stop"]
    batch_value, batch_line, _ = log.values["global_batch_size"]
    samples_value, samples_line, _ = log.values["train_samples"]
    global_batch = _count(batch_value, f"{path}:{batch_line}", "global_batch_size")
    train_samples = _count(samples_value, f"{path}:{samples_line}", "train_samples")
    lines_used = {"workers": batch_line, "batch_per_worker": batch_line}
    tags: dict[str, str] = {"benchmark": str(benchmark), "global_batch_size": str(global_batch)}

    system, system_path = _system(path)
    workers_from_log = None
    if system_path is not None:
        nodes = _count(system.get("number_of_nodes"), str(system_path), "number_of_nodes")
        per_node = _count(system.get("accelerators_per_node"), str(system_path), "accelerators_per_node")
        workers_from_log = nodes * per_node
        tags["system_description"] = f"{system_path.parent.name}/{system_path.name}"
    else:
        for key in PER_DEVICE_BATCH_KEYS:
            if key in log.values:
                per_device = _count(log.values[key][0], f"{path}:{log.values[key][1]}", key)
                if global_batch % per_device == 0:
                    workers_from_log = global_batch // per_device
    workers = int(param("workers", workers_from_log, options.workers, "--workers", where, tags))  # type: ignore[arg-type]
    if global_batch % workers:
        raise SchemaError(f"{path}:{batch_line}: global_batch_size {global_batch} does not divide over {workers} GPUs")

    if log.epochs:
        epochs = len(log.epochs)
        training_s = sum(stop - start for start, stop, _ in log.epochs) / 1000
        tags["throughput_intervals"] = f"{epochs} epoch_start -> epoch_stop intervals"
        train_line = log.epochs[-1][2]
    elif log.blocks and all(count > 0 for *_, count, _ in log.blocks):
        epochs = sum(count for _, _, count, _ in log.blocks)
        training_s = sum(stop - start for start, stop, _, _ in log.blocks) / 1000
        tags["throughput_intervals"] = f"{len(log.blocks)} block_start -> block_stop intervals (may include evaluation)"
        train_line = log.blocks[-1][3]
    else:
        raise SchemaError(f"{end}: no finished epoch (epoch_stop) or block (block_stop with epoch_count) in the log")
    run_s = (stop_ms - start_ms) / 1000
    if run_s <= 0 or training_s <= 0:
        raise SchemaError(f"{path}:{stop_line}: run_stop is not after run_start (line {start_line})")
    metrics = {
        "throughput_total": epochs * train_samples / training_s,
        "throughput_run": epochs * train_samples / run_s,
        "time_total_s": run_s,
    }
    tags["training_seconds"] = f"{training_s:.3f}"
    lines_used.update({"throughput_total": train_line, "throughput_run": stop_line, "time_total_s": stop_line})
    if "init_start" in log.first:
        init_ms = log.first["init_start"][2]
        if init_ms < start_ms:
            metrics["time_init_s"] = (start_ms - init_ms) / 1000
            lines_used["time_init_s"] = log.first["init_start"][1]
    if "eval_accuracy" in log.values:
        accuracy, accuracy_line, _ = log.values["eval_accuracy"]
        if isinstance(accuracy, (int, float)) and 0 <= accuracy <= 1:
            metrics["accuracy_test"] = float(accuracy)
            lines_used["accuracy_test"] = accuracy_line
    status = "FINISHED" if log.stop_status in ("success", "") else "FAILED"
    tags["run_stop_status"] = log.stop_status or "not stated"
    if status == "FAILED":
        tags["failure_reason"] = (
            f"run_stop status {log.stop_status!r}: the run did not reach its target ({path.name}:{stop_line})"
        )
    if "submission_platform" in log.values:
        tags["submission_platform"] = str(log.values["submission_platform"][0])
    accelerator = str(system.get("accelerator_model_name") or "")
    if accelerator:
        tags["device_name"] = accelerator
    framework_text = str(system.get("framework") or "").lower()
    framework = next((f for f in FRAMEWORKS if f in framework_text), None)
    in_results = len(path.parts) >= 4 and path.parts[-4] == "results"
    platform = system.get("system_name") or (path.parts[-3] if in_results else None)
    tags.update(run_tags(options, path, train_line, lines_used, FORMAT))
    device = device_name(accelerator) if accelerator else None
    params: dict[str, object] = {
        "model": BENCHMARK_MODELS[str(benchmark)],
        "framework": param("framework", framework, options.framework, "--framework", where, tags),
        "api": "mlperf",
        "workers": workers,
        "device": param("device", device, options.device, "--device", where, tags),
        "data": param("data", "real", options.data, "--data", where, tags),
        "batch_per_worker": global_batch // workers,
        "platform": param("platform", platform, options.platform, "--platform", where, tags),
        "epochs": epochs,
    }
    return [
        log_record(
            options,
            path,
            None,
            params=params,
            metrics=metrics,
            tags=tags,
            status=status,
            start_ms=start_ms,
            end_ms=stop_ms,
            where=where,
        )
    ]
