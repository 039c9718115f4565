"""python -m scalestudy.train [OVERRIDE...]   (or -m experiment=figure-1 for a figure's sweep)

The driver of one training job: main -> run -> record.
- run: refuse settings that cannot work (check_config), write the job's one config file (config.yaml: the
  resolved config, plus where rank 0 writes its result), and start cfg.workers Horovod ranks of the
  framework's runner (launch.run_job), which ends in a JobOutcome however the ranks end.
- record: turn the outcome into ONE MLflow run in cfg.tracking.experiment, tagged source=measured: FINISHED
  with the timing numbers of every rank (timing.aggregate), or FAILED with the reason and the rank logs.
  With cluster=slurm the run is left in run.json for the submitting process (slurm/sweep.py), since a
  compute node may not reach the store.
The job folder (Hydra's output dir, git-ignored) keeps config.yaml, environment.json, result.json and the logs.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .cli import one_line
from .config import CONF_DIR, experiment_users
from .launch import PROFILE_DIR, RESULT_FILE, TIMELINE_FILE, JobOutcome, LaunchError, run_job
from .provenance import environment_manifest, write_text
from .schema import DESCRIPTION_TAG, RunRecord, canonical_model
from .slurm.commands import SlurmConfigError
from .timing import TimingError, aggregate, check_steps

JOB_CONFIG = "config.yaml"  # the job's one config file: what the ranks read and the run keeps
PROFILES = ("none", "timeline", "tf", "mxnet")  # cfg.profile
RUN_FILE = "run.json"  # the job's run, when the submitter records it (cluster=slurm)


class RunFailed(RuntimeError):
    """The job ran and was recorded as FAILED (the message names the run and the reason)."""


def check_config(cfg: DictConfig) -> None:
    """Settings that cannot work, refused before anything starts (names the config key)."""

    def bad(key: str, why: str):
        raise ValueError(f"config {key}={OmegaConf.select(cfg, key)!r}: {why}")

    if str(cfg.device) not in ("cpu", "gpu"):
        bad("device", "choose cpu or gpu")
    if int(cfg.workers) < 1:
        bad("workers", "need at least one rank")
    if int(cfg.batch_per_worker) < 1:
        bad("batch_per_worker", "need at least one image per rank and step")
    if str(cfg.data_format) not in ("NHWC", "NCHW"):
        bad("data_format", "choose NHWC or NCHW")
    fw = str(cfg.framework.name)
    if fw == "mxnet" and cfg.data_format != "NCHW":
        bad("data_format", "gluon's model zoo builds NCHW networks only")
    if fw == "tensorflow" and cfg.device == "cpu" and cfg.data_format == "NCHW":
        bad("data_format", "TensorFlow's CPU convolutions are NHWC only")
    if cfg.mixed_precision and fw == "mxnet" and cfg.device == "cpu":
        bad(
            "mixed_precision",
            "MXNet's AMP on a CPU needs oneDNN bfloat16 kernels (AVX-512 BF16); use it with device=gpu",
        )
    if cfg.xla and fw != "tensorflow":
        bad("xla", "XLA is a TensorFlow option")
    profile = str(cfg.get("profile") or "none")
    if profile not in PROFILES:
        bad("profile", f"choose {', '.join(PROFILES)}")
    if profile in ("tf", "mxnet") and profile != {"tensorflow": "tf", "mxnet": "mxnet"}[fw]:
        bad("profile", f"profile={profile} is the profiler of the other framework (framework={fw})")
    if profile in ("tf", "mxnet") and int(cfg.get("profile_steps") or 0) < 1:
        bad("profile_steps", "profile at least one step")
    if fw == "tensorflow" and str(cfg.model.name) == "inception3" and int(cfg.data.image_size) < 75:
        bad("data.image_size", "Keras' InceptionV3 needs images of at least 75x75")
    canonical_model(str(cfg.model.name), "config model.name")
    if not cfg.get("epochs"):
        check_steps(int(cfg.warmup_steps) + int(cfg.steps), int(cfg.warmup_steps), int(cfg.min_measured_steps))


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
    """'cpu', or the GPU model in the short form the published runs use (e.g. 'H100', 'V100')."""
    if str(cfg.device) == "cpu":
        return "cpu"
    names = [r.get("device_name") for r in ((outcome.result or {}).get("ranks", []) if outcome else [])]
    names = [n for n in names if n] or [g.split(",")[0] for g in manifest.get("gpus", [])]
    if not names:
        return "gpu"
    short = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", names[0])
    return short.group(1) if short else names[0]


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
    from .profile import ProfileError
    from .profile.timeline import summarize_timeline

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
            {k: r.get(k) for k in ("rank", "hostname", "pid", "device_name", "threads")}
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
    from .store import describe_experiments

    describe_experiments({experiment: experiment_description(experiment)}, uri)


def recorded_by_submitter(cfg: DictConfig) -> bool:
    """cluster=slurm: the job leaves its run in run.json and the submitting process records it (slurm/sweep.py)."""
    return str(cfg.cluster.get("runs_recorded_by", "job")) == "submitter"


def refused(reason: str) -> JobOutcome:
    now = time.time()
    return JobOutcome(
        status="FAILED", reason=reason, returncode=None, job_start_unix=now, job_end_unix=now, result=None
    )


def save_record(record: RunRecord, path: Path) -> None:
    write_text(path, json.dumps(asdict(record), indent=1))  # the submitter never reads half a run


def load_record(path: Path) -> RunRecord:
    data = json.loads(path.read_text())
    data["series"] = {k: [tuple(p) for p in v] for k, v in data["series"].items()}
    return RunRecord(**data)


# --------------------------------------------------------------------------------------------
# The job: main -> run -> record


def write_job_config(cfg: DictConfig, job_dir: Path) -> Path:
    """config.yaml: the resolved config, plus where rank 0 writes its result (and, in Slurm, the job's ids)."""
    job_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    job_cfg.launch = {"job_dir": str(job_dir), "result_file": str(job_dir / RESULT_FILE)}
    if recorded_by_submitter(cfg):
        from .slurm.job import job_info

        job_cfg.launch.slurm = job_info()
    path = job_dir / JOB_CONFIG
    write_text(path, OmegaConf.to_yaml(job_cfg))
    return path


def run(cfg: DictConfig, job_dir: Path) -> JobOutcome:
    """Start the job's ranks and watch them to the end. A setting that cannot work raises at once, here; in a
    cluster job it becomes a FAILED outcome instead, so a sweep's refused job is not silently missing."""
    job_config = write_job_config(cfg, job_dir)
    by_submitter = recorded_by_submitter(cfg)
    try:
        check_config(cfg)
    except ValueError as err:
        if not by_submitter:
            raise
        return refused(f"config refused: {err}")
    print(
        f"job {job_dir}: {cfg.workers} x {cfg.framework.name} {cfg.model.name} ({cfg.device}), "
        f"timeout {cfg.timeout_s} s",
        flush=True,
    )
    try:
        return run_job(cfg, job_dir, job_config)
    except (LaunchError, SlurmConfigError) as err:  # e.g. workers that do not fit cluster.nodes
        if not by_submitter:
            raise
        return refused(f"launch refused: {err}")


def record(cfg: DictConfig, job_dir: Path, outcome: JobOutcome) -> RunRecord:
    """Record the job's one run (or leave it in run.json for the submitter) and say how it went."""
    from .store import log_measured_run, tracking_uri  # imports mlflow only when a job runs

    rec = job_record(cfg, job_dir, outcome)
    if recorded_by_submitter(cfg):
        save_record(rec, job_dir / RUN_FILE)
        run_id, uri = "(recorded by the submitter)", str(job_dir / RUN_FILE)
    else:
        uri = cfg.tracking.uri or tracking_uri()
        run_id = log_measured_run(rec, uri=uri)
        describe_experiment(rec.experiment, uri)
    summary = {"run_id": run_id, "status": rec.status, "run_name": rec.run_name, "store": uri}
    if rec.status == "FINISHED":
        m = rec.metrics
        keys = ("throughput_total", "throughput_ci95_low", "throughput_ci95_high", "time_work_s")
        summary.update({k: round(m[k], 3) for k in keys if k in m})
    print(json.dumps(summary), flush=True)
    detected = rec.metrics.get("warmup_detected_step")
    if detected is not None and detected > int(cfg.warmup_steps):
        print(
            f"warning: the series reaches steady state at step {int(detected)}, after the {cfg.warmup_steps} "
            f"warm-up steps configured: consider warmup_steps={int(detected)}",
            file=sys.stderr,
            flush=True,
        )
    if rec.status != "FINISHED":
        raise RunFailed(f"run {run_id} ({rec.run_name}) FAILED: {rec.tags['failure']}; logs in {job_dir}")
    return rec


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    job_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    try:
        record(cfg, job_dir, run(cfg, job_dir))
    except (ValueError, RuntimeError, LookupError) as err:  # a refused setting, a failed run, a store error
        if HydraConfig.get().mode == RunMode.MULTIRUN or os.environ.get("SCALESTUDY_DEBUG", "") not in ("", "0"):
            raise  # a sweep reports each failed job itself (Hydra, submitit)
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        sys.exit(1 if isinstance(err, RunFailed) else 2)


if __name__ == "__main__":
    sys.exit(main())
