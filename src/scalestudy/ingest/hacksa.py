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

import ast
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from ..schema import RunRecord, SchemaError, canonical_model
from . import fetched_raw_files, published_tags, read_source, read_text
from .tf_hooks import warmup_intervals

# The cluster (BSC, Barcelona) logs local time, which is CET = UTC+1 in December and January, the months of
# every log here. Checked on the data (and by read_log on every import): with this offset each log's first
# benchmark line (UTC) comes 12-27 s after its last `Shuffle buffer filled` line (local), and its last one
# 0.8-6.6 s before start + `Training took`; with UTC+0 or UTC+2 one of the two orders breaks.
CLUSTER_UTC_OFFSET = timedelta(hours=1)
CLUSTER_TZ = timezone(CLUSTER_UTC_OFFSET, "CET")

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
DATE_RE = re.compile(r"^\s*Date is now:\s*(?P<ts>.*?)\s*$")
TF_TS_RE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+): [IWEF] ")
SHUFFLE_RE = re.compile(r"Shuffle buffer filled")
BENCH_RE = re.compile(r"Benchmark metric:\s*(?P<dict>.*)$")
TOOK_RE = re.compile(r"Training took\s+(?P<value>\S+)\s+s\b")
MODEL_DIR_RE = re.compile(r"'_model_dir':\s*'[^']*/cifar10_(?P<model>[A-Za-z0-9_]+?)\.(?P<n>\d+)'")
DEVICE_RE = re.compile(r"\bname: Tesla (?P<gpu>[A-Z]\d+)(?P<rest>[-\w]*)")
GLOBAL_STEP_RE = re.compile(r"global_step = (\d+)")
STOPPED_RE = re.compile(r"-+ Stopping train for (\d+) -+")  # each rank's last line of training
SLURM_RE = re.compile(r"slurmstepd: error: \*\*\* .*\*\*\*")
SLURM_TS_RE = re.compile(r"CANCELLED AT (?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
BENCH_NAMES = ("average_examples_per_sec", "current_examples_per_sec")
BENCH_KEYS = ("name", "value", "global_step", "timestamp")

# Lines that say why a job ended early, most telling first (what the log says, quoted in failure_reason). All but a
# Horovod stall warning say that the job ended; a log without 'Training took' needs one of those to be a failed
# run, else it is a log cut short (an error, not a run).
TERMINAL = ("Slurm", "Open MPI", "Python")
FAILURE_PATTERNS = [
    ("Slurm", re.compile(r"slurmstepd: error: .*")),
    (
        "Open MPI",
        re.compile(
            r"ORTE has lost communication with a remote daemon.*|"
            r"mpirun noticed that process rank .*|Primary job\s+terminated normally.*|"
            r"ORTE was unable to reliably start.*|An ORTE daemon has unexpectedly failed.*"
        ),
    ),
    ("Python", re.compile(r"^[\w.]*(Error|Exception): .*")),
    ("Horovod stall", re.compile(r".*\[missing ranks: [\d, ]+\]")),
]


@dataclass
class _Bench:
    line: int
    name: str
    value: float
    step: int
    ms: int


@dataclass
class _Log:
    start: datetime | None = None
    start_line: int = 0
    init_end: datetime | None = None
    init_line: int = 0
    took: float | None = None
    took_line: int = 0
    last_ms: int | None = None  # latest timestamp anywhere in the log, unix ms
    n_lines: int = 0
    last_global_step: int | None = None  # of the `accuracy = ..., global_step = N` lines
    bench: list[_Bench] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    device_names: set[str] = field(default_factory=set)
    model_dirs: list[tuple[int, str, int]] = field(default_factory=list)
    failures: list[tuple[int, str, int, str]] = field(default_factory=list)  # (rank, kind, line, text)
    stopped: set[int] = field(default_factory=set)  # ranks that logged 'Stopping train for R'


def _local(text: str, where: str, *formats: str) -> datetime:
    """A local-time stamp; Python prints a datetime without '.ffffff' when its microseconds are 0."""
    for fmt in formats or ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=CLUSTER_TZ)
        except ValueError:
            continue
    raise SchemaError(f"{where}: timestamp {text.strip()!r} does not parse")


def _utc(text: str, where: str) -> datetime:
    try:
        if not text.endswith("Z"):
            raise ValueError
        return datetime.strptime(text[:-1], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    except ValueError:
        raise SchemaError(
            f"{where}: benchmark timestamp {text!r} does not parse as UTC 'YYYY-MM-DDTHH:MM:SS.ffffffZ'"
        ) from None


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _scan(path: Path) -> _Log:  # noqa: C901 -- still to split (issue 22): issue 24 was editing it
    log = _Log()

    def seen(ms: int) -> None:
        log.last_ms = ms if log.last_ms is None else max(log.last_ms, ms)

    lines = read_text(path).split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    for number, text in enumerate(lines, start=1):
        where = f"{path}:{number}"
        log.n_lines = number
        if "Date is now" in text:
            m = DATE_RE.match(text)
            if not m:
                raise SchemaError(f"{where}: 'Date is now' line does not parse: {text.strip()[:120]!r}")
            moment = _local(m["ts"], where)
            if log.start is None:
                log.start, log.start_line = moment, number
            seen(_ms(moment))
        m = TF_TS_RE.match(text)
        if m:
            moment = _local(m["ts"], where)
            seen(_ms(moment))
            if SHUFFLE_RE.search(text) and (log.init_end is None or moment >= log.init_end):
                log.init_end, log.init_line = moment, number
        elif SHUFFLE_RE.search(text):
            raise SchemaError(f"{where}: 'Shuffle buffer filled' line without a timestamp: {text.strip()[:120]!r}")
        m = BENCH_RE.search(text)
        if m:
            log.bench.append(_bench(m["dict"], where, number))
            seen(log.bench[-1].ms)
        if "Training took" in text:
            m = TOOK_RE.search(text)
            value = None
            if m:
                try:
                    value = float(m["value"])
                except ValueError:
                    pass
            if value is None or value != value or value <= 0:
                raise SchemaError(f"{where}: 'Training took' value is not a positive number: {text.strip()!r}")
            if log.took is None:
                log.took, log.took_line = value, number
        for rank in STOPPED_RE.findall(text):
            log.stopped.add(int(rank))
        for step in GLOBAL_STEP_RE.findall(text):
            log.last_global_step = max(int(step), log.last_global_step or 0)
        m = MODEL_DIR_RE.search(text)
        if m:
            log.model_dirs.append((number, m["model"], int(m["n"])))
        m = DEVICE_RE.search(text)
        if m:
            log.devices.add(m["gpu"])
            log.device_names.add(f"Tesla {m['gpu']}{m['rest']}")
        m = SLURM_TS_RE.search(text)
        if m and SLURM_RE.search(text):
            seen(_ms(_local(m["ts"], where, "%Y-%m-%dT%H:%M:%S")))
        for rank, (kind, pattern) in enumerate(FAILURE_PATTERNS):
            m = pattern.search(text)
            if m:
                log.failures.append((rank, kind, number, m.group(0).strip()))
                break
    return log


def _bench(text: str, where: str, number: int) -> _Bench:
    try:
        entry = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise SchemaError(
            f"{where}: 'Benchmark metric' entry does not parse (truncated?): {text.strip()[:120]!r}"
        ) from None
    if not isinstance(entry, dict):
        raise SchemaError(f"{where}: 'Benchmark metric' entry is not a dict: {text.strip()[:120]!r}")
    missing = [k for k in BENCH_KEYS if k not in entry]
    if missing:
        raise SchemaError(f"{where}: 'Benchmark metric' entry lacks {missing}")
    if entry["name"] not in BENCH_NAMES:
        raise SchemaError(f"{where}: unknown benchmark metric {entry['name']!r} (known: {', '.join(BENCH_NAMES)})")
    value, step = entry["value"], entry["global_step"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise SchemaError(f"{where}: benchmark value {value!r} is not a valid measurement")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise SchemaError(f"{where}: benchmark global_step {step!r} is not a step number")
    if not isinstance(entry["timestamp"], str):
        raise SchemaError(f"{where}: benchmark timestamp {entry['timestamp']!r} is not a string")
    return _Bench(number, entry["name"], float(value), step, _ms(_utc(entry["timestamp"], where)))


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


def _failure_reason(path: Path, log: _Log) -> str:
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


def read_log(path: Path, source: dict[str, str]) -> RunRecord:  # noqa: C901 -- still to split (issue 22): issue 24 was editing it
    m = FILE_RE.match(path.name)
    if not m:
        raise SchemaError(f"{path}:1: file name is not 'N.err' or 'N.<model>.err'")
    workers = int(m["n"])
    if workers < 1:
        raise SchemaError(f"{path}:1: file name gives {workers} GPUs")
    model = canonical_model(m["model"] or DEFAULT_MODEL, f"{path}:1")

    log = _scan(path)
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
    metrics: dict[str, float] = {}
    start_ms = _ms(log.start)

    if log.init_end is not None:
        if log.init_end < log.start:
            raise SchemaError(
                f"{path}:{log.init_line}: shuffle buffer filled before the job's start (line {log.start_line})"
            )
        metrics["time_init_s"] = (log.init_end - log.start).total_seconds()
    if log.took is not None:
        metrics["time_total_s"] = log.took
        if "time_init_s" in metrics:
            metrics["time_work_s"] = log.took - metrics["time_init_s"]
            if metrics["time_work_s"] <= 0:
                raise SchemaError(
                    f"{path}:{log.took_line}: 'Training took' {log.took} s is not longer than "
                    f"the initialisation ({metrics['time_init_s']:.3f} s)"
                )

    metrics.update(warmup_intervals(read_text(path)))
    # Benchmark lines: one per rank per logged step, not labelled by rank.
    groups: dict[str, dict[int, list[_Bench]]] = {name: defaultdict(list) for name in BENCH_NAMES}
    by_step: dict[int, list[_Bench]] = defaultdict(list)
    for b in log.bench:
        group = groups[b.name][b.step]
        group.append(b)
        if len(group) > workers:
            raise SchemaError(
                f"{path}:{b.line}: {len(group)} '{b.name}' lines for global step {b.step}, "
                f"but the job has {workers} ranks"
            )
        by_step[b.step].append(b)
        if log.init_end is not None and b.ms < _ms(log.init_end):
            raise SchemaError(
                f"{path}:{b.line}: benchmark line precedes the end of initialisation "
                f"(line {log.init_line}): is CLUSTER_UTC_OFFSET right for this log?"
            )

    notes = []
    averages = groups["average_examples_per_sec"]
    if averages:
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
    currents = groups["current_examples_per_sec"]
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
    if not log.bench:
        if log.took is not None:
            per_rank, _ = steps_per_rank(model, workers, log.last_global_step, None)
            notes.append(
                "no 'Benchmark metric' line in the log: the benchmark hook first logs at global step 21"
                + (f", and each of the {workers} ranks ran only {per_rank} steps" if per_rank is not None else "")
            )
        else:
            notes.append(
                "no 'Benchmark metric' line in the log: the job ended before the first logged step "
                f"(last global step in the log: {log.last_global_step})"
            )
    if notes:
        tags["throughput_note"] = "; ".join(notes)
    if last_step is not None:
        tags["last_benchmark_step"] = str(last_step)

    if log.took is not None:
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
        status = "FINISHED"
        end_ms = start_ms + round(log.took * 1000)
        late = [b for b in log.bench if b.ms > end_ms]
        if late:
            raise SchemaError(
                f"{path}:{late[0].line}: benchmark line comes after the end of training "
                f"(start line {log.start_line} + 'Training took' line {log.took_line}): "
                "is CLUSTER_UTC_OFFSET right for this log?"
            )
    else:
        if not any(kind in TERMINAL for _, kind, _, _ in log.failures):
            raise SchemaError(
                f"{path}:{log.n_lines}: the log ends without 'Training took' and without a line saying why the job "
                "stopped (Slurm, Open MPI or a Python error): a log cut short?"
            )
        status = "FAILED"
        tags["failure_reason"] = _failure_reason(path, log)
        end_ms = log.last_ms if log.last_ms is not None else start_ms
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
