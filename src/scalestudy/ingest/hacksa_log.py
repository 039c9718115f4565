"""The lines of one HackSA log (ingest/hacksa.py) read into a `Log`: the job's start, the end of initialisation,
'Training took', the benchmark hook's lines, the ranks that stopped, the GPUs, model_dir lines and the lines that say
why a job ended early. What they mean, and the run built from them: hacksa.py.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from ..schema import SchemaError
from . import read_text

# The cluster (BSC, Barcelona) logs local time, which is CET = UTC+1 in December and January, the months of
# every log here. Checked on the data (and by read_log on every import): with this offset each log's first
# benchmark line (UTC) comes 12-27 s after its last `Shuffle buffer filled` line (local), and its last one
# 0.8-6.6 s before start + `Training took`; with UTC+0 or UTC+2 one of the two orders breaks.
CLUSTER_UTC_OFFSET = timedelta(hours=1)
CLUSTER_TZ = timezone(CLUSTER_UTC_OFFSET, "CET")

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
class Bench:
    line: int
    name: str
    value: float
    step: int
    ms: int


@dataclass
class Log:
    start: datetime | None = None
    start_line: int = 0
    init_end: datetime | None = None
    init_line: int = 0
    took: float | None = None
    took_line: int = 0
    last_ms: int | None = None  # latest timestamp anywhere in the log, unix ms
    n_lines: int = 0
    last_global_step: int | None = None  # of the `accuracy = ..., global_step = N` lines
    bench: list[Bench] = field(default_factory=list)
    devices: set[str] = field(default_factory=set)
    device_names: set[str] = field(default_factory=set)
    model_dirs: list[tuple[int, str, int]] = field(default_factory=list)
    failures: list[tuple[int, str, int, str]] = field(default_factory=list)  # (rank, kind, line, text)
    stopped: set[int] = field(default_factory=set)  # ranks that logged 'Stopping train for R'

    def seen(self, ms: int) -> None:
        self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)


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


def to_ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _scan_start_and_init(log: Log, text: str, number: int, where: str) -> None:
    """The job's start (the first 'Date is now' line) and the end of initialisation (the last 'Shuffle buffer
    filled' line)."""
    if "Date is now" in text:
        m = DATE_RE.match(text)
        if not m:
            raise SchemaError(f"{where}: 'Date is now' line does not parse: {text.strip()[:120]!r}")
        moment = _local(m["ts"], where)
        if log.start is None:
            log.start, log.start_line = moment, number
        log.seen(to_ms(moment))
    m = TF_TS_RE.match(text)
    if m:
        moment = _local(m["ts"], where)
        log.seen(to_ms(moment))
        if SHUFFLE_RE.search(text) and (log.init_end is None or moment >= log.init_end):
            log.init_end, log.init_line = moment, number
    elif SHUFFLE_RE.search(text):
        raise SchemaError(f"{where}: 'Shuffle buffer filled' line without a timestamp: {text.strip()[:120]!r}")


def _scan_took(log: Log, text: str, number: int, where: str) -> None:
    """The first 'Training took S' line's seconds."""
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


def _scan_facts(log: Log, text: str, number: int) -> None:
    """Stopped ranks, the last logged global step, model_dir lines, GPUs and the first failure pattern of a line."""
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
    for rank, (kind, pattern) in enumerate(FAILURE_PATTERNS):
        m = pattern.search(text)
        if m:
            log.failures.append((rank, kind, number, m.group(0).strip()))
            break


def scan(path: Path) -> Log:
    log = Log()
    lines = read_text(path).split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    for number, text in enumerate(lines, start=1):
        where = f"{path}:{number}"
        log.n_lines = number
        _scan_start_and_init(log, text, number, where)
        m = BENCH_RE.search(text)
        if m:
            log.bench.append(_bench(m["dict"], where, number))
            log.seen(log.bench[-1].ms)
        if "Training took" in text:
            _scan_took(log, text, number, where)
        m = SLURM_TS_RE.search(text)
        if m and SLURM_RE.search(text):  # the line's facts (below) raise nothing: read before them or after alike
            log.seen(to_ms(_local(m["ts"], where, "%Y-%m-%dT%H:%M:%S")))
        _scan_facts(log, text, number)
    return log


def _bench(text: str, where: str, number: int) -> Bench:
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
    return Bench(number, entry["name"], float(value), step, to_ms(_utc(entry["timestamp"], where)))
