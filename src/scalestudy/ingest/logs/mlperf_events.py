"""MLPerf Training result logs in every format the rounds 2018-2024 wrote -> one list of events per file.

Four formats (experiments/reference/mlperf-training-resnet/README.md quotes a line of each):

- `:::MLLOG {json}` (v0.7 to v4.0): keys namespace, time_ms (v0.7 Alibaba: time_s), event_type, key, value, metadata;
- `:::MLL <unix s> <key>: {"value": ..., "metadata": {...}}` (v0.6);
- `:::MLPv0.5.0 <benchmark> <unix s> (<file>:<line>) <key>[: <value>]` (v0.5), value JSON or bare text;
- `MLPerf: <benchmark> [mm/dd/yy HH:MM:SS], <key>[: <value>]` (v0.6 Alibaba, non-compliant): 1-second times
  without a zone (read as UTC, good only for differences) and values such as `{"value": 75.98000%, "epoch": 79}`.

A marker may follow a launcher prefix (`0: `, `[1,0]<stdout>:`, `DEBUG:mlperf_compliance:`), so it is searched for
anywhere in a line; a line some loggers echo twice is kept once (the same text after the marker), except
`init_start`, which every rank logs (v0.6 NVIDIA and Fujitsu, v0.7 Alibaba: as many lines as GPUs).
`mllog_entry` is the one decoder of an MLLOG line (ingest/logs/mlperf.py uses it too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ...schema import SchemaError

MLLOG = ":::MLLOG "
MLL = ":::MLL "
MLP05 = ":::MLPv0.5.0 "
NONCOMPLIANT = "MLPerf: "
FORMATS = {  # name -> (marker, what it is)
    "mllog": (MLLOG, ":::MLLOG JSON lines (v0.7-v4.0)"),
    "mll": (MLL, ":::MLL lines (v0.6)"),
    "mlp05": (MLP05, ":::MLPv0.5.0 lines (v0.5)"),
    "mlperf-bracket": (NONCOMPLIANT, "non-compliant 'MLPerf: resnet [date time], key' lines (v0.6 Alibaba)"),
}
MLL_RE = re.compile(r":::MLL (?P<t>\d+(?:\.\d*)?) (?P<key>\w+): (?P<rest>.*)$")
MLP05_RE = re.compile(
    r":::MLPv0\.5\.0 (?P<bench>\S+) (?P<t>\d+(?:\.\d*)?) \((?P<src>[^)]*)\) (?P<key>\w+)(?::(?P<rest>.*))?$"
)
BRACKET_RE = re.compile(
    r"MLPerf: (?P<bench>\S+) \[(?P<t>\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\], (?P<key>\w+)(?:\s*:(?P<rest>.*))?$"
)
BRACKET_MARK_RE = re.compile(r"MLPerf: \S+ \[\d\d/\d\d/\d\d \d\d:\d\d:\d\d\], ")
PERCENT_RE = re.compile(r'"value":\s*(?P<v>[-\d.]+)%')
EPOCH_RE = re.compile(r'"epoch":\s*(?P<e>-?\d+)')


@dataclass(frozen=True)
class Event:
    key: str
    value: object
    t: float | None  # unix seconds; None where the logger wrote none (settings stamped 0)
    line: int  # 1-based line in the file
    meta: dict = field(default_factory=dict)


def detect(text: str) -> str | None:
    """The format of a log's text, by the first marker found (the most specific first), or None."""
    for name, (marker, _) in FORMATS.items():
        if name == "mlperf-bracket":
            if BRACKET_MARK_RE.search(text):
                return name
        elif marker in text:
            return name
    return None


def mllog_entry(text: str, where: str) -> dict:
    """The JSON object of one `:::MLLOG` line's text after the marker; SchemaError naming `where` if it is not
    one with a 'key' and a numeric time_ms (or time_s, as v0.7 Alibaba writes), which is put in `t_s`."""
    try:
        entry = json.loads(text)
    except ValueError as err:
        raise SchemaError(f"{where}: MLLOG line is not valid JSON (cut short?): {err.msg}") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
        raise SchemaError(f"{where}: MLLOG line without a 'key'")
    ms, s = entry.get("time_ms"), entry.get("time_s")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        entry["t_s"] = ms / 1000
    elif isinstance(s, (int, float)) and not isinstance(s, bool):
        entry["t_s"] = float(s)
    else:
        raise SchemaError(f"{where}: MLLOG line {entry['key']!r} has no numeric time_ms (or time_s)")
    return entry


def _bare_value(rest: str | None) -> object:
    """A v0.5 value: JSON where it parses, else the bare text (`run_set_random_seed:2019`, `75.98000%`)."""
    if rest is None:
        return None
    rest = rest.strip()
    if not rest:
        return None
    try:
        return json.loads(rest)
    except ValueError:
        percent, epoch = PERCENT_RE.search(rest), EPOCH_RE.search(rest)
        if percent:  # the non-compliant `{"value": 14.48800%, "epoch": 3}`: a percentage, not JSON
            value: dict = {"value": float(percent["v"]) / 100}
            if epoch:
                value["epoch"] = int(epoch["e"])
            return value
        return rest


def events(path: Path, text: str) -> tuple[str, list[Event]]:
    """(format, the MLPerf events of a log in file order, each line once); SchemaError if no format fits."""
    fmt = detect(text)
    if fmt is None:
        raise SchemaError(f"{path}:1: no MLPerf log line (:::MLLOG, :::MLL, :::MLPv0.5.0 or 'MLPerf: x [date]')")
    marker = FORMATS[fmt][0]
    found: list[Event] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        at = line.find(marker)
        if at < 0:
            continue
        body = line[at:].rstrip()  # a CRLF file's \r, and blanks after a bare `key` (its pattern ends at the key)
        if body in seen:  # a logger that echoes each line twice; every rank's init_start counts (GPUs)
            continue
        event = _event(fmt, body, f"{path}:{number}", number)
        if event is not None:
            found.append(event)
            if event.key != "init_start":
                seen.add(body)
    return fmt, found


def _event(fmt: str, body: str, where: str, number: int) -> Event | None:
    if fmt == "mllog":
        entry = mllog_entry(body[len(MLLOG) :], where)
        t = entry["t_s"] or None  # v0.7 Alibaba repeats settings at time_s 0.0
        return Event(entry["key"], entry.get("value"), t, number, entry.get("metadata") or {})
    if fmt == "mll":
        m = MLL_RE.match(body)
        if not m:
            return None  # a line cut by another process's output: not an event
        try:
            payload = json.loads(m["rest"])
        except ValueError:
            raise SchemaError(f"{where}: MLL line {m['key']!r}: the value is not JSON") from None
        payload = payload if isinstance(payload, dict) else {"value": payload}
        return Event(m["key"], payload.get("value"), float(m["t"]) or None, number, payload.get("metadata") or {})
    if fmt == "mlp05":
        m = MLP05_RE.match(body)
        if not m:
            return None
        return Event(m["key"], _bare_value(m["rest"]), float(m["t"]), number, {"benchmark": m["bench"]})
    m = BRACKET_RE.match(body)
    if not m:
        return None
    moment = datetime.strptime(m["t"], "%m/%d/%y %H:%M:%S").replace(tzinfo=UTC)
    return Event(m["key"], _bare_value(m["rest"]), moment.timestamp(), number, {"benchmark": m["bench"]})
