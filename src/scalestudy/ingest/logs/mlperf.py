"""MLPerf training result logs (`:::MLLOG {...}` lines, e.g. `<submitter>/results/<system>/<benchmark>/result_N.txt`)
-> one run per file.

The file may be a whole job's output (shell trace, launcher and framework lines around the MLLOG lines); only
`:::MLLOG` lines are read (their JSON is parsed here: one json.loads per line needs no extra package). Read:

- `submission_benchmark` (only `resnet`, ResNet-50 v1.5 on ImageNet, maps to the study's models), `global_batch_size`,
  `train_samples`, the first `init_start` (several ranks log it), `run_start`, `run_stop` (with its `status`),
  `epoch_start`/`epoch_stop` or, where a submitter logs none, `block_start`/`block_stop` (`epoch_count` each),
  and the last `eval_accuracy`. A block_stop that closes no block_start (Intel's SPR logs: one block_start, a
  block_stop after each evaluation) is a warning where the epochs are read, an error where the blocks would be.
- throughput_total: training images over the time spent in training epochs only: epochs x train_samples / the sum
  of the epoch_start -> epoch_stop intervals (blocks where no epochs are logged; a block may include its
  evaluation, depending on the submitter: a tag says which was used).
- throughput_run: over the whole timed run, as MLPerf's time to train counts it: epochs x train_samples /
  (run_stop - run_start); time_total_s = run_stop - run_start; time_init_s = run_start - first init_start.
- epochs: the number of epochs that ended (epoch_stop lines, whatever the first epoch's number), or the sum of
  the finished blocks' epoch_count. Consecutive block_starts of one first_epoch_num are one block, from the first
  (v1.0 PCL writes one per epoch, epoch_count 1 each, and one block_stop per block).
- Facts beside the log: the system description `<submitter>/systems/<system>.json` of the standard layout
  (mlperf_system.py) gives the accelerators (`number_of_nodes` x `accelerators_per_node`), the device
  (`accelerator_model_name`) and the framework (with the frameworks the log's text names: see _framework); the
  platform is the system's name (its folder). What the log says itself wins (GPUs = global_batch_size / the
  per-device batch `d_batch_size` where logged; the system file's count, if it differs, stays in a tag), and a
  command-line option wins over both. A malformed system file gives a warning (tag `import_warning`, printed by
  the command) and what it could not say is not used. batch_per_worker = global_batch_size / GPUs.

`run_stop` with `"status": "aborted"` (the run did not reach the target) is a FAILED run that keeps its
throughput; a log without `run_stop` stopped mid-way: an error naming its last line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...schema import RunRecord, SchemaError
from . import WARNING_TAG, LogOptions, device_name, lines_of, log_record, param, run_tags, strip_rank
from .mlperf_events import mllog_entry
from .mlperf_system import frameworks_named, read_system, system_facts, system_file

FORMAT = "mlperf"
MARK = ":::MLLOG "
BENCHMARK_MODELS = {"resnet": "resnet50"}  # MLPerf's benchmark name -> the study's model
PER_DEVICE_BATCH_KEYS = ("d_batch_size",)  # logged by NVIDIA's submissions: images per GPU per step
SYSJSON = ":::SYSJSON "  # v4.0 logs of NVIDIA's code print the system description they ran on
# Framework names as a job's output writes them (environment variables, paths, module names) -> the study's.
LOG_FRAMEWORKS = {"mxnet": "mxnet", "pytorch": "pytorch", "torch": "pytorch", "tensorflow": "tensorflow",
                  "jax": "jax", "paddle": "paddle", "paddlepaddle": "paddle", "mindspore": "mindspore"}  # fmt: skip
FRAMEWORK_RE = re.compile(r"(?i)(?<![a-z])(" + "|".join(LOG_FRAMEWORKS) + r")(?![a-z])")


@dataclass
class _Log:
    values: dict[str, tuple[object, int, int]] = field(default_factory=dict)  # key -> (value, line, ms), last seen
    first: dict[str, tuple[object, int, int]] = field(default_factory=dict)  # key -> (value, line, ms), first seen
    epochs: list[tuple[int, int, int]] = field(default_factory=list)  # (start ms, stop ms, stop line)
    blocks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (start ms, stop ms, epochs, line)
    open_epoch: tuple[int, int] | None = None  # (start ms, line)
    open_block: tuple[int, int, int, object] | None = None  # (start ms, epoch_count, line, first_epoch_num)
    stray_stops: list[int] = field(default_factory=list)  # lines of block_stops that close no block_start
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
        entry = mllog_entry(text[at + len(MARK) :], f"{path}:{number}")  # time_ms, or time_s (v0.7 Alibaba)
        ms, key, meta = round(entry["t_s"] * 1000), entry["key"], entry.get("metadata") or {}
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
            count = int(count) if isinstance(count, (int, float)) else 0
            label = meta.get("first_epoch_num")
            if log.open_block is not None and label is not None and log.open_block[3] == label:
                # v1.0 PCL: a block_start per epoch, each with its block's label: one block from the first
                log.open_block = (log.open_block[0], log.open_block[1] + count, log.open_block[2], label)
            else:
                log.open_block = (ms, count, number, label)
        elif key == "block_stop":
            if log.open_block is None:  # Intel's SPR logs: one block_start, a block_stop per evaluation
                log.stray_stops.append(number)
                continue
            log.blocks.append((log.open_block[0], ms, log.open_block[1], number))
            log.open_block = None
        elif key == "run_stop":
            log.stop_status = str(meta.get("status", "")).lower()
    return log


def _count(value: object, where: str, what: str) -> int:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise SchemaError(f"{where}: {what} {value!r} is not a whole number") from None
    if not number.is_integer() or number < 1:
        raise SchemaError(f"{where}: {what} {value!r} is not a whole number >= 1")
    return int(number)


def _frameworks_in_log(lines: Sequence[str]) -> dict[str, int]:
    """The frameworks a log's text names (its shell trace, environment, paths: `MXNET_...`, `mxnet_reader`), each
    with its first line."""
    found: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        for word in FRAMEWORK_RE.findall(text):
            found.setdefault(LOG_FRAMEWORKS[word.lower()], number)
    return found


def _framework(named: list[str], mentioned: dict[str, int], system_name: str = "") -> str | None:
    """The framework of a system description that names `named`, given the frameworks the log's text mentions:
    the one both name; else its only one; of several (NGC's containers: 'NGC MXNet 21.05 , NGC PyTorch 21.05'),
    the only one the log mentions, else the one the system's name names (dgxa100_ngc21.05_mxnet); with none named,
    the log's only one (v4.0 smc's system file says PyTorch, its log runs MXNet: the log wins, see _machine)."""
    both = [f for f in named if f in mentioned]
    if len(both) == 1:
        return both[0]
    if len(named) == 1:
        return named[0]
    in_name = [f for f in named if f in frameworks_named(system_name.replace("_", " "))]
    if len(in_name) == 1:
        return in_name[0]
    return next(iter(mentioned)) if not named and len(mentioned) == 1 else None


def _param(what: str, from_log: object, given: object, option: str, where: str, tags: dict, warnings: list) -> object:
    """`param`, with the system description's warnings in the error where a value is missing (they say why)."""
    try:
        return param(what, from_log, given, option, where, tags)
    except SchemaError as err:
        if not warnings:
            raise
        raise SchemaError(f"{err} ({'; '.join(warnings)})") from None


def _sysjson(path: Path, lines: Sequence[str]) -> tuple[dict[str, object], list[str], int]:
    """The facts of the log's own `:::SYSJSON {...}` line (system_facts), its warnings, its line (0: none)."""
    for number, raw in enumerate(lines, start=1):
        text = strip_rank(raw)[1].lstrip()
        if text.startswith(SYSJSON):  # not the shell trace's `+ echo ':::SYSJSON ...'`
            try:
                system = json.loads(text[len(SYSJSON) :])
            except ValueError as err:
                return {}, [f"{path}:{number}: the :::SYSJSON line is not valid JSON ({err.msg}): not read"], number
            if not isinstance(system, dict):
                return {}, [f"{path}:{number}: the :::SYSJSON line is not a JSON object: not read"], number
            facts, warnings = system_facts(system, str(path), lambda _key, line=number: line)
            return facts, warnings, number
    return {}, [], 0


Facts = dict[str, tuple[object, "int | str"]]  # what -> (value, the log's line or 'file:line')


def _log_facts(path: Path, lines: Sequence[str], log: _Log, global_batch: int) -> tuple[Facts, list[str]]:
    """Workers, device and framework as the log itself says them: the global batch over the per-device batch,
    its `:::SYSJSON` line, the frameworks its text names."""
    found: Facts = {}
    for key in PER_DEVICE_BATCH_KEYS:
        if key in log.values:
            per_device = _count(log.values[key][0], f"{path}:{log.values[key][1]}", key)
            if global_batch % per_device == 0:
                found["workers"] = (global_batch // per_device, log.values[key][1])
    own, warnings, own_line = _sysjson(path, lines)
    if "accelerators" in own:
        found.setdefault("workers", (own["accelerators"], own_line))
    if "accelerator" in own:
        found["device"] = (own["accelerator"], own_line)
    mentioned = _frameworks_in_log(lines)
    framework = _framework(own.get("frameworks") or [], mentioned)  # type: ignore[arg-type]
    if framework:
        found["framework"] = (framework, own_line if own.get("frameworks") else mentioned[framework])
    return found, warnings


def _file_facts(path: Path, lines: Sequence[str]) -> tuple[Facts, dict[str, str], list[str]]:
    """Workers, device and framework as the system file beside the log says them (none if there is none)."""
    system_path = system_file(path)
    if system_path is None:
        return {}, {}, []
    system, warnings = read_system(system_path)
    tags = {"system_description": f"{system_path.parent.name}/{system_path.name}"}
    if "system_name" in system:
        tags["system_name"] = str(system["system_name"])
    at: dict[str, int] = system["lines"]  # type: ignore[assignment]
    found: Facts = {}
    if "accelerators" in system:
        found["workers"] = (system["accelerators"], f"{system_path.name}:{at['nodes']}")
    if "accelerator" in system:
        found["device"] = (system["accelerator"], f"{system_path.name}:{at['accelerator']}")
    named: list[str] = system.get("frameworks") or []  # type: ignore[assignment]
    framework = _framework(named, _frameworks_in_log(lines), system_path.stem) if named else None
    if framework:
        found["framework"] = (framework, f"{system_path.name}:{at['framework']}")
    elif len(named) > 1:
        warnings.append(f"{system_path}:{at['framework']}: framework {system['framework_text']!r} names several and "
                        "neither the log nor the system's name says which")  # fmt: skip
    return found, tags, warnings


def _machine(path: Path, lines: Sequence[str], log: _Log, global_batch: int) -> tuple[Facts, dict[str, str], list[str]]:
    """The run's workers, device, framework and platform as the log says them, else as the system file beside
    it says them: (facts, tags, warnings). Where both say a fact and differ, the log's is used and the system
    file's kept in a tag `system_<what>`."""
    in_log, warnings = _log_facts(path, lines, log, global_batch)
    beside, tags, file_warnings = _file_facts(path, lines)
    if "framework" in in_log:  # a warning about a framework the log settles is no warning
        file_warnings = [w for w in file_warnings if "names several" not in w]
    warnings += file_warnings
    facts = {**beside, **in_log}
    for what, (value, _) in beside.items():
        if what in in_log and str(in_log[what][0]) != str(value):
            tags[f"system_{what}"] = str(value)
    if "device" in facts:
        tags["device_name"] = str(facts["device"][0])
        facts["device"] = (device_name(str(facts["device"][0])), facts["device"][1])
    # The platform is the system's name, its folder in the layout (results/<system>/); the log's
    # submission_platform is often a placeholder ('1xSUBMISSION_PLATFORM_PLACEHOLDER'): a tag only.
    if len(path.parts) >= 4 and path.parts[-4] == "results":
        facts["platform"] = (path.parts[-3], f"its folder results/{path.parts[-3]}/")  # no line: the layout
    return facts, tags, warnings


def _benchmark(path: Path, log: _Log) -> tuple[str, str]:
    """(the benchmark, where it is named) of a log with the lines a run needs, of a benchmark the study models."""
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
    return str(benchmark), where


def _training(path: Path, log: _Log, tags: dict[str, str], warnings: list[str]) -> tuple[int, float, int]:
    """(epochs, seconds of training, the line of the last interval's end): the epoch_start -> epoch_stop intervals,
    else the blocks' (which may include evaluation); which one in `tags`. A block_stop that closes no block_start is
    a warning where the epochs are read, an error where the blocks would be."""
    if log.epochs:
        tags["throughput_intervals"] = f"{len(log.epochs)} epoch_start -> epoch_stop intervals"
        if log.stray_stops:
            warnings.append(f"{path}:{log.stray_stops[0]}: {len(log.stray_stops)} block_stop lines close no "
                            "block_start (not used: the epochs are)")  # fmt: skip
        return len(log.epochs), sum(stop - start for start, stop, _ in log.epochs) / 1000, log.epochs[-1][2]
    if log.stray_stops:
        raise SchemaError(f"{path}:{log.stray_stops[0]}: block_stop without a block_start before it")
    if log.blocks and all(count > 0 for *_, count, _ in log.blocks):
        epochs = sum(count for _, _, count, _ in log.blocks)
        training_s = sum(stop - start for start, stop, _, _ in log.blocks) / 1000
        tags["throughput_intervals"] = f"{len(log.blocks)} block_start -> block_stop intervals (may include evaluation)"
        return epochs, training_s, log.blocks[-1][3]
    raise SchemaError(f"{path}:{log.n_lines}: no finished epoch (epoch_stop) or block (block_stop with epoch_count) "
                      "in the log")  # fmt: skip


def _optional_metrics(log: _Log, start_ms: int, metrics: dict[str, float], lines_used: dict) -> None:
    """The initialisation time (init_start before run_start) and the last eval_accuracy, where the log has them."""
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


def _status(path: Path, log: _Log, stop_line: int, tags: dict[str, str]) -> str:
    """FINISHED, or FAILED (the reason in `tags`) when run_stop's status is not success."""
    status = "FINISHED" if log.stop_status in ("success", "") else "FAILED"
    tags["run_stop_status"] = log.stop_status or "not stated"
    if status == "FAILED":
        tags["failure_reason"] = (
            f"run_stop status {log.stop_status!r}: the run did not reach its target ({path.name}:{stop_line})"
        )
    return status


def parse(path: Path, options: LogOptions) -> list[RunRecord]:
    lines = lines_of(path)
    log = _scan(path, lines)
    benchmark, where = _benchmark(path, log)
    _, start_line, start_ms = log.values["run_start"]
    _, stop_line, stop_ms = log.values["run_stop"]
    batch_value, batch_line, _ = log.values["global_batch_size"]
    samples_value, samples_line, _ = log.values["train_samples"]
    global_batch = _count(batch_value, f"{path}:{batch_line}", "global_batch_size")
    train_samples = _count(samples_value, f"{path}:{samples_line}", "train_samples")
    lines_used = {"workers": batch_line, "batch_per_worker": batch_line}
    tags: dict[str, str] = {"benchmark": str(benchmark), "global_batch_size": str(global_batch)}

    facts, facts_tags, warnings = _machine(path, lines, log, global_batch)
    tags.update(facts_tags)
    lines_used.update({what: where for what, (_, where) in facts.items()})
    given = {"workers": options.workers, "device": options.device, "framework": options.framework,
             "platform": options.platform}  # fmt: skip
    chosen = {what: _param(what, facts.get(what, (None, 0))[0], value, f"--{what}", where, tags, warnings)
              for what, value in given.items()}  # fmt: skip
    workers = int(chosen["workers"])  # type: ignore[call-overload]
    if global_batch % workers:
        raise SchemaError(f"{path}:{batch_line}: global_batch_size {global_batch} does not divide over {workers} GPUs")

    epochs, training_s, train_line = _training(path, log, tags, warnings)
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
    _optional_metrics(log, start_ms, metrics, lines_used)
    status = _status(path, log, stop_line, tags)
    if "submission_platform" in log.values:
        tags["submission_platform"] = str(log.values["submission_platform"][0])
    if warnings:
        tags[WARNING_TAG] = " | ".join(warnings)
    tags.update(run_tags(options, path, train_line, lines_used, FORMAT))
    params: dict[str, object] = {
        "model": BENCHMARK_MODELS[str(benchmark)],
        "framework": chosen["framework"],
        "api": "mlperf",
        "workers": workers,
        "device": chosen["device"],
        "data": param("data", "real", options.data, "--data", where, tags),
        "batch_per_worker": global_batch // workers,
        "platform": chosen["platform"],
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
