"""One training job: run (refuse what cannot work, write config.yaml, start and watch the ranks) -> record (one
MLflow run in cfg.tracking.experiment, tagged source=measured, or run.json for a Slurm submitter)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from omegaconf import DictConfig

from ..schema import RunRecord
from .job_config import check_config, recorded_by_submitter, write_job_config
from .launch import JobOutcome, LaunchError, run_job
from .record import RUN_FILE, describe_experiment, job_record, save_record
from .slurm.commands import SlurmConfigError


class RunFailed(RuntimeError):
    """The job ran and was recorded as FAILED (the message names the run and the reason)."""


def refused(reason: str) -> JobOutcome:
    now = time.time()
    return JobOutcome(
        status="FAILED", reason=reason, returncode=None, job_start_unix=now, job_end_unix=now, result=None
    )


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
    from ..store import log_measured_run, tracking_uri  # imports mlflow only when a job runs

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
