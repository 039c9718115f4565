"""The run schema shared by every source of runs (published imports and measured runs).

One MLflow run = one training configuration at one worker count. Every run carries the
params in REQUIRED_PARAMS, the tag `source` (published | measured), and, for published runs,
a `citation` tag. Metrics are optional by name (a source logs what it knows, never zeros for
what it does not), but their names and units are fixed here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

REQUIRED_PARAMS = (
    "model",  # canonical model name, see MODELS
    "framework",  # tensorflow | mxnet (the backend that ran the graph)
    "workers",  # number of GPUs or ranks
    "device",  # P100, K80, V100, cpu, ...
    "data",  # synthetic | real | cifar10 | cifar10-299 ...
    "batch_per_worker",  # images per worker per step (weak scaling: global batch = workers x this)
    "platform",  # machine or cluster the run was made on
)
# Optional params, where a source states them: api, variable_update, epochs, seed, protocol
# (keras: plain | reduce-randomization), steps (training steps of the job, all ranks together: the job
# processed steps x batch_per_worker images).
OPTIONAL_PARAMS = ("api", "variable_update", "epochs", "seed", "protocol", "steps")
PARAMS = REQUIRED_PARAMS + OPTIONAL_PARAMS  # what a ratio holds equal on both sides (derive.like_for_like)
NUMERIC_PARAMS = ("workers", "batch_per_worker", "epochs", "seed", "steps", "warmup_steps")

# Metrics (all optional; units in the names).
METRICS = {
    "throughput_total": "images/s summed over all workers",
    "throughput_per_worker": "images/s of one worker (mean over workers)",
    "throughput_run": "images/s over the whole timed run, evaluation included (MLPerf: epochs x train_samples / "
    "(run_stop - run_start)); throughput_total then counts training epochs only",
    "time_total_s": "wall time of the training call, s",
    "time_init_s": "start of the job to the first training step, s",
    "time_work_s": "time_total_s minus time_init_s, s",
    "time_first_interval_s": "the logging hook's seconds for steps 0 to 10 (HackSA; the ranks' mean), s",
    "time_steady_interval_s": "median over later ten-step intervals of the logging hook's seconds (HackSA), s",
    "time_per_epoch_s": "mean wall time of one epoch, s",
    "time_train_s": "training time of a whole job as its log's train_time_basis tag says it was read, s (MLPerf)",
    "throughput_epochs": "images/s over the sum of the logged epoch intervals only (MLPerf; early stamps inflate it)",
    "accuracy_train": "training accuracy at the end, 0..1",
    "accuracy_test": "test accuracy at the end, 0..1",
    "memory_peak_mb": "peak device memory as published or measured, MB",
    "efficiency_published": "scaling efficiency stated by the source, 0..1",
    # What the harness measures beyond the published numbers (timing.py says how).
    "throughput_mean": "mean over measured steps of the per-step total images/s",
    "throughput_median": "median over measured steps of the per-step total images/s",
    "throughput_stderr": "standard error of throughput_mean, images/s",
    "throughput_ci95_low": "lower end of the 95 % interval of throughput_mean (Student's t), images/s",
    "throughput_ci95_high": "upper end of the 95 % interval of throughput_mean (Student's t), images/s",
    "measured_steps": "number of steps after warm-up that the throughput numbers use",
    "warmup_steps_configured": "steps excluded as warm-up, as configured",
    "warmup_detected_step": "first step after the warm-up MSER-5 finds on the per-step series (0: none to cut)",
    "time_launch_s": "start of the job to the last rank's program start, s (launcher overhead, part of time_init_s)",
    # Where a step's time goes, from a Horovod timeline (profile=timeline; scalestudy.profile.timeline says how).
    # Means over the measured steps; the k-th allreduce of each gradient tensor belongs to step k.
    "step_time_ms": "mean time of a measured step, ms (the harness's clock; a timeline alone: median step gap)",
    "step_compute_ms": "step_time_ms minus the communication that did not overlap computation, ms",
    "step_comm_ms": "time per step in which an allreduce was in flight (union of ALLREDUCE spans), ms",
    "step_comm_exposed_ms": "allreduce time per step after the last gradient was ready on every rank, ms",
    "step_comm_share": "step_comm_ms / step_time_ms, 0..1",
    "step_comm_overlap_share": "share of step_comm_ms that overlapped computation (1 - exposed / comm), 0..1",
    "step_negotiate_ms": "time per step in which Horovod waited for ranks to be ready (union of negotiations), ms",
    "step_fusion_copy_ms": "time per step copying into and out of the fusion buffer (union), ms",
    "step_allreduces": "fused allreduces (collectives on the backend) per step",
    "step_allreduce_mb": "gradient bytes allreduced per step, MB (1e6 bytes)",
    "timeline_steps": "training steps averaged over from the Horovod timeline",
    # A GPU profile (Nsight Systems or nvprof export): python -m scalestudy.profile summarize FILE --run RUN_ID.
    "profile_kernels": "kernels in the profile (or its window)",
    "profile_kernel_ms": "sum of kernel durations over kernels and devices, ms",
    "profile_span_ms": "first kernel start to last kernel end, ms",
    "profile_compute_ms": "sum of durations of the kernels that are not NCCL, ms",
    "profile_nccl_ms": "sum of durations of the NCCL kernels, ms",
    "profile_nccl_share": "profile_nccl_ms / profile_kernel_ms, 0..1",
    "profile_memcpy_h2d_ms": "host-to-device copies, ms",
    "profile_memcpy_d2h_ms": "device-to-host copies, ms",
    "profile_memcpy_d2d_ms": "device-to-device copies, ms",
    "profile_memcpy_p2p_ms": "peer-to-peer copies between devices, ms",
    "profile_idle_ms": "time devices ran nothing between their first and last activity, summed over devices, ms",
}
# The range each metric must lie in: a measured quantity is finite, and a throughput, time or memory is positive
# (a source that does not give a number logs nothing; a zero would be drawn as data). (low, low allowed, high).
POSITIVE = (0.0, False, math.inf)
BOUNDS: dict[str, tuple[float, bool, float]] = {name: POSITIVE for name in METRICS}
BOUNDS.update(
    {
        "accuracy_train": (0.0, True, 1.0),
        "accuracy_test": (0.0, True, 1.0),
        "efficiency_published": (0.0, False, 1.0),
        "throughput_stderr": (0.0, True, math.inf),
        "throughput_ci95_low": (-math.inf, True, math.inf),  # mean - t x stderr: below 0 for a very noisy series
        "warmup_steps_configured": (0.0, True, math.inf),
        "warmup_detected_step": (0.0, True, math.inf),
    }
)
# A profile's or timeline's parts may be zero (one rank communicates nothing; a profile without NCCL).
BOUNDS.update({name: (0.0, True, math.inf) for name in METRICS if name.startswith(("step_", "profile_"))})
BOUNDS.update({name: (0.0, True, 1.0) for name in METRICS if name.endswith("_share")})
# Params that count something: whole numbers, at least 1 (0 for warm-up steps), or NOT_STATED where a published
# claim does not give the number (a claim is kept as stated, not filled in).
COUNT_PARAMS = {"workers": 1, "batch_per_worker": 1, "epochs": 1, "steps": 1, "warmup_steps": 0}
NOT_STATED = "not stated"

# Per-step series, logged as MLflow metric histories (step = global step, timestamp = wall clock).
SERIES = {"step_throughput_total": "instantaneous images/s summed over workers at that step"}

SOURCES = ("published", "measured", "yours")  # yours: logs a user imported (ingest logs)
# The tag MLflow's UI shows as the description of a run or an experiment (Markdown): where a published run was
# read from (file:line), which job a measured run was; an experiment's source, citation and users.
DESCRIPTION_TAG = "mlflow.note.content"

# Canonical model names, with the spellings the sources use.
MODELS = {
    "alexnet": "AlexNet",
    "googlenet": "GoogLeNet",
    "vgg16": "VGG-16",
    "vgg19": "VGG-19",
    "inception3": "Inception-v3",
    "inception4": "Inception-v4",
    "resnet50": "ResNet-50",
    "resnet101": "ResNet-101",
    "resnet101_v2": "ResNet-v2-101",
    "resnet152": "ResNet-152",
    "trivial": "trivial model (tf_cnn_benchmarks)",
}
MODEL_ALIASES = {
    "resnet_v2_101": "resnet101_v2",
    "inception_v4": "inception4",
    "inception_v3": "inception3",
    "vgg_19": "vgg19",
    "vgg_16": "vgg16",
}


# A GPU's name as the study writes devices (the one table: the log importers, MLPerf's system files and the harness
# all name a GPU through canonical_device): vendor words and parenthesised notes dropped; a one-word model keeps the
# part before its first '-' ('V100-SXM2-16GB' -> 'V100'); a model code followed only by memory, form-factor or
# memory-type words keeps the code ('H100 80GB HBM3' -> 'H100', 'A100 80GB PCIe' -> 'A100'); other names keep
# their words ('GeForce RTX 3090' -> 'RTX 3090', 'GeForce GTX 1080 Ti' -> 'GTX 1080 Ti', 'Tesla M60' -> 'M60').
VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro", "amd", "radeon", "instinct")
MODEL_CODE_RE = re.compile(r"^[A-Z]{1,2}\d{2,4}[A-Z]?$")  # V100, A100, H100, GH200, L40S, MI250X
VARIANT_WORD_RE = re.compile(r"^(?:\d+GB|PCIe|PCIE|SXM\d*|HBM\d*e?|NVL|NVLink)$", re.IGNORECASE)


class SchemaError(ValueError):
    """A record that does not fit the run schema; the message names where it came from."""


def canonical_model(name: str, where: str) -> str:
    """Map a source's spelling of a model to its canonical name, or fail naming `where`."""
    key = name.strip().lower().replace("-", "_")
    key = MODEL_ALIASES.get(key, key)
    if key not in MODELS:
        raise SchemaError(f"{where}: unknown model name {name!r} (known: {', '.join(sorted(MODELS))})")
    return key


def canonical_device(name: str) -> str:
    """A GPU's name as the study writes devices (the table above): 'Tesla V100-SXM2-16GB' -> 'V100', 'NVIDIA
    A100-SXM4-80GB (400W)' -> 'A100', 'NVIDIA H100 80GB HBM3' -> 'H100', 'NVIDIA GeForce RTX 3090' -> 'RTX 3090',
    'GeForce GTX 1070' -> 'GTX 1070', 'Tesla M60' -> 'M60'."""
    words = [w for w in re.sub(r"\(.*?\)", " ", name).split() if w.lower() not in VENDOR_WORDS]
    if not words:
        return name.strip()
    if len(words) == 1:
        return words[0].split("-")[0]  # V100-SXM2-16GB -> V100
    if MODEL_CODE_RE.match(words[0]) and all(VARIANT_WORD_RE.match(w) for w in words[1:]):
        return words[0]  # H100 80GB HBM3 -> H100
    head, *parts = words[0].split("-")
    if parts and MODEL_CODE_RE.match(head) and all(VARIANT_WORD_RE.match(p) for p in parts):
        return head  # MLPerf's 'NVIDIA A100-SXM-80GB CTS' -> A100 (a submission's note after the model)
    return " ".join(words)


@dataclass
class RunRecord:
    """One run as an importer or the harness describes it, before it is written to MLflow."""

    experiment: str
    key: str  # stable identity inside the experiment (idempotent imports)
    params: dict[str, object]
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    # name -> list of (step, unix time in ms, value)
    series: dict[str, list[tuple[int, int, float]]] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # artifact folder -> local file
    status: str = "FINISHED"  # FINISHED | FAILED
    start_ms: int | None = None
    end_ms: int | None = None
    where: str = ""  # file:line this record came from, for error messages
    # Tags that say where the source was found, not what it says: a subclass leaves them out of its content hash,
    # and an import does not count a run whose only difference is there as changed (store/verify.py).
    location_tags: ClassVar[frozenset[str]] = frozenset()

    def validate(self) -> None:
        missing = [p for p in REQUIRED_PARAMS if p not in self.params or self.params[p] in (None, "")]
        if missing:
            raise SchemaError(f"{self.where}: run {self.key!r} lacks params {missing}")
        if self.tags.get("source") not in SOURCES:
            raise SchemaError(f"{self.where}: run {self.key!r} has source tag {self.tags.get('source')!r}")
        if self.tags["source"] == "published" and not self.tags.get("citation"):
            raise SchemaError(f"{self.where}: published run {self.key!r} has no citation tag")
        unknown = set(self.metrics) - set(METRICS)
        if unknown:
            raise SchemaError(f"{self.where}: run {self.key!r} has metrics outside the schema: {sorted(unknown)}")
        for name, value in self.metrics.items():
            if value is None or value != value:
                raise SchemaError(f"{self.where}: run {self.key!r} metric {name} is missing (log nothing instead)")
            check_value(f"{self.where}: run {self.key!r} metric {name}", value, *BOUNDS[name])
        for name, points in self.series.items():
            if name not in SERIES:
                raise SchemaError(f"{self.where}: run {self.key!r} has a series outside the schema: {name!r}")
            for step, _, value in points:
                check_value(f"{self.where}: run {self.key!r} series {name} at step {step}", value, *POSITIVE)
        for name, least in COUNT_PARAMS.items():
            if self.params.get(name) not in (None, NOT_STATED):
                check_count(f"{self.where}: run {self.key!r} param {name}", self.params[name], least)
        if self.status not in ("FINISHED", "FAILED"):
            raise SchemaError(f"{self.where}: run {self.key!r} has status {self.status!r}")
        canonical_model(str(self.params["model"]), self.where)

    @property
    def run_name(self) -> str:
        return run_name(self.params)

    def content_hash(self) -> str:
        """Hash of everything written for this run, so a changed source updates its run."""
        files = {name: _digest(Path(path)) for name, path in self.artifacts.items()}
        blob = json.dumps(
            [self.params, self.metrics, self.tags, self.series, files, self.status, self.start_ms, self.end_ms],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def check_value(what: str, value, low: float, low_allowed: bool, high: float) -> None:
    """A finite number in [low or (low, high]; else SchemaError naming `what` (e.g. 'file:line: metric x')."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SchemaError(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(number):
        raise SchemaError(f"{what} is {value!r}, not a finite number")
    if number < low or (number == low and not low_allowed) or number > high:
        interval = f"{'[' if low_allowed else '('}{low:g}, {high:g}]".replace("inf]", "inf)")
        raise SchemaError(f"{what} is {value!r}, outside {interval}")


def check_count(what: str, value, least: int) -> None:
    """A whole number >= least (workers, batch, steps...); else SchemaError naming `what`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SchemaError(f"{what} is {value!r}, not a whole number") from None
    if not math.isfinite(number) or not number.is_integer() or number < least:
        raise SchemaError(f"{what} is {value!r}, not a whole number >= {least}")


def _digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files with their relative paths."""
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + b"\0" + item.read_bytes())
    return digest.hexdigest()


def run_name(params: dict[str, object]) -> str:
    """Readable name, e.g. 'resnet50 · P100 · 8 GPUs · synthetic · b64 · nvidia-dgx-1'."""
    workers = params["workers"]
    unit = "GPU" if str(params["device"]).lower() != "cpu" else "rank"
    parts = [
        str(params["model"]),
        str(params["device"]),
        f"{workers} {unit}{'s' if workers == NOT_STATED or int(workers) != 1 else ''}",  # type: ignore[call-overload]
        str(params["data"]),
        f"b{params['batch_per_worker']}",
        str(params["platform"]),
    ]
    return " · ".join(parts)
