"""hacksa-2019: the raw Slurm logs of the HackSA report (TF Estimator + Horovod on POWER9/V100) -> one run per log.

Each `logs/N.err` (resnet_v2_101), `logs/N.<model>.err` is one job with N MPI ranks (one GPU each). What is read,
following the study's own reading (experiments/reference/hacksa-2019/README.md):

- start: ` Date is now: <local time>`; end of initialisation: the last `Shuffle buffer filled` line (local time);
  time_init_s = init end - start, time_total_s = `Training took X s`, time_work_s = total - init.
- throughput: `Benchmark metric` lines, one per rank per logged step and not labelled by rank, grouped by
  global_step. At the last logged step, throughput_per_worker = mean of `average_examples_per_sec` over the
  ranks' lines and throughput_total = their sum. A group with fewer lines than ranks gives the mean of what is
  there and mean x N as total, with a `throughput_note` tag saying so.
- time_first_interval_s, time_steady_interval_s: the logging hook's ten-step timings (tf_hooks.py).
- series step_throughput_total: per logged step, the sum over ranks of `current_examples_per_sec`, stamped with
  the latest timestamp of the step's lines.
- a log without `Training took` is a FAILED run whose `failure_reason` quotes the log (Slurm time limit, lost
  Open MPI daemon, Horovod stall...); it keeps what is known (time_init_s), never zeros.

Timestamps: TensorFlow's and Slurm's lines are in the cluster's local time; the benchmark hook writes UTC ('...Z').
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from ..schema import RunRecord, SchemaError, canonical_model
from . import fetched_raw_files, published_tags, read_source, read_text
from .hacksa_log import BENCH_NAMES, TERMINAL, Bench, Log, scan, to_ms
from .tf_hooks import warmup_intervals

DEFAULT_MODEL = "resnet_v2_101"  # `N.err` files: the model is not in the file name
BATCH_PER_WORKER = 64
# The job script's --steps, split over the ranks (steps // N each): 200 (README); the VGG-19 jobs (2018-12-31, an
# earlier script) ran 500: their logs for 1 to 16 GPUs fit 500 // N, not 200 // N (see steps_per_rank).
TOTAL_STEPS = {"vgg19": 500}
DEFAULT_TOTAL_STEPS = 200
LOG_EVERY = (
    10  # both hooks log every 10 steps: the logging hook at global steps 0, 10, ...; the benchmark one at 21, 31, ...
)
DEVICE_DEFAULT = "V100"  # the README's fact, used when a log names no GPU
PLATFORM = "bsc-power9"  # IBM POWER9 nodes, 4x V100-SXM2-16GB each

FILE_RE = re.compile(r"^(?P<n>\d+)(?:\.(?P<model>[A-Za-z0-9_\-]+))?\.err$")


def steps_per_rank(model: str, workers: int, last_logged: int | None, last_bench: int | None) -> tuple[int | None, str]:
    """How many steps each rank of a finished job ran, and a note where that is not what the job script says.

    The log bounds it: the logging hook's last `global_step = G` line gives G + 1 <= S <= G + 10, and the
    benchmark hook's last line at step B gives B + 1 <= S <= B + 10. The script's TOTAL // N is taken where it
    fits those bounds; where it does not and the bounds pin one number, that number is (32-GPU VGG-19: 31 per
    rank, not 500 // 32 = 15); otherwise nothing (None) is claimed."""
    total = TOTAL_STEPS.get(model, DEFAULT_TOTAL_STEPS)
    planned = total // workers
    if last_logged is None:
        return planned, "no logged global step: the job script's split assumed"
    low, high = last_logged + 1, last_logged + LOG_EVERY
    if last_bench is not None:
        low, high = max(low, last_bench + 1), min(high, last_bench + LOG_EVERY)
    if low <= planned <= high:
        return planned, ""
    said = f"the job script's split would be {total} // {workers} = {planned} steps per rank"
    hooks = f"last logged global step {last_logged}" + (f", last benchmark step {last_bench}" if last_bench else "")
    if low == high:
        return low, f"each rank ran {low} steps ({hooks}), while {said}: this job processed other images"
    return None, f"each rank ran {low} to {high} steps ({hooks}), while {said}: how many is not known"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def _failure_reason(path: Path, log: Log) -> str:
    """The most telling line of the log (FAILURE_PATTERNS order), then the first line of each other kind."""
    first: dict[str, tuple[int, int, str]] = {}
    for rank, kind, number, text in log.failures:
        first.setdefault(kind, (rank, number, text))
    ordered = sorted(first.items(), key=lambda kv: kv[1][:2])
    parts = []
    for i, (kind, (_, number, text)) in enumerate(ordered):
        if kind == "Horovod stall":
            text = "stalled op " + text.split("/")[-1]
        quote = f"{text[:200]} ({path.name}:{number})"
        parts.append(quote if i == 0 else f"{kind}: {quote}")
    return "; also ".join(parts)


def _job(path: Path) -> tuple[int, str]:
    """(GPUs, model) as the file name 'N.err' or 'N.<model>.err' gives them."""
    m = FILE_RE.match(path.name)
    if not m:
        raise SchemaError(f"{path}:1: file name is not 'N.err' or 'N.<model>.err'")
    workers = int(m["n"])
    if workers < 1:
        raise SchemaError(f"{path}:1: file name gives {workers} GPUs")
    return workers, canonical_model(m["model"] or DEFAULT_MODEL, f"{path}:1")


def _check_job(path: Path, log: Log, workers: int, model: str) -> None:
    """Refuse a log with no start, whose model_dir lines name another job, or that names several GPU kinds."""
    if log.start is None:
        raise SchemaError(f"{path}:{log.n_lines}: no ' Date is now:' line (the job's start) in the log")
    for number, log_model, log_n in log.model_dirs:
        if canonical_model(log_model, f"{path}:{number}") != model or log_n != workers:
            raise SchemaError(
                f"{path}:{number}: the log's model_dir names cifar10_{log_model}.{log_n}, "
                f"but the file name says {model} on {workers} GPUs"
            )
    if len(log.devices) > 1:
        raise SchemaError(f"{path}:1: the log names several GPU kinds: {sorted(log.device_names)}")


def _times(path: Path, log: Log, start: datetime) -> dict[str, float]:
    """Initialisation (start to the shuffle buffer filled), total ('Training took') and the work between."""
    metrics: dict[str, float] = {}
    if log.init_end is not None:
        if log.init_end < start:
            raise SchemaError(
                f"{path}:{log.init_line}: shuffle buffer filled before the job's start (line {log.start_line})"
            )
        metrics["time_init_s"] = (log.init_end - start).total_seconds()
    if log.took is not None:
        metrics["time_total_s"] = log.took
        if "time_init_s" in metrics:
            metrics["time_work_s"] = log.took - metrics["time_init_s"]
            if metrics["time_work_s"] <= 0:
                raise SchemaError(
                    f"{path}:{log.took_line}: 'Training took' {log.took} s is not longer than "
                    f"the initialisation ({metrics['time_init_s']:.3f} s)"
                )
    return metrics


def _bench_groups(path: Path, log: Log, workers: int) -> tuple[dict[str, dict[int, list[Bench]]], dict]:
    """The benchmark lines by metric name and step, and by step: one per rank per logged step, not labelled by
    rank; more than the ranks at a step, or one before initialisation ended, is refused."""
    groups: dict[str, dict[int, list[Bench]]] = {name: defaultdict(list) for name in BENCH_NAMES}
    by_step: dict[int, list[Bench]] = defaultdict(list)
    for b in log.bench:
        group = groups[b.name][b.step]
        group.append(b)
        if len(group) > workers:
            raise SchemaError(
                f"{path}:{b.line}: {len(group)} '{b.name}' lines for global step {b.step}, "
                f"but the job has {workers} ranks"
            )
        by_step[b.step].append(b)
        if log.init_end is not None and b.ms < to_ms(log.init_end):
            raise SchemaError(
                f"{path}:{b.line}: benchmark line precedes the end of initialisation "
                f"(line {log.init_line}): is CLUSTER_UTC_OFFSET right for this log?"
            )
    return groups, by_step


def _average_throughput(averages: dict[int, list[Bench]], workers: int, metrics: dict, notes: list[str]) -> None:
    """throughput_per_worker and _total from the last logged step's average_examples_per_sec lines."""
    if not averages:
        return
    step = max(averages)
    values = [b.value for b in averages[step]]
    metrics["throughput_per_worker"] = sum(values) / len(values)
    complete = len(values) == workers
    metrics["throughput_total"] = sum(values) if complete else metrics["throughput_per_worker"] * workers
    if len(values) != workers:
        notes.append(
            f"last logged step {step} has {len(values)} of {workers} ranks' average_examples_per_sec "
            f"lines: per-worker throughput is their mean, total = mean x {workers}"
        )


def _step_series(currents: dict, by_step: dict, workers: int, notes: list[str]) -> list[tuple[int, int, float]]:
    """The job's throughput at each logged step (current_examples_per_sec summed over the ranks)."""
    series = []
    incomplete = []
    for step in sorted(currents):
        values = [b.value for b in currents[step]]
        total = sum(values) if len(values) == workers else sum(values) / len(values) * workers
        if len(values) != workers:
            incomplete.append(f"{step} ({len(values)}/{workers})")
        series.append((step, max(b.ms for b in by_step[step]), total))
    if incomplete:
        notes.append(f"step_throughput_total is mean x {workers} at steps with missing ranks: {', '.join(incomplete)}")
    return series


def _no_bench_note(log: Log, model: str, workers: int) -> str:
    """Why a log has no benchmark line."""
    if log.took is not None:
        per_rank, _ = steps_per_rank(model, workers, log.last_global_step, None)
        return "no 'Benchmark metric' line in the log: the benchmark hook first logs at global step 21" + (
            f", and each of the {workers} ranks ran only {per_rank} steps" if per_rank is not None else ""
        )
    return (
        "no 'Benchmark metric' line in the log: the job ended before the first logged step "
        f"(last global step in the log: {log.last_global_step})"
    )


def _finished(path: Path, log: Log, job: tuple[int, str], last_step: int | None, start_ms: int, params: dict,
              tags: dict[str, str]) -> int:  # fmt: skip
    """The end (ms) of a job that logged 'Training took'; its steps in `params` and `tags`; refused if a rank did
    not stop or a benchmark line comes after the end."""
    assert log.took is not None  # read_log calls this only then
    workers, model = job
    per_rank, steps_note = steps_per_rank(model, workers, log.last_global_step, last_step)
    if per_rank is not None:
        params["steps"] = per_rank * workers  # the job's steps, all ranks together: images = steps x batch
        tags["steps_per_rank"] = str(per_rank)
    if steps_note:
        tags["steps_note"] = steps_note
    missing = sorted(set(range(workers)) - log.stopped)
    if missing:
        raise SchemaError(
            f"{path}:{log.n_lines}: the log ends before rank(s) {_ranks(missing)} logged 'Stopping train' "
            f"(each of the {workers} ranks does): a log cut short?"
        )
    end_ms = start_ms + round(log.took * 1000)
    late = [b for b in log.bench if b.ms > end_ms]
    if late:
        raise SchemaError(
            f"{path}:{late[0].line}: benchmark line comes after the end of training "
            f"(start line {log.start_line} + 'Training took' line {log.took_line}): "
            "is CLUSTER_UTC_OFFSET right for this log?"
        )
    return end_ms


def _failed(path: Path, log: Log, start_ms: int, tags: dict[str, str]) -> int:
    """The end (ms: the last timestamp) of a job that did not finish, its reason in `tags`; refused when no line
    says why it stopped."""
    if not any(kind in TERMINAL for _, kind, _, _ in log.failures):
        raise SchemaError(
            f"{path}:{log.n_lines}: the log ends without 'Training took' and without a line saying why the job "
            "stopped (Slurm, Open MPI or a Python error): a log cut short?"
        )
    tags["failure_reason"] = _failure_reason(path, log)
    return log.last_ms if log.last_ms is not None else start_ms


def read_log(path: Path, source: dict[str, str]) -> RunRecord:
    workers, model = _job(path)
    log = scan(path)
    _check_job(path, log, workers, model)
    assert log.start is not None  # _check_job refused the others

    tags = published_tags(source, f"{path}:{log.start_line}")
    tags["log_file"] = path.name
    if log.device_names:
        tags["device_name"] = sorted(log.device_names)[0]
    params: dict[str, object] = {
        "model": model,
        "framework": "tensorflow",
        "api": "tf.estimator+horovod",
        "workers": workers,
        "device": next(iter(log.devices), DEVICE_DEFAULT),
        "data": "cifar10",
        "batch_per_worker": BATCH_PER_WORKER,
        "platform": PLATFORM,
    }
    last_step = max((b.step for b in log.bench), default=None)
    start_ms = to_ms(log.start)
    metrics = _times(path, log, log.start)
    metrics.update(warmup_intervals(read_text(path)))
    groups, by_step = _bench_groups(path, log, workers)
    notes: list[str] = []
    _average_throughput(groups["average_examples_per_sec"], workers, metrics, notes)
    series = _step_series(groups["current_examples_per_sec"], by_step, workers, notes)
    if not log.bench:
        notes.append(_no_bench_note(log, model, workers))
    if notes:
        tags["throughput_note"] = "; ".join(notes)
    if last_step is not None:
        tags["last_benchmark_step"] = str(last_step)

    if log.took is not None:
        status, end_ms = "FINISHED", _finished(path, log, (workers, model), last_step, start_ms, params, tags)
    else:
        status, end_ms = "FAILED", _failed(path, log, start_ms, tags)
    return RunRecord(
        experiment=source["experiment"],
        key=path.name,
        params=params,
        metrics=metrics,
        tags=tags,
        series={"step_throughput_total": series} if series else {},
        artifacts={"log": str(path)},
        status=status,
        start_ms=start_ms,
        end_ms=end_ms,
        where=f"{path}:{log.start_line}",
    )


def read(folder: Path, logs: Path | None = None) -> list[RunRecord]:
    """The dataset's runs, one per log. The logs are third-party files: those source.yaml lists are fetched into
    the cache and verified (ingest/fetch.py); `logs`, a folder of *.err files, reads those instead (a copy to
    test the parser on)."""
    source = read_source(folder)
    if logs is None:
        files, source = fetched_raw_files(folder, source)
        paths = [path for name, path in files.items() if name.startswith("logs/") and name.endswith(".err")]
        where = f"{folder / 'source.yaml'}: raw_files"
    else:
        if not logs.is_dir():
            raise SchemaError(f"{logs}: missing (the dataset's Slurm logs)")
        paths, where = list(logs.glob("*.err")), str(logs)
    paths.sort(key=lambda p: (int(m["n"]) if (m := FILE_RE.match(p.name)) else 0, p.name))
    if not paths:
        raise SchemaError(f"{where}: no logs/*.err log")
    return [read_log(path, source) for path in paths]
