"""One MLPerf Training ResNet-50 result log's events (ingest/logs/mlperf_events.py) -> the numbers of one run.

The rules are those of experiments/reference/mlperf-training-resnet/README.md ("One run"); each
number keeps the log line it was read from, and each choice between readings is named in a `*_basis` field.

- time to train = last run_stop - first run_start (MLPerf's score for one run);
- status: run_stop's `metadata.status` (MLLOG, MLL; Graphcore's value `{"success": false}`), v0.5's run_stop value
  `{"success": true}`; where run_stop says nothing (v0.5 NVIDIA, v0.6 Alibaba) the last eval_accuracy against the
  target (eval_target, else 0.759 from v0.6 on); no run_stop at all: `no_run_stop` (a FAILED run, no time);
- epochs: completed epoch_start/epoch_stop pairs in time order; block-only logs: the sum of the closed blocks'
  epoch_count; v0.5 and v0.6 Alibaba: max - min + 1 of the train_epoch markers and eval epoch labels between
  run_start and run_stop;
- blocks: each block_stop closes the open block_starts of its first_epoch_num (else the earliest open one): one
  block from the earliest of them, whose epoch_count is the sum of theirs (v1.0 PCL writes a block_start per epoch
  with the block's first_epoch_num and epoch_count 1, and one block_stop per block: 42 and 56 epochs, as their last
  eval labels say);
- training time (train_time_basis): `blocks` where the closed blocks nest the epochs (or there are no epochs):
  sum of the blocks minus the evaluations inside them; `epochs` for other logs with epochs: sum of the epoch
  intervals; `train_loop` for v0.5 and v0.6 Alibaba: run_stop - train_loop minus the evaluations between.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .logs.mlperf_events import Event

TARGET_FROM_V06 = 0.759  # every successful v0.6+ run ends at >= 0.759 (the corpus README, "Caveats")
IMAGENET_TRAIN = 1281167
EARLY_STAMP_SHARE = 0.95  # epoch intervals covering less of the block time than this: epochs stamped early


@dataclass
class Reading:
    """The numbers of one log, each with the line it came from (`lines`), and how each was read (`basis`)."""

    values: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    basis: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)

    def put(self, name: str, value: object, line: int | None, basis: str | None = None) -> None:
        self.values[name] = value
        if line is not None:
            self.lines[name] = line
        if basis is not None:
            self.basis[name] = basis


def _by_key(events: list[Event]) -> dict[str, list[Event]]:
    keyed: dict[str, list[Event]] = {}
    for event in events:
        keyed.setdefault(event.key, []).append(event)
    return keyed


def _intervals(starts: list[Event], stops: list[Event]) -> list[tuple[Event, Event]]:
    """Start/stop events paired in time order (each stop closes the earliest open start before it)."""
    merged = sorted([(e.t or 0.0, e.line, 0, e) for e in starts] + [(e.t or 0.0, e.line, 1, e) for e in stops])
    open_: deque[Event] = deque()
    pairs = []
    for *_, kind, event in merged:
        if kind == 0:
            open_.append(event)
        elif open_:
            pairs.append((open_.popleft(), event))
    return pairs


def _epoch_count(start: Event) -> int:
    count = start.meta.get("epoch_count")
    return int(count) if isinstance(count, (int, float)) else 0


def _blocks(keyed: dict[str, list[Event]]) -> list[tuple[Event, Event, int]]:
    """Closed blocks (start, stop, epoch_count), paired by first_epoch_num (v0.6 TPU logs write the next
    block_start before the previous block_stop), else in time order (Intel SPR's stops all say 1). The open
    block_starts that share the stop's first_epoch_num are one block (PCL writes a block_start per epoch, each
    with the block's first_epoch_num and epoch_count 1, and one block_stop per block): from the earliest of them
    to the stop, its epoch_count the sum of theirs."""
    open_: list[Event] = []
    closed = []
    merged = sorted(
        [(e.t or 0.0, e.line, 0, e) for e in keyed.get("block_start", [])]
        + [(e.t or 0.0, e.line, 1, e) for e in keyed.get("block_stop", [])]
    )
    for *_, kind, event in merged:
        if kind == 0:
            open_.append(event)
            continue
        label = event.meta.get("first_epoch_num")
        group = [s for s in open_ if s.meta.get("first_epoch_num") == label]
        group = group or open_[:1]
        if not group:
            continue
        for start in group:
            open_.remove(start)
        closed.append((group[0], event, sum(_epoch_count(s) for s in group)))
    return closed


def _accuracy(event: Event) -> float | None:
    value = event.value.get("value") if isinstance(event.value, dict) else event.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 100 if value > 1 else float(value)  # a percentage (v0.6 Alibaba writes 75.98%)
    return None


def _eval_label(event: Event) -> int | None:
    if isinstance(event.value, dict) and isinstance(event.value.get("epoch"), int):
        return event.value["epoch"]
    label = event.meta.get("epoch_num")
    return int(label) if isinstance(label, (int, float)) else None


def read(fmt: str, events: list[Event]) -> Reading:
    """The numbers of one log (see the module's docstring); missing ones are absent from `values`."""
    keyed = _by_key(events)
    reading = Reading()
    first = {key: evs[0] for key, evs in keyed.items()}
    last = {key: evs[-1] for key, evs in keyed.items()}
    for key in ("submission_benchmark", "submission_division", "submission_org", "submission_platform"):
        if key in first:
            reading.put(key, first[key].value, first[key].line)
    if fmt in ("mlp05", "mlperf-bracket") and events:
        reading.put("submission_benchmark", events[0].meta.get("benchmark"), events[0].line)
    start, stop = first.get("run_start"), last.get("run_stop")
    if start is not None:
        reading.put("run_start", start.t, start.line)
    if "init_start" in keyed:
        reading.put("init_start_lines", len(keyed["init_start"]), keyed["init_start"][0].line)
        if start is not None and first["init_start"].t and first["init_start"].t < start.t:
            reading.put("time_init_s", start.t - first["init_start"].t, start.line)
    _status(reading, keyed, stop, last)
    if start is not None and stop is not None and stop.t and start.t:
        reading.put("run_time_s", stop.t - start.t, stop.line)
    _batch_and_samples(reading, fmt, first)
    _epochs_and_train_time(reading, fmt, keyed, start, stop)
    accuracies = [(e, _accuracy(e)) for e in keyed.get("eval_accuracy", [])]
    accuracies = [(e, a) for e, a in accuracies if a is not None]
    if accuracies:
        reading.put("accuracy", accuracies[-1][1], accuracies[-1][0].line)
    if "run_clear_caches" in keyed:
        reading.put("run_clear_caches_lines", len(keyed["run_clear_caches"]), keyed["run_clear_caches"][0].line)
    return reading


def _status(reading: Reading, keyed: dict, stop: Event | None, last: dict) -> None:
    if stop is None:
        reading.put("status", "no_run_stop", None, "no run_stop line: the log ends before the run did")
        return
    stated = str(stop.meta.get("status") or "").lower()
    value = stop.value
    if stated:
        reading.put("status", stated, stop.line, "run_stop metadata.status")
    elif isinstance(value, dict) and "success" in value:
        success = str(value["success"]).lower() == "true"
        reading.put("status", "success" if success else "aborted", stop.line, "run_stop value success")
    else:
        target_event = last.get("eval_target")
        target = float(target_event.value) if target_event and isinstance(target_event.value, (int, float)) else None
        accuracies = [(e, _accuracy(e)) for e in keyed.get("eval_accuracy", []) if _accuracy(e) is not None]
        if not accuracies:
            reading.put("status", "aborted", stop.line, "run_stop states nothing and no eval_accuracy was logged")
            return
        target = target if target is not None else TARGET_FROM_V06
        reached = accuracies[-1][1] >= target
        basis = f"run_stop states nothing: last eval_accuracy (line {accuracies[-1][0].line}) against target {target}"
        reading.put("status", "success" if reached else "aborted", stop.line, basis)
    if isinstance(value, dict) and value.get("success") is False and stated == "success":
        reading.put("status", "aborted", stop.line, "run_stop value success false")


def _batch_and_samples(reading: Reading, fmt: str, first: dict) -> None:
    if "global_batch_size" in first:
        e = first["global_batch_size"]
        reading.put("global_batch_logged", e.value, e.line, "global_batch_size")
    elif "input_batch_size" in first:
        e = first["input_batch_size"]
        reading.put("global_batch_logged", e.value, e.line, "input_batch_size (v0.5: its meaning depends on the code)")
    for key in ("train_samples", "num_train_examples", "preproc_num_train_examples"):
        if key in first:
            reading.put("train_samples", first[key].value, first[key].line, key)
            break
    else:
        reading.put("train_samples", IMAGENET_TRAIN, None, "not logged: ImageNet's 1281167 assumed")


def _epochs_and_train_time(reading: Reading, fmt: str, keyed: dict, start: Event | None, stop: Event | None) -> None:
    evals = _intervals(keyed.get("eval_start", []), keyed.get("eval_stop", []))
    if fmt in ("mlp05", "mlperf-bracket"):
        _train_loop_reading(reading, keyed, start, stop, evals)
        return
    epochs = _intervals(keyed.get("epoch_start", []), keyed.get("epoch_stop", []))
    blocks = _blocks(keyed)
    epoch_time = sum(b.t - a.t for a, b in epochs)
    if epochs:
        reading.put("epochs", len(epochs), epochs[-1][1].line, "completed epoch_start/epoch_stop pairs")
        reading.put("epoch_time_sum_s", epoch_time, epochs[-1][1].line)
    elif blocks:
        reading.put("epochs", sum(c for *_, c in blocks), blocks[-1][1].line, "sum of closed blocks' epoch_count")
    if blocks and all(c > 0 for *_, c in blocks) and (not epochs or _nested(blocks, epochs)):
        block_time = sum(b.t - a.t for a, b, _ in blocks)
        inside = [(a, b) for a, b in evals if any(s.t <= a.t and b.t <= t.t for s, t, _ in blocks)]
        eval_time = sum(b.t - a.t for a, b in inside)
        window = sum(c for *_, c in blocks)
        basis = "blocks: sum of closed blocks minus the evaluations inside them" + (
            "" if inside else " (no eval interval logged: evaluation stays in)"
        )
        reading.put("train_time_s", block_time - eval_time, blocks[-1][1].line, basis)
        reading.put("train_window_epochs", window, blocks[-1][1].line)
        if epochs and block_time - eval_time > 0 and epoch_time / (block_time - eval_time) < EARLY_STAMP_SHARE:
            share = epoch_time / (block_time - eval_time)
            reading.problems.append(
                f"epochs stamped early: the epoch intervals cover {share:.0%} of the training time in blocks"
            )
    elif epochs:
        reading.put("train_time_s", epoch_time, epochs[-1][1].line, "epochs: sum of epoch_start -> epoch_stop")
        reading.put("train_window_epochs", len(epochs), epochs[-1][1].line)


def _nested(blocks: list, epochs: list) -> bool:
    """Each closed block holds exactly its epoch_count completed epochs, and every completed epoch before the last
    closed block's stop lies in a closed block (block_stops that close nothing, as Intel SPR's after its first, do
    not count: its window is then its first block, epochs 1 to 3 of 35; the dataset's README)."""
    last_stop = max(b.t for _, b, _ in blocks)
    for a, b, count in blocks:
        if sum(1 for s, t in epochs if a.t <= s.t and t.t <= b.t) != count:
            return False
    return all(any(a.t <= s.t and t.t <= b.t for a, b, _ in blocks) for s, t in epochs if t.t <= last_stop)


def _train_loop_reading(reading: Reading, keyed: dict, start: Event | None, stop: Event | None, evals: list) -> None:
    lo = start.t if start else float("-inf")
    hi = stop.t if stop else float("inf")
    labels: list[tuple[int, int]] = []  # (label, line)
    for e in keyed.get("train_epoch", []):
        if lo <= (e.t or 0) <= hi and isinstance(e.value, int):
            labels.append((e.value, e.line))
    for e in keyed.get("eval_accuracy", []):
        label = _eval_label(e)
        if label is not None and lo <= (e.t or 0) <= hi:
            labels.append((label, e.line))
    if labels:
        top = max(labels)
        epochs = top[0] - min(labels)[0] + 1
        reading.put("epochs", epochs, top[1], "max - min + 1 of train_epoch markers and eval epoch labels")
        reading.put("train_window_epochs", epochs, top[1])
    loop = keyed.get("train_loop", [None])[0]
    if loop is not None and stop is not None:
        inside = [(a, b) for a, b in evals if loop.t <= a.t and b.t <= stop.t]
        train = (stop.t - loop.t) - sum(b.t - a.t for a, b in inside)
        reading.put("train_time_s", train, stop.line, "train_loop: run_stop - train_loop minus the evaluations")
