"""The job's one run: its outcome (launch.JobOutcome) as a RunRecord, FINISHED with the timing numbers of every
rank (timing.aggregate) or FAILED with the reason and the rank logs; and run.json, where a Slurm job leaves its run
for the submitting process."""

from __future__ import annotations

import json
import math
import os
import socket
from dataclasses import asdict
from pathlib import Path

import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ..config import experiment_users
from ..files import write_text
from ..provenance import environment_manifest
from ..schema import DESCRIPTION_TAG, RunRecord, canonical_device
from .job_config import JOB_CONFIG
from .launch import PROFILE_DIR, RESULT_FILE, TIMELINE_FILE, JobOutcome
from .timing import TimingError, aggregate

RUN_FILE = "run.json"  # the job's run, when the submitter records it (cluster=slurm)


def flatten(node, prefix: str = "") -> dict[str, object]:
    """{'data.image_size': 32, ...}; lists become JSON text."""
    out: dict[str, object] = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, list) else value
    return out


def device_label(cfg: DictConfig, outcome: JobOutcome | None, manifest: dict) -> str:
    """'cpu', or the GPU model in the short form the published runs use (e.g. 'H100', 'V100', 'RTX 3090'): the name
    schema.canonical_device gives, as the log importers do."""
    if str(cfg.device) == "cpu":
        return "cpu"
    names = [r.get("device_name") for r in ((outcome.result or {}).get("ranks", []) if outcome else [])]
    names = [n for n in names if n] or [g.split(",")[0] for g in manifest.get("gpus", [])]
    return canonical_device(names[0]) if names else "gpu"


def data_label(cfg) -> str:
    """The run's `data` param: 'synthetic', 'cifar10', or 'cifar10-299' when resized."""
    data = cfg.data
    native = data.get("native_size") or cfg.model.image_size
    return str(data.name) if int(data.image_size) == int(native) else f"{data.name}-{int(data.image_size)}"


def run_params(cfg: DictConfig, resolved: dict, device: str) -> dict[str, object]:
    """The run schema's params, then the whole resolved config flattened (the schema wins on a clash)."""
    params = {k: v for k, v in flatten(resolved).items() if v is not None}
    params.update(
        {
            "model": str(cfg.model.name),
            "framework": str(cfg.framework.name),
            "workers": int(cfg.workers),
            "device": device,
            "device_type": str(cfg.device),
            "data": data_label(cfg),
            "batch_per_worker": int(cfg.batch_per_worker),
            "platform": str(cfg.platform or socket.gethostname()),
        }
    )
    return params


def measure(cfg: DictConfig, outcome: JobOutcome) -> tuple[dict, dict, str]:
    """(metrics, series, failure reason) from rank 0's result file."""
    ranks = outcome.result["ranks"]
    try:
        numbers = aggregate(
            ranks,
            warmup_steps=int(cfg.warmup_steps),
            min_measured=int(cfg.min_measured_steps),
            job_start_unix=outcome.job_start_unix,
        )
    except TimingError as err:
        return {}, {}, f"timing: {err}"
    metrics = dict(numbers["metrics"])
    memory = [r["memory_peak_mb"] for r in ranks if r.get("memory_peak_mb")]
    if memory:
        metrics["memory_peak_mb"] = float(max(memory))
    for split in ("train", "test"):
        seen = sum(r.get(f"{split}_seen", 0) for r in ranks)
        if seen:
            metrics[f"accuracy_{split}"] = sum(r[f"{split}_correct"] for r in ranks) / seen
    return {k: v for k, v in metrics.items() if v is not None and not math.isnan(v)}, numbers["series"], ""


def timeline_metrics(cfg: DictConfig, timeline: Path, ranks: list[dict]) -> tuple[dict, str]:
    """profile=timeline: where the measured steps' time went (schema step_* metrics), from Horovod's timeline of
    the job and the ranks' own step times; or no metrics and a note saying why.

    The k-th allreduce of each gradient tensor belongs to step k (profile/timeline.py), so the timeline and the
    ranks' clocks need not agree. A step's time is the slowest rank's."""
    from ..profile import ProfileError
    from ..profile.timeline import summarize_timeline

    warmup = int(cfg.warmup_steps)
    gaps = [np.diff([r["loop_start_unix"], *r["step_end_unix"]]) for r in ranks]
    step_times = np.max(np.vstack(gaps), axis=0)  # per step, the slowest rank
    if len(ranks) == 1:
        # Horovod's optimizers skip the allreduce on one rank (its timeline may even stay empty): no communication.
        step_ms = 1e3 * float(np.mean(step_times[warmup:]))
        zero = ("step_comm_ms", "step_comm_exposed_ms", "step_comm_share", "step_negotiate_ms", "step_fusion_copy_ms")
        return {"step_time_ms": step_ms, "step_compute_ms": step_ms, **dict.fromkeys(zero, 0.0)}, ""
    if not timeline.exists():
        return {}, f"profile=timeline: Horovod wrote no timeline at {timeline}"
    try:
        summary = summarize_timeline(timeline, skip_steps=warmup, step_times_s=list(step_times[warmup:]))
    except ProfileError as err:
        return {}, f"profile=timeline: {err}"
    found = summary.facts["steps"]
    if found != len(step_times):
        steps = len(step_times)
        return {}, f"profile=timeline: {timeline} has {found} allreduces per gradient tensor, the job {steps} steps"
    return summary.metrics, ""


def job_record(cfg: DictConfig, job_dir: Path, outcome: JobOutcome) -> RunRecord:
    """The job's one run: params from the config, metrics from the ranks' clocks, logs as artifacts."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("launch", None)  # where this job's files were, not a setting
    manifest = environment_manifest()
    if outcome.result:
        manifest["ranks"] = [
            {k: r.get(k) for k in ("rank", "hostname", "pid", "device_name", "threads", "python", "container")}
            for r in outcome.result.get("ranks", [])
        ]
        manifest["framework"] = outcome.result.get("framework", {})
    write_text(job_dir / "environment.json", json.dumps(manifest, indent=1))
    metrics, series, reason = ({}, {}, outcome.reason)
    if outcome.status == "FINISHED":
        metrics, series, reason = measure(cfg, outcome)
    profile_tags: dict[str, str] = {}
    if not reason and str(cfg.get("profile")) == "timeline":
        step_numbers, note = timeline_metrics(cfg, job_dir / TIMELINE_FILE, outcome.result["ranks"])
        metrics.update(step_numbers)
        if note:
            profile_tags["profile_note"] = note[:5000]
    tags = {
        "source": "measured",
        "job_dir": str(job_dir.resolve()),
        "git_commit": manifest["git_commit"],
        "git_dirty": manifest["git_dirty"],
        "hostname": manifest["hostname"],
        "launcher": " ".join(outcome.command)[:5000],
    }
    overrides = HydraConfig.get().overrides.task if HydraConfig.initialized() else []
    tags["overrides"] = " ".join(overrides)[:5000]
    if reason:
        tags["failure"] = reason[:5000]
    tags.update(profile_tags)
    tags[DESCRIPTION_TAG] = (
        f"Measured run: `python -m scalestudy.train {tags['overrides'] or '(no overrides)'}`, job folder "
        f"`{tags['job_dir']}` (its config.yaml, environment.json and the ranks' logs are attached)."
        + (f"\n\nFAILED: {tags['failure']}" if reason else "")
    )[:5000]
    artifacts = {"config": str(job_dir / JOB_CONFIG), "environment": str(job_dir / "environment.json")}
    if (job_dir / TIMELINE_FILE).exists():
        artifacts["profile"] = str(job_dir / TIMELINE_FILE)  # opens in chrome://tracing or ui.perfetto.dev
    if (job_dir / PROFILE_DIR).is_dir():
        artifacts[PROFILE_DIR] = str(job_dir / PROFILE_DIR)  # the framework profiler's files, one folder per rank
    if outcome.result is not None:
        artifacts["result"] = str(job_dir / RESULT_FILE)
    for path in outcome.logs:
        artifacts[str(Path("logs") / path.relative_to(job_dir))] = str(path)  # one folder per file keeps names unique
    return RunRecord(
        experiment=str(cfg.tracking.experiment),
        key=job_dir.name + "-" + os.urandom(4).hex(),
        params=run_params(cfg, resolved, device_label(cfg, outcome, manifest)),
        metrics=metrics,
        tags=tags,
        series=series,
        artifacts=artifacts,
        status="FAILED" if reason else "FINISHED",
        start_ms=int(outcome.job_start_unix * 1000),
        end_ms=int(outcome.job_end_unix * 1000),
        where=str(job_dir),
    )


def experiment_description(experiment: str) -> str:
    """The description in MLflow's UI of an experiment of measured runs (Markdown): what one run is, who uses it."""
    users = ", ".join(experiment_users().get(experiment, [])) or "no figure or table yet"
    return (
        "Measured runs: this repository's training harness (`python -m scalestudy.train`, Horovod ranks of "
        "TensorFlow or MXNet), run here or through Slurm.\n\n"
        "- One run: one job, `workers` ranks of one framework, model and data; a job that failed is a FAILED run "
        "with the reason and every rank's log. Each run's description names its job folder and the command's "
        "overrides.\n"
        f"- Used by: {users} (with `source=measured` or `source=all`)."
    )


def describe_experiment(experiment: str, uri: str | None) -> None:
    from ..store import describe_experiments

    describe_experiments({experiment: experiment_description(experiment)}, uri)


def save_record(record: RunRecord, path: Path) -> None:
    write_text(path, json.dumps(asdict(record), indent=1))  # the submitter never reads half a run


def load_record(path: Path) -> RunRecord:
    data = json.loads(path.read_text())
    data["series"] = {k: [tuple(p) for p in v] for k, v in data["series"].items()}
    return RunRecord(**data)
