"""experiments/reference/mlperf-training-resnet: MLPerf Training ResNet-50 result logs, v0.5-v4.0 -> one run per
distinct log.

source.yaml lists every raw file (log or system description) with its URL at the round's pinned commit and its
SHA-256 (fetched into the cache, or read from the mirror: ingest/fetch.py), which system file describes each log
(`results`), and the logs the mirror lacks (`absent_logs`, each with its git blob id). A log republished byte for
byte (the same SHA-256) in a later round or folder is one run, keyed by its first path; the copies are listed in
the tag `copies`. The log is read by ingest/logs/mlperf_events.py (four formats) and ingest/mlperf_reading.py
(the numbers), its system file by ingest/logs/mlperf_system.py's read_system_any_shape (three shapes); the
dataset's README says what each number is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..schema import NOT_STATED, RunRecord, SchemaError
from . import fetched_raw_files, published_tags, read_source, read_text
from .fetch import cache_dir, mirror_dir
from .logs import device_name
from .logs.mlperf_events import events
from .logs.mlperf_system import read_system_any_shape as read_system
from .mlperf_reading import read as read_numbers

FRAMEWORKS = ("mxnet", "pytorch", "tensorflow", "jax", "paddle", "mindspore", "caffe", "popart", "tinygrad")
# v0.5 `input_batch_size` per submitter: Google's code logs the global batch, NVIDIA's the per-GPU batch
# (global = x GPUs), Intel's the per-worker batch with the worker count not logged (the corpus README, "Facts a
# parser needs").
READINGS_CACHE = ".readings.json"  # in the dataset's cache folder, beside the raw files (not one of them)
BASIS_TAGS = {"train_time_s": "train_time", "global_batch_logged": "batch_logged"}  # reading's name -> tag's
V05_BATCH = {"google": "global", "nvidia": "per accelerator"}
TF_WORD = re.compile(r"(?<![a-z])tf(?![a-z])")  # 'tf2.0', 'TF-research', 'research-tf'; not 'platform'


def git_blob_sha1(data: bytes) -> str:
    """Git's id of a file's content: sha1 of 'blob <size>\\0' + content (how the absent logs are named)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def absent_logs(dataset: str, listed: list[dict]) -> tuple[list[tuple[dict, Path]], list[dict]]:
    """(found, missing) of the logs the mirror lacks: a copy in the cache or the mirror whose git blob id matches
    is found (put there by hand from its URL); a copy that does not match fails naming it."""
    found, missing = [], []
    places = [cache_dir() / dataset] + ([mirror_dir() / dataset] if mirror_dir() else [])
    for entry in listed:
        copy = next((p / entry["log"] for p in places if (p / entry["log"]).is_file()), None)
        if copy is None:
            missing.append(entry)
            continue
        got = git_blob_sha1(copy.read_bytes())
        if got != entry["git_blob_sha1"]:
            raise SchemaError(f"{copy}: git blob id {got[:12]}... is not the {entry['git_blob_sha1'][:12]}... "
                              f"source.yaml lists: replace it with {entry['url']}")  # fmt: skip
        found.append((entry, copy))
    return found, missing


def _parse_one(log: str) -> tuple[str, dict]:
    """(format, reading) of one log file, in a worker process: only plain data crosses back."""
    path = Path(log)
    fmt, found = events(path, read_text(path))
    reading = read_numbers(fmt, found)
    return fmt, {"values": reading.values, "lines": reading.lines, "basis": reading.basis, "problems": reading.problems}


def _framework(stated: str) -> str:
    """The framework a system file's text names (the first of FRAMEWORKS: NVIDIA's containers list all of theirs,
    and their ResNet code is MXNet's; 'MxNeti' is v4.0 Quanta's spelling), 'tf' for TensorFlow ('tf2.0',
    'TF-research'); a text that names none ('CUDA 12.0', 'NGC MLPerf v4.0', Alibaba's 'SinianAI - ...'): not stated
    (it was its first word: 'cuda', 'ngc'), the text itself kept in the tag `framework_stated`."""
    low = stated.lower()
    named = next((f for f in FRAMEWORKS if f in low), None)
    return named or ("tensorflow" if TF_WORD.search(low) else NOT_STATED)


def _count(value: object) -> int | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 1 else None


def _accelerators(entry: dict, values: dict, lines: dict, system: dict) -> tuple[int | None, str, int]:
    """(accelerators, how they were counted, nodes): the system file's, or for NVIDIA's v0.5 multi-node runs the
    nodes that logged run_clear_caches (its line noted in `lines`) and their GPUs."""
    accelerators, accelerators_basis, nodes = system["accelerators"], system["accelerators_basis"], system["nodes"]
    nvidia_v05 = entry["round"] == "v0.5" and entry["submitter"].lower() == "nvidia"
    if nvidia_v05 and values.get("run_clear_caches_lines", 0) > 1:
        # entry.json's node count describes the cluster (128, 36); the nodes that ran each logged run_clear_caches
        nodes = values["run_clear_caches_lines"]
        accelerators = nodes * system["accelerators_per_node"]
        accelerators_basis = "run_clear_caches lines (nodes that ran) x GPUs per node"
        lines["accelerators"] = lines["run_clear_caches_lines"]
    return accelerators, accelerators_basis, nodes


def _global_batch(entry: dict, values: dict, basis: dict, accelerators: int | None) -> int | None:
    """The global batch: the logged one where it is global_batch_size; v0.5's input_batch_size read per submitter
    (how, in `basis`)."""
    batch_logged = _count(values.get("global_batch_logged"))
    stated = "global_batch_size" in basis.get("global_batch_logged", "")
    global_batch = batch_logged if batch_logged and stated else None
    if entry["round"] == "v0.5" and batch_logged:
        kind = V05_BATCH.get(entry["submitter"].lower())
        if kind == "global":
            global_batch = batch_logged
        elif kind == "per accelerator" and accelerators:
            global_batch = batch_logged * accelerators
        basis["global_batch"] = f"v0.5 input_batch_size read as the {kind} batch" if kind else "not stated"
    return global_batch


def _metrics(values: dict, lines: dict, samples: int | None, accelerators: int | None) -> tuple[dict, dict]:
    """(metrics, the log line of each): times, throughputs over the run, the timed window and the epochs, accuracy."""
    metrics: dict[str, float] = {}
    lines_used: dict[str, int] = {}

    def metric(name: str, value: float | None, line_of: str) -> None:
        if value is not None and value > 0:
            metrics[name] = value
            if line_of in lines:
                lines_used[name] = lines[line_of]

    epochs = values.get("epochs")
    run_s, train_s = values.get("run_time_s"), values.get("train_time_s")
    window = values.get("train_window_epochs")
    metric("time_total_s", run_s, "run_time_s")
    metric("time_train_s", train_s, "train_time_s")
    metric("time_init_s", values.get("time_init_s"), "time_init_s")
    if samples and epochs and run_s:
        metric("throughput_run", epochs * samples / run_s, "run_time_s")
    if samples and window and train_s and train_s > 0:
        metric("throughput_total", window * samples / train_s, "train_time_s")
        if accelerators:
            metric("throughput_per_worker", window * samples / train_s / accelerators, "train_time_s")
    if samples and epochs and values.get("epoch_time_sum_s"):
        metric("throughput_epochs", epochs * samples / values["epoch_time_sum_s"], "epoch_time_sum_s")
    if values.get("accuracy") is not None and 0 <= values["accuracy"] <= 1:
        metrics["accuracy_test"] = values["accuracy"]
        lines_used["accuracy_test"] = lines["accuracy"]
    for name in ("epochs", "global_batch_logged", "train_samples", "status", "init_start_lines"):
        if name in lines:
            lines_used[name] = lines[name]
    return metrics, lines_used


def _batch_per_accelerator(global_batch: int | None, accelerators: int | None, basis: dict) -> int | None:
    """The global batch over the accelerators where it divides (how, in `basis`)."""
    per_accelerator = None
    if global_batch and accelerators:
        per_accelerator = global_batch // accelerators if global_batch % accelerators == 0 else None
        basis["batch_per_worker"] = "global batch / accelerators" if per_accelerator else "does not divide: not stated"
    return per_accelerator


def record(source: dict, entry: dict, log: Path, system_path: Path, fmt: str, reading: dict, copies: list[str],
           sha256: str) -> RunRecord:  # fmt: skip
    """One run from a log's reading and its system file (see the dataset's README for each number)."""
    values, lines, basis = reading["values"], reading["lines"], dict(reading["basis"])
    where = f"{log}:{lines.get('run_start', 1)}"
    system, warnings = read_system(system_path)
    round_, submitter = entry["round"], entry["submitter"]
    benchmark = str(values.get("submission_benchmark") or "").lower()
    if benchmark not in ("resnet", "resnet50"):
        raise SchemaError(f"{log}:{lines.get('submission_benchmark', 1)}: benchmark {benchmark!r}, not resnet")
    accelerators, accelerators_basis, nodes = _accelerators(entry, values, lines, system)
    global_batch = _global_batch(entry, values, basis, accelerators)
    samples = _count(values.get("train_samples"))
    epochs = values.get("epochs")
    tags = published_tags(source, where)  # the run's source line is its run_start (the reading keys no run_stop)
    metrics, lines_used = _metrics(values, lines, samples, accelerators)
    run_s = values.get("run_time_s")
    status = values.get("status")
    failed = status != "success"
    if failed:
        at = f"{log.name}:{lines['status']}" if "status" in lines else f"{log.name} (end of file)"
        tags["failure_reason"] = f"{status}: the run did not reach the quality target ({at}; {basis.get('status')})"
    per_accelerator = _batch_per_accelerator(global_batch, accelerators, basis)
    accelerator_model = system["accelerator_model"]
    tags.update(
        {
            "round": round_,
            "submitter": submitter,
            "system": entry["system"],
            "division": str(values.get("submission_division") or system["division"] or NOT_STATED).lower(),
            "accelerator_model": accelerator_model or NOT_STATED,
            "accelerators": str(accelerators) if accelerators else ("0" if "cpu" in accelerators_basis else ""),
            "accelerators_basis": accelerators_basis,
            "nodes": str(nodes),
            "framework_stated": system["framework"] or NOT_STATED,
            "interconnect": system["interconnect"] or NOT_STATED,
            "global_batch_size": str(global_batch) if global_batch else NOT_STATED,
            "batch_logged": str(values.get("global_batch_logged")),
            "train_samples_per_epoch": str(samples) if samples else NOT_STATED,
            "run_stop_status": str(status),
            "log_format": fmt,
            "log_sha256": sha256,
            "copies": "; ".join(copies) if copies else "none",
            "system_file": entry["system_file"],
            "system_shape": system["shape"],
            "problems": "; ".join(reading["problems"] + warnings) or "none",
            "source_lines": "; ".join(f"{k}: {log.name}:{n}" for k, n in sorted(lines_used.items())),
            **{f"{BASIS_TAGS.get(k, k)}_basis": v for k, v in sorted(basis.items())},
        }
    )
    if "init_start_lines" in values:
        tags["init_start_lines"] = str(values["init_start_lines"])
    params = {
        "model": "resnet50",
        "framework": _framework(system["framework"]),
        "workers": accelerators or NOT_STATED,
        "device": device_name(accelerator_model) if accelerator_model and accelerators else "cpu",
        "data": "real",
        "batch_per_worker": per_accelerator or NOT_STATED,
        "platform": entry["system"],
        "api": "mlperf",
        "epochs": epochs if isinstance(epochs, int) and epochs >= 1 else NOT_STATED,
    }
    start = values.get("run_start")
    return RunRecord(
        experiment=source["experiment"],
        key=entry["log"],
        params=params,
        metrics=metrics,
        tags=tags,
        status="FAILED" if failed else "FINISHED",
        start_ms=round(start * 1000) if start else None,
        end_ms=round((start + run_s) * 1000) if start and run_s else None,
        where=where,
    )


def read(folder: Path, *, progress: bool = True) -> list[RunRecord]:
    source = read_source(folder)
    files, source = fetched_raw_files(folder, source)
    sha = {raw["path"]: raw["sha256"] for raw in source["raw_files"]}
    found, missing = absent_logs(folder.name, source.get("absent_logs") or [])
    if missing:
        names = ", ".join(f"{m['round']} {m['submitter']} {m['system']}" for m in missing)
        print(f"mlperf-training-resnet: {len(missing)} logs absent (not in the mirror; scripts/fetch_absent_mlperf_"
              f"logs.py fetches them into {cache_dir() / folder.name}): {names}", file=sys.stderr)  # fmt: skip
    entries = [(e, files[e["log"]], sha[e["log"]]) for e in source["results"]]
    for entry, copy in found:
        entries.append((entry, copy, hashlib.sha256(copy.read_bytes()).hexdigest()))
    first: dict[str, tuple[dict, Path]] = {}
    copies: dict[str, list[str]] = {}
    for entry, path, digest in entries:  # the first path of a content is its run; later paths are its copies
        if digest in first:
            copies[digest].append(entry["log"])
        else:
            first[digest], copies[digest] = (entry, path), []
    cache = cache_dir() / folder.name / READINGS_CACHE
    readings = _parse_all({d: path for d, (_, path) in first.items()}, progress, cache)
    return [
        record(source, entry, path, files.get(entry["system_file"]) or Path(), *readings[d], copies[d], d)
        for d, (entry, path) in first.items()
    ]


def _code_digest() -> str:
    """What a reading depends on besides the log: the code of the two modules that read it."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for module in (here / "logs" / "mlperf_events.py", here / "mlperf_reading.py"):
        digest.update(module.read_bytes())
    return digest.hexdigest()


def _parse_all(logs: dict[str, Path], progress: bool, cache: Path | None) -> dict[str, tuple[str, dict]]:
    """{log's SHA-256: (format, reading)} of every log, parsed on every core the process may use (the logs are
    independent), with a progress bar. A reading is a pure function of the log's bytes and the reading code, so
    the readings of the last import are kept in `cache` (keyed by both) and a re-import parses only what changed."""
    from tqdm import tqdm

    code = _code_digest()
    kept: dict = {}
    if cache is not None and cache.is_file():
        try:
            stored = json.loads(cache.read_text(encoding="utf-8"))
            kept = stored["readings"] if stored.get("code") == code else {}
        except (ValueError, KeyError, OSError):
            kept = {}  # a cache that cannot be read is rebuilt
    out = {digest: tuple(kept[digest]) for digest in logs if digest in kept}
    todo = [digest for digest in logs if digest not in out]
    workers = max(1, min(len(os.sched_getaffinity(0)), 8, len(todo)))
    # a terminal only: elsewhere tqdm prints a line at start and one at the end, two bars for one step
    bar = tqdm(total=len(logs), initial=len(out), desc="mlperf-training-resnet logs", unit="log",
               disable=not (progress and sys.stderr.isatty()), file=sys.stderr, leave=False)  # fmt: skip
    if todo:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for digest, result in zip(todo, pool.map(_parse_one, [str(logs[d]) for d in todo], chunksize=4)):
                out[digest] = result
                bar.update()
    bar.close()
    if todo and cache is not None:
        _write_json(cache, {"code": code, "readings": out})
    return out  # type: ignore[return-value]


def _write_json(path: Path, data: dict) -> None:
    """Write then rename (never a half-written cache); a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
    except OSError:
        return
