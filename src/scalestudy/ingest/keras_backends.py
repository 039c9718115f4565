"""keras-backends-2017: the profiling tables of Keras 1.2.2 (MXNet vs TensorFlow backend) -> one run per column.

profiling_results.md is read as a small state machine over its headings:
  `## <Model>`                            the model (canonical_model), resets everything below
  `### Setup` + `* \\`Key\\` - value` bullets dataset, machine, batch size, epochs of the model
  `### Keras 1.2.2 with MXNet backend`    protocol "plain", framework mxnet (its table follows directly)
  `### Reduce Randomization` + bullets    protocol "reduce-randomization"; `random seed`, `Epochs` override
  `#### MXNet Backend` / `#### Tensorflow Backend`   framework of the next table
Each table's header names the GPU counts (`GPU (1)`, `GPU(8)`); each row one metric (ROW_METRICS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..schema import RunRecord, SchemaError, canonical_model
from . import number, published_tags, read_source, read_text

FILE = "profiling_results.md"
ROW_METRICS = {
    "Training time (secs)": "time_total_s",
    "Average time per epoch (secs)": "time_per_epoch_s",
    "Images processed per sec": "throughput_total",
    "Training accuracy": "accuracy_train",
    "Test accuracy": "accuracy_test",
    "Maximum Memory Consumption": "memory_peak_mb",  # the source gives no unit: MB assumed (see README)
}
FRAMEWORKS = {"mxnet": "mxnet", "tensorflow": "tensorflow"}
INSTANCE_GPUS = {"p2": "K80"}  # AWS EC2 instance family -> its GPU
INSTANCE_GPU_COUNT = {"p2.xlarge": 1, "p2.8xlarge": 8, "p2.16xlarge": 16}  # GPUs per instance
API = "keras-1.2.2"

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
BULLET_RE = re.compile(r"^\*\s+`?([^`]+?)`?\s+-\s+(.*?)\s*$")
GPU_RE = re.compile(r"^GPU\s*\(\s*(\d+)\s*\)$")
PLAIN_RE = re.compile(r"^Keras\s+1\.2\.2\s+with\s+(\w+)\s+backend$", re.I)
BACKEND_RE = re.compile(r"^(\w+)\s+Backend$", re.I)
MACHINE_RE = re.compile(r"AWS\s+EC2\s+([A-Za-z]\d+)\.(\w+)", re.I)
SEPARATOR_RE = re.compile(r"^:?-+:?$")


def _cells(line: str) -> list[str]:
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|"):
        text = text[:-1]
    return [cell.strip() for cell in text.split("|")]


def _setup(key: str, value: str, where: str, into: dict[str, object], notes: dict[str, str]) -> None:
    """One `* \\`Key\\` - value` bullet of a Setup or Reduce Randomization section."""
    key = key.strip().lower()
    if key == "dataset":
        if "cifar10" not in value.lower().replace("-", ""):
            raise SchemaError(f"{where}: dataset {value!r} is not CIFAR10")
        resized = re.search(r"resized to (\d+)\s*x\s*(\d+)", value, re.I)
        if resized and resized[1] != resized[2]:
            raise SchemaError(f"{where}: dataset resized to a non-square {resized[1]}x{resized[2]}")
        into["data"] = f"cifar10-{resized[1]}" if resized else "cifar10"
    elif key == "machine":
        m = MACHINE_RE.search(value)
        if not m or m[1].lower() not in INSTANCE_GPUS:
            raise SchemaError(
                f"{where}: machine {value!r} is not an AWS EC2 instance of a known family ({', '.join(INSTANCE_GPUS)})"
            )
        into["platform"] = f"aws-{m[1].lower()}.{m[2].lower()}"
        into["device"] = INSTANCE_GPUS[m[1].lower()]
    elif key == "batchsize":
        m = re.match(r"^(\d+)\b(.*)$", value)
        if not m:
            raise SchemaError(f"{where}: batch size {value!r} is not a number")
        into["batch_per_worker"] = int(m[1])
        if "per gpu" not in m[2].lower():
            notes["batch_note"] = (
                f"the setup states 'Batchsize - {value}' without 'per GPU'; "
                "the per-GPU reading of the ResNet50 setup is assumed"
            )
    elif key == "epochs":
        into["epochs"] = number(value.rstrip("."), where, "Epochs", int)
    elif key == "random seed":
        into["seed"] = number(value.rstrip("."), where, "random seed", int)
    else:
        raise SchemaError(f"{where}: unknown setup item {key!r}")


@dataclass
class _Position:
    """Where the reader is in the file: which model, protocol and backend the next table belongs to, and what the
    setup bullets said so far."""

    model: str | None = None
    setup: dict[str, object] = field(default_factory=dict)  # from the model's ### Setup
    setup_notes: dict[str, str] = field(default_factory=dict)
    section: dict[str, object] = field(default_factory=dict)  # from the current ### protocol section (wins)
    protocol: str | None = None
    framework: str | None = None
    bullets_into: dict[str, object] | None = None

    def enter(self, level: int, title: str, where: str) -> None:
        """A heading: ## model, ### Setup or a protocol, #### a backend (# the document's title)."""
        self.bullets_into = None
        if level == 2:
            self.model = canonical_model(title, where)
            self.setup, self.setup_notes, self.section, self.protocol, self.framework = {}, {}, {}, None, None
        elif level == 3:
            self._protocol(title, where)
        elif level == 4:
            backend = BACKEND_RE.match(title)
            if not backend or self.protocol is None:
                raise SchemaError(
                    f"{where}: unknown heading {title!r} (expected '#### <MXNet|Tensorflow> Backend' "
                    "under a protocol section)"
                )
            self.framework = _framework(backend[1], where)

    def _protocol(self, title: str, where: str) -> None:
        if self.model is None:
            raise SchemaError(f"{where}: section {title!r} comes before any '## <model>' heading")
        self.framework = None
        plain = PLAIN_RE.match(title)
        if title.lower() == "setup":
            self.bullets_into = self.setup
            self.protocol = None
        elif plain:
            self.protocol, self.section = "plain", {}
            self.framework = _framework(plain[1], where)
        elif title.lower() == "reduce randomization":
            self.protocol, self.section = "reduce-randomization", {}
            self.bullets_into = self.section
        else:
            raise SchemaError(f"{where}: unknown section {title!r}")


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    path = folder / FILE
    lines = read_text(path).splitlines()

    records: list[RunRecord] = []
    at = _Position()
    seen: dict[str, str] = {}  # run key -> where its table starts

    i = 0
    while i < len(lines):
        line, where = lines[i], f"{path}:{i + 1}"
        heading = HEADING_RE.match(line)
        bullet = BULLET_RE.match(line)
        if heading:
            at.enter(len(heading[1]), heading[2], where)
        elif bullet and at.bullets_into is not None:
            _setup(bullet[1], bullet[2], where, at.bullets_into, at.setup_notes)
        elif line.lstrip().startswith("|"):
            start = i
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                i += 1
            settings = {**at.setup, **at.section}
            for rec in _table(
                lines[start:i], start + 1, path, source, at.model, at.protocol, at.framework, settings, at.setup_notes
            ):
                if rec.key in seen:
                    raise SchemaError(f"{rec.where}: a second table for {rec.key!r} (the first: {seen[rec.key]})")
                seen[rec.key] = rec.where
                records.append(rec)
            at.framework = None  # every table sits under its own backend heading
            at.bullets_into = None
            continue
        i += 1
    if not records:
        raise SchemaError(f"{path}:1: no profiling table found")
    return records


def _framework(name: str, where: str) -> str:
    key = name.lower()
    if key not in FRAMEWORKS:
        raise SchemaError(f"{where}: unknown Keras backend {name!r} (known: {', '.join(FRAMEWORKS)})")
    return FRAMEWORKS[key]


def _header_workers(row: str, where: str) -> list[int]:
    """The GPU counts of a table's header row ('| | GPU (1) | GPU (2) |...')."""
    header = _cells(row)
    if header[0]:
        raise SchemaError(f"{where}: the header's first cell should be empty, not {header[0]!r}")
    workers = []
    for cell in header[1:]:
        m = GPU_RE.match(cell)
        if not m:
            raise SchemaError(f"{where}: header cell {cell!r} is not 'GPU (N)'")
        workers.append(int(m[1]))
    if len(set(workers)) != len(workers):
        raise SchemaError(f"{where}: header repeats a GPU count: {workers}")
    return workers


def _body_metrics(body: list[str], workers: list[int], path: Path, first_line: int) -> list[dict[str, float]]:
    """Per GPU count, the metrics of the rows below the header (the first of them the '|---|' row)."""
    width = len(workers) + 1
    if not (body and all(SEPARATOR_RE.match(c) for c in _cells(body[0]))):
        raise SchemaError(f"{path}:{first_line + 1}: the table header is not followed by a '|---|' row")
    if len(_cells(body[0])) != width:
        raise SchemaError(
            f"{path}:{first_line + 1}: {len(_cells(body[0]))} cells in the separator row, expected {width}"
        )
    metrics: list[dict[str, float]] = [{} for _ in workers]
    for offset, row in enumerate(body[1:]):
        row_where = f"{path}:{first_line + 2 + offset}"
        cells = _cells(row)
        if len(cells) != width:
            raise SchemaError(f"{row_where}: {len(cells)} cells, expected {width} (label + {len(workers)} GPU counts)")
        label = cells[0]
        if label not in ROW_METRICS:
            raise SchemaError(f"{row_where}: unknown row {label!r} (known: {', '.join(ROW_METRICS)})")
        name = ROW_METRICS[label]
        for n, column, cell in zip(workers, metrics, cells[1:]):
            if name in column:
                raise SchemaError(f"{row_where}: row {label!r} repeats")
            value = number(cell, row_where, f"{label} / GPU ({n})")
            if name.startswith("accuracy_") and value > 1:
                raise SchemaError(f"{row_where}: {label} {value} is not a fraction in 0..1")
            column[name] = value
    return metrics


def _table(
    rows: list[str],
    first_line: int,
    path: Path,
    source: dict[str, str],
    model: str | None,
    protocol: str | None,
    framework: str | None,
    settings: dict[str, object],
    notes: dict[str, str],
) -> list[RunRecord]:
    where = f"{path}:{first_line}"
    if model is None or protocol is None or framework is None:
        raise SchemaError(
            f"{where}: table under no known model / backend heading "
            "(expected '### Keras 1.2.2 with MXNet backend' or '#### <MXNet|Tensorflow> Backend')"
        )
    for name in ("data", "platform", "device", "batch_per_worker", "epochs"):
        if name not in settings:
            raise SchemaError(f"{where}: the setup of {model} does not state {name}")
    workers = _header_workers(rows[0], where)
    metrics = _body_metrics(rows[1:], workers, path, first_line)
    source_line = f"{path}:{first_line}"
    records = []
    for n, values in zip(workers, metrics):
        params: dict[str, object] = {
            "model": model,
            "framework": framework,
            "api": API,
            "workers": n,
            "device": settings["device"],
            "data": settings["data"],
            "batch_per_worker": settings["batch_per_worker"],
            "platform": settings["platform"],
            "epochs": settings["epochs"],
            "protocol": protocol,
        }
        if "seed" in settings:
            params["seed"] = settings["seed"]
        tags = published_tags(source, source_line)
        tags.update(notes)
        instance = str(settings["platform"]).removeprefix("aws-")
        if n > INSTANCE_GPU_COUNT.get(instance, n):
            # Inception_v3's setup names a P2.8xlarge, yet its Reduce Randomization tables have a 16-GPU column.
            tags["platform_note"] = (
                f"{n} GPUs, but the setup names a {instance} "
                f"({INSTANCE_GPU_COUNT[instance]} GPUs); "
                "the platform is imported as the setup names it"
            )
        records.append(
            RunRecord(
                experiment=source["experiment"],
                key=f"{model}/{protocol}/{framework}/{n}",
                params=params,
                metrics=dict(values),
                tags=tags,
                where=where,
            )
        )
    return records
