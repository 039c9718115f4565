"""NVIDIA DLLogger JSON lines (`DLLL {...}`, as NVIDIA DeepLearningExamples' PyTorch image classification writes
them) -> one run per file.

Lines: a PARAMETER line (`"step": "PARAMETER"`: the run's arguments: `arch`, `batch_size` per GPU, `world_size`
(GPUs), `data_backend`, `amp`, `evaluate`...), METADATA lines (units), and LOG lines whose `step` is `[epoch,
iteration]` (a logging point, split over two lines with the same step), `[epoch]` (the end of an epoch) or `[]` (the
end of the run). throughput_total is `train.total_ips` of the last end-of-epoch line (images/s over that epoch, all
GPUs); the iteration lines come every print_freq steps with values the logger's meters aggregate, not one step's
instantaneous value: they are not stored as a series. `val.*` metrics are evaluation. Caveats: the PARAMETER key
`workers` is the number of data-loader processes, not GPUs; `optimizer_batch_size` counts gradient accumulation and
is not the batch per step. A log with no end-of-epoch `train.total_ips` (an evaluation-only run, `"evaluate": true`)
has no training throughput and is refused; one whose last epoch did not end stopped mid-way: an error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ...schema import RunRecord, SchemaError, canonical_model
from . import LogOptions, lines_of, log_record, param, run_tags

FORMAT = "dllogger"
PREFIX = "DLLL "
THROUGHPUT = "train.total_ips"
SYNTHETIC_BACKENDS = ("synthetic", "syntetic")  # DeepLearningExamples spells its synthetic loader 'syntetic'


def sniff(lines: Sequence[str]) -> bool:
    return any(line.lstrip(" \t").startswith(PREFIX + "{") for line in lines[:20])


def parse(path: Path, options: LogOptions) -> list[RunRecord]:  # noqa: C901 -- still to split (issue 22): issue 21 was rewriting it
    lines = lines_of(path)
    parameters: dict | None = None
    parameter_line = 0
    last_epoch: tuple[int, float, int, float] | None = None  # (epoch, train.total_ips, line, unix s)
    started_after: tuple[int, int] | None = None  # (epoch, line) of an iteration line after the last epoch's end
    first_ts: float | None = None
    ended = False
    accuracy: tuple[float, int] | None = None
    for number, text in enumerate(lines, start=1):
        text = text.lstrip(" \t")  # with or without leading blanks
        if not text.startswith(PREFIX):
            continue  # DLLogger files hold only its lines; a stdout copy may have others around them
        try:
            entry = json.loads(text[len(PREFIX) :])
        except ValueError as err:
            raise SchemaError(f"{path}:{number}: DLLL line is not valid JSON (cut short?): {err.msg}") from None
        if not isinstance(entry, dict) or "type" not in entry:
            raise SchemaError(f"{path}:{number}: DLLL line without a 'type'")
        try:
            stamp = float(entry.get("timestamp"))
        except (TypeError, ValueError):
            stamp = None
        if first_ts is None and stamp is not None:
            first_ts = stamp
        step, data = entry.get("step"), entry.get("data") or {}
        if entry["type"] != "LOG":
            continue
        if step == "PARAMETER":
            parameters, parameter_line = data, number
        elif isinstance(step, list) and len(step) == 1:  # end of an epoch
            if THROUGHPUT in data:
                value = data[THROUGHPUT]
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise SchemaError(f"{path}:{number}: {THROUGHPUT} {value!r} is not a number")
                last_epoch = (int(step[0]), float(value), number, stamp or 0.0)
                started_after = None
            if "val.top1" in data and isinstance(data["val.top1"], (int, float)):
                accuracy = (float(data["val.top1"]) / 100, number)
        elif isinstance(step, list) and len(step) >= 2 and any(k.startswith("train.") for k in data):
            if last_epoch is None or int(step[0]) > last_epoch[0]:
                started_after = started_after or (int(step[0]), number)
        elif step == []:
            ended = True
    if parameters is None:
        raise SchemaError(f"{path}:1: no DLLL PARAMETER line (the run's arguments)")
    where = f"{path}:{parameter_line}"
    if last_epoch is None:
        if parameters.get("evaluate"):
            raise SchemaError(
                f'{where}: an evaluation-only run ("evaluate": true): it has no training throughput '
                f"(no end-of-epoch {THROUGHPUT}) and is not imported"
            )
        raise SchemaError(f"{path}:{len(lines)}: no end-of-epoch {THROUGHPUT} line: the run stopped before its "
                          "first epoch ended, or is not a training run")  # fmt: skip
    if started_after is not None and not ended:
        raise SchemaError(
            f"{path}:{len(lines)}: epoch {started_after[0]} started (line {started_after[1]}) and did not end, "
            "and the log has no end-of-run line: a log cut short?"
        )
    epoch, value, line, stamp = last_epoch
    model = canonical_model(str(parameters.get("arch", "")), where)
    tags: dict[str, str] = {"epochs_logged": str(epoch + 1), "throughput_epoch": str(epoch)}
    if parameters.get("amp") or parameters.get("fp16"):
        tags["precision"] = "amp" if parameters.get("amp") else "fp16"
    world = parameters.get("world_size")
    if not isinstance(world, int) or world < 1:
        world = None
    backend = str(parameters.get("data_backend", ""))
    lines_used = {"throughput_total": line, "model": parameter_line, "workers": parameter_line,
                  "batch_per_worker": parameter_line}  # fmt: skip
    metrics = {"throughput_total": value}
    if accuracy is not None and 0 <= accuracy[0] <= 1:
        metrics["accuracy_test"] = accuracy[0]
        lines_used["accuracy_test"] = accuracy[1]
    tags.update(run_tags(options, path, line, lines_used, FORMAT))
    data = "synthetic" if backend in SYNTHETIC_BACKENDS else "real"
    params: dict[str, object] = {
        "model": model,
        "framework": param("framework", "pytorch", options.framework, "--framework", where, tags),
        "api": "deeplearningexamples",
        "workers": param("workers", world, options.workers, "--workers", where, tags),
        "device": param("device", None, options.device, "--device", where, tags),
        "data": param("data", data, options.data, "--data", where, tags),
        "batch_per_worker": parameters.get("batch_size"),
        "platform": param("platform", None, options.platform, "--platform", where, tags),
    }
    start_ms = round(first_ts * 1000) if first_ts else None
    return [
        log_record(
            options,
            path,
            None,
            params=params,
            metrics=metrics,
            tags=tags,
            start_ms=start_ms,
            end_ms=round(stamp * 1000) if start_ms and stamp else None,
            where=where,
        )
    ]
