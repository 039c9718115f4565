"""An independent reading of the MLPerf Training ResNet-50 corpus -> tests/golden/mlperf_runs.csv.

Written once, from the corpus's own README (../shared/reference/mlperf-training-resnet/README.md: "Log formats",
"Facts a parser needs", "One careful reading of the logs") and the raw files, with json and re only: it imports
nothing of scalestudy, so a fault shared with the importer (ingest/mlperf_training.py, mlperf_reading.py,
logs/mlperf_events.py, logs/mlperf_system.py) would have to be written twice. One row per run the importer makes
(one distinct log: a log republished byte for byte is one run, keyed by its first path in manifest.csv).

Where this reading and the store's needed a decision, the table's `reviewed` column says what was decided (written
by hand after reading the raw file); a new table keeps the notes of the one it replaces, row by row.
tests/test_mlperf_golden.py compares the store with the table.

    python scripts/mlperf_golden.py [--mirror DIR] [--out tests/golden/mlperf_runs.csv]
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATASET = "mlperf-training-resnet"
OUT = REPO / "tests" / "golden" / "mlperf_runs.csv"
NOT_STATED = "not stated"
FIELDS = ("log", "round", "submitter", "system", "division", "accelerator_model", "accelerators", "nodes",
          "framework_stated", "framework", "global_batch_size", "train_samples_per_epoch", "epochs", "status",
          "time_to_train_s", "accuracy", "copies", "reviewed")  # fmt: skip
FRAMEWORK_NAMES = {
    "mxnet": "mxnet",
    "pytorch": "pytorch",
    "tensorflow": "tensorflow",
    "tf": "tensorflow",
    "jax": "jax",
    "paddlepaddle": "paddle",
    "mindspore": "mindspore",
    "caffe": "caffe",
    "tinygrad": "tinygrad",
    "mxneti": "mxnet",  # v4.0 Quanta's "NVIDIA PyTorch/MxNeti/DGL": its log runs NVIDIA's MXNet ResNet
}
NO_ACCELERATOR = {"", "n/a", "na", "none", "0"}
TARGET_FROM_V06 = 0.759  # corpus README, "Caveats": every successful run from v0.6 on ends at >= 0.759
IMAGENET_TRAIN = 1281167  # corpus README: v0.6 NVIDIA logs no train sample count; ImageNet's is assumed
V05_BATCH = {"google": "global", "nvidia": "per accelerator"}  # corpus README, "Facts a parser needs": input_batch_size


class Event:
    """One MLPerf line: key, time in seconds, value, metadata and line number."""

    __slots__ = ("key", "line", "meta", "t", "value")

    def __init__(self, key: str, t: float, value: object, meta: dict, line: int) -> None:
        self.key, self.t, self.value, self.meta, self.line = key, t, value, meta, line


# ---- the four log formats (corpus README, "Log formats") -------------------------------------------------------------
MLLOG = re.compile(r":::MLLOG (\{.*\})\s*$")
MLL = re.compile(r":::MLL (\S+) (\w+): (\{.*\})\s*$")
MLP05 = re.compile(r":::MLPv0\.5\.0 (\w+) (\S+) \([^)]*\) (\w+)(?::\s*(.*?))?\s*$")
BRACKET = re.compile(r"MLPerf: (\w+) \[(\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\], (\w+)(?::\s*(.*?))?\s*$")


def _loose_json(text: str | None) -> object:
    """A v0.5 value: JSON, else (v0.6 Alibaba) JSON with `75.98%` read as 0.7598, else the bare text."""
    if text is None or text == "":
        return None
    for candidate in (text, re.sub(r"(-?\d+(?:\.\d+)?)%", lambda m: repr(float(m.group(1)) / 100), text)):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return text


def _mllog(match: re.Match, line: int) -> Event | None:
    record = json.loads(match.group(1))
    t = record["time_ms"] / 1000 if "time_ms" in record else float(record.get("time_s", 0.0))
    return Event(record["key"], t, record.get("value"), record.get("metadata") or {}, line)


def _mll(match: re.Match, line: int) -> Event:
    record = json.loads(match.group(3))
    return Event(match.group(2), float(match.group(1)), record.get("value"), record.get("metadata") or {}, line)


def _mlp05(match: re.Match, line: int) -> Event:
    return Event(match.group(3), float(match.group(2)), _loose_json(match.group(4)), {}, line)


def _bracket(match: re.Match, line: int) -> Event:
    stamp = datetime.strptime(match.group(2), "%m/%d/%y %H:%M:%S").replace(tzinfo=UTC)
    return Event(match.group(3), stamp.timestamp(), _loose_json(match.group(4)), {}, line)


READERS = (("mllog", MLLOG, _mllog), ("mll", MLL, _mll), ("mlp05", MLP05, _mlp05), ("bracket", BRACKET, _bracket))


def log_events(text: str) -> tuple[str, list[Event]]:
    """(format, events) of one log: a marker is searched anywhere in a line; a line echoed twice counts once."""
    seen: set[str] = set()
    found: dict[str, list[Event]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for name, pattern, make in READERS:
            match = pattern.search(line)
            if match is None:
                continue
            payload = line[match.start() :]
            if payload in seen:
                break
            seen.add(payload)
            try:
                event = make(match, number)
            except (ValueError, KeyError):
                break
            found.setdefault(name, []).append(event)
            break
    name = max(found, key=lambda n: len(found[n])) if found else "none"
    return name, found.get(name, [])


# ---- the numbers of one log (corpus README, "Facts a parser needs" and "One careful reading of the logs") ------------
def _keyed(events: list[Event], key: str) -> list[Event]:
    return [e for e in events if e.key == key]


def _first_value(events: list[Event], *keys: str) -> object:
    for key in keys:
        hits = _keyed(events, key)
        if hits:
            return hits[0].value
    return None


def _whole(value: object) -> int | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def _accuracy(event: Event) -> float | None:
    value = event.value.get("value") if isinstance(event.value, dict) else event.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def last_accuracy(events: list[Event]) -> float | None:
    readings = [a for a in map(_accuracy, _keyed(events, "eval_accuracy")) if a is not None]
    return readings[-1] if readings else None


def status(events: list[Event]) -> str:
    """run_stop's metadata.status; Graphcore's value {"success": false}; v0.5's value {"success": true|"true"};
    a run_stop that says nothing: the last eval_accuracy against eval_target (0.759 from v0.6 on)."""
    stops = _keyed(events, "run_stop")
    if not stops:
        return "no_run_stop"
    stop = stops[-1]
    stated = str(stop.meta.get("status") or "").lower()
    said = stop.value.get("success") if isinstance(stop.value, dict) else None
    if stated:
        return "aborted" if said is False else stated
    if said is not None:
        return "success" if str(said).lower() == "true" else "aborted"
    target = _first_value(events, "eval_target")
    target = float(target) if isinstance(target, (int, float)) else TARGET_FROM_V06
    accuracy = last_accuracy(events)
    return "success" if accuracy is not None and accuracy >= target else "aborted"


def time_to_train(events: list[Event]) -> float | None:
    """Last run_stop - first run_start (MLPerf's score for one run)."""
    starts, stops = _keyed(events, "run_start"), _keyed(events, "run_stop")
    return stops[-1].t - starts[0].t if starts and stops else None


def _in_time_order(starts: list[Event], stops: list[Event]) -> int:
    """Completed start/stop pairs: each stop closes the earliest open start before it."""
    marks = sorted([(e.t, e.line, 0) for e in starts] + [(e.t, e.line, 1) for e in stops])
    open_count = pairs = 0
    for *_, is_stop in marks:
        if not is_stop:
            open_count += 1
        elif open_count:
            open_count, pairs = open_count - 1, pairs + 1
    return pairs


def _closed_block_epochs(events: list[Event]) -> int:
    """The sum of epoch_count over closed blocks: a block_stop closes the open block_starts of its
    first_epoch_num (PCL writes one per epoch of a block), else the earliest open one."""
    marks = sorted(_keyed(events, "block_start") + _keyed(events, "block_stop"), key=lambda e: (e.t, e.line))
    open_: list[Event] = []
    total = 0
    for mark in marks:
        if mark.key == "block_start":
            open_.append(mark)
            continue
        label = mark.meta.get("first_epoch_num")
        closing = [s for s in open_ if s.meta.get("first_epoch_num") == label] or open_[:1]
        for start in closing:
            open_.remove(start)
            total += int(start.meta.get("epoch_count") or 0)
    return total


def _v05_epochs(events: list[Event]) -> int | None:
    """max - min + 1 of the train_epoch markers and eval epoch labels between run_start and run_stop."""
    starts, stops = _keyed(events, "run_start"), _keyed(events, "run_stop")
    low = starts[0].t if starts else float("-inf")
    high = stops[-1].t if stops else float("inf")
    labels = [e.value for e in _keyed(events, "train_epoch") if low <= e.t <= high]
    labels += [e.value.get("epoch") for e in _keyed(events, "eval_accuracy") if low <= e.t <= high
               and isinstance(e.value, dict)]  # fmt: skip
    labels = [n for n in labels if isinstance(n, int) and not isinstance(n, bool)]
    return max(labels) - min(labels) + 1 if labels else None


def epochs(fmt: str, events: list[Event]) -> int | None:
    if fmt in ("mlp05", "bracket"):
        return _v05_epochs(events)
    pairs = _in_time_order(_keyed(events, "epoch_start"), _keyed(events, "epoch_stop"))
    return pairs or _closed_block_epochs(events) or None


def global_batch(fmt: str, events: list[Event], submitter: str, accelerators: int | None) -> int | None:
    if fmt not in ("mlp05", "bracket"):
        return _whole(_first_value(events, "global_batch_size")) or None
    logged = _whole(_first_value(events, "input_batch_size"))
    kind = V05_BATCH.get(submitter.lower()) if fmt == "mlp05" else None
    if not logged or kind is None:
        return None
    return logged if kind == "global" else (logged * accelerators if accelerators else None)


def train_samples(events: list[Event]) -> int | None:
    logged = _first_value(events, "train_samples", "num_train_examples", "preproc_num_train_examples")
    return _whole(logged) if logged is not None else IMAGENET_TRAIN


# ---- the system file (corpus README, "Files": three shapes, three malformed kinds) -----------------------------------
def _key_json_lines(text: str) -> dict:
    """v0.6 NVIDIA: `key: {"value": ...}` lines; `entry`'s value is a Python repr whose `nodes` is one again."""
    data: dict = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(": ")
        if sep and re.fullmatch(r"\w+", key):
            data[key] = json.loads(rest).get("value")
    entry = ast.literal_eval(data.get("entry") or "{}")
    if isinstance(entry.get("nodes"), str):
        entry["nodes"] = [ast.literal_eval(entry["nodes"])]
    return {**data, **entry}


def system_json(path: Path) -> dict:
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))  # v0.7 Alibaba: trailing commas
    except ValueError:
        return _key_json_lines(text)


def system_facts(path: Path) -> dict:
    """nodes, accelerators per node, accelerator model, framework text, division of one system file; v0.5 TPU
    entries count TensorCores for the whole slice (2 per chip)."""
    data = system_json(path)
    node = data["nodes"][0] if isinstance(data.get("nodes"), list) else None
    if node is not None:
        nodes, per_node, model = node.get("num_nodes"), node.get("num_accelerators"), node.get("accelerator")
    else:
        nodes = data.get("number_of_nodes", data.get("number of nodes"))
        per_node, model = data.get("accelerators_per_node"), data.get("accelerator_model_name")
    model = str(model or "").strip()
    facts = {
        "nodes": _whole(nodes),
        "per_node": _whole(per_node),
        "model": model,
        "tpu_cores": None,
        "framework": str(data.get("framework") or "").strip(),
        "division": str(data.get("division") or ""),
    }
    if node is not None and "tpu" in model.lower():
        facts["tpu_cores"], facts["per_node"] = facts["per_node"], None
    return facts


def accelerators(facts: dict, events: list[Event], round_: str, submitter: str) -> int | None:
    """Chips: nodes x per node; v0.5 TPU: cores / 2; v0.5 NVIDIA multi-node: the nodes that logged
    run_clear_caches x GPUs per node; a CPU-only system: 0."""
    if facts["model"].lower() in NO_ACCELERATOR or facts["per_node"] == 0:
        return 0
    if facts["tpu_cores"] is not None:
        return facts["tpu_cores"] // 2
    if facts["per_node"] is None or facts["nodes"] is None:
        return None
    return nodes_that_ran(facts, events, round_, submitter) * facts["per_node"]


def nodes_that_ran(facts: dict, events: list[Event], round_: str, submitter: str) -> int | None:
    """The system file's node count, except v0.5 NVIDIA multi-node, whose entry.json describes the cluster: there
    each node that ran logged run_clear_caches."""
    clear_caches = len(_keyed(events, "run_clear_caches"))
    if round_ == "v0.5" and submitter.lower() == "nvidia" and clear_caches > 1:
        return clear_caches
    return facts["nodes"]


def framework(stated: str) -> str:
    """The framework the system file names ('tf2.0', 'TF-research' -> tensorflow); where it names several (NVIDIA's
    containers list all their frameworks), MXNet, the framework of NVIDIA's ResNet code; none named: not stated."""
    words = re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])", stated.lower())
    named = list(dict.fromkeys(FRAMEWORK_NAMES[w] for w in words if w in FRAMEWORK_NAMES))
    if len(named) > 1 and "mxnet" in named:
        return "mxnet"
    return named[0] if named else NOT_STATED


# ---- the corpus: manifest.csv lists each log and its system file ----------------------------------------------
def manifest(folder: Path) -> list[tuple[dict, dict]]:
    """(log row, system row) of every log the mirror holds, in the manifest's order."""
    with open(folder / "manifest.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    systems = {(r["round"], r["submitter"], r["system"]): r for r in rows if r["file_kind"] == "system_json"}
    return [(r, systems[(r["round"], r["submitter"], r["system"])]) for r in rows
            if r["file_kind"] == "result_log" and r["path"]]  # fmt: skip


def distinct_logs(folder: Path) -> list[tuple[dict, dict, list[str]]]:
    """(log row, system row, paths of its byte-for-byte copies): the first path of each content."""
    first: dict[str, tuple[dict, dict, list[str]]] = {}
    for log, system in manifest(folder):
        digest = hashlib.sha256((folder / log["path"]).read_bytes()).hexdigest()
        if digest in first:
            first[digest][2].append(log["path"])
        else:
            first[digest] = (log, system, [])
    return list(first.values())


def _text(value: object) -> str:
    if value is None:
        return NOT_STATED
    return repr(value) if isinstance(value, float) else str(value)


def row(folder: Path, log: dict, system: dict, copies: list[str]) -> dict:
    fmt, events = log_events((folder / log["path"]).read_text(encoding="utf-8", errors="replace"))
    facts = system_facts(folder / system["path"])
    round_, submitter = log["round"], log["submitter"]
    count = accelerators(facts, events, round_, submitter)
    division = _first_value(events, "submission_division") or facts["division"]
    return {
        "log": log["path"],
        "round": round_,
        "submitter": submitter,
        "system": log["system"],
        "division": str(division).lower() if division else NOT_STATED,
        "accelerator_model": facts["model"] or NOT_STATED,
        "accelerators": _text(count),
        "nodes": _text(nodes_that_ran(facts, events, round_, submitter)),
        "framework_stated": facts["framework"] or NOT_STATED,
        "framework": framework(facts["framework"]),
        "global_batch_size": _text(global_batch(fmt, events, submitter, count)),
        "train_samples_per_epoch": _text(train_samples(events)),
        "epochs": _text(epochs(fmt, events)),
        "status": status(events),
        "time_to_train_s": _text(time_to_train(events)),
        "accuracy": _text(last_accuracy(events)),
        "copies": "; ".join(copies) or "none",
        "reviewed": "",
    }


def reviewed_notes(table: Path) -> dict[str, str]:
    """{log: its note} of the table being replaced (the decisions made reading the raw files by hand)."""
    if not table.is_file():
        return {}
    with open(table, newline="", encoding="utf-8") as handle:
        return {r["log"]: r["reviewed"] for r in csv.DictReader(handle) if r.get("reviewed")}


def default_mirror() -> Path:
    return Path(os.environ.get("SCALESTUDY_DATA_MIRROR") or REPO.parent / "shared" / "reference").expanduser()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, default=default_mirror(), help="the folder holding " + DATASET)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    folder = args.mirror / DATASET
    notes = reviewed_notes(args.out)
    rows = [{**row(folder, *entry), "reviewed": notes.get(entry[0]["path"], "")} for entry in distinct_logs(folder)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{args.out}: {len(rows)} runs")


if __name__ == "__main__":
    main()
