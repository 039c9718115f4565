"""Record a Slurm sweep's runs in MLflow from the submitting process: one writer, whatever the cluster.

With cluster=slurm each sweep job runs on a compute node, which may share no database and reach no server
with the submitting (login) node. So a job does not write MLflow itself: it leaves its run in its folder
(`run.json`, record.py), and the submitter records every job of the sweep when the sweep ends, however it
ends (`RecordSweep`, a Hydra callback of conf/cluster/slurm.yaml, registers that at the sweep's start).

- A job that left run.json: its run, FINISHED or FAILED, with the job's Slurm log attached.
- A job that started (its config.yaml is there) but left no run.json, because Slurm killed it (time limit,
  memory, node failure) or its driver died: a FAILED run with the reason and the Slurm log, never nothing.
- A job recorded once is not recorded again (`run.recorded` holds its run id), so recording a sweep twice,
  or by hand after the submitter was killed, adds nothing twice:

    python -m scalestudy.harness.slurm record multirun/train/2026-11-22_10-00-00
"""

from __future__ import annotations

import atexit
import subprocess
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from .job import squeue

RECORDED = "run.recorded"
RUNNING = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED")


def _slurm(job_dir: Path) -> dict:
    """The Slurm job of this folder, as its driver wrote it into config.yaml (launch.slurm)."""
    from ..job_config import JOB_CONFIG

    cfg = OmegaConf.load(job_dir / JOB_CONFIG)
    return OmegaConf.to_container(OmegaConf.select(cfg, "launch.slurm") or OmegaConf.create({}))


def _slurm_logs(job_dir: Path) -> dict[str, str]:
    """The Slurm job's stdout/stderr files (as submitit named them), as run artifacts."""
    info = _slurm(job_dir)
    return {
        f"slurm/{Path(info[k]).name}": info[k] for k in ("stdout", "stderr") if info.get(k) and Path(info[k]).is_file()
    }


def _lost_job_record(job_dir: Path):
    """A FAILED run for a job that started but recorded nothing (its config says what it was)."""
    from ..job_config import JOB_CONFIG
    from ..launch import JobOutcome
    from ..record import job_record

    cfg = OmegaConf.load(job_dir / JOB_CONFIG)
    slurm_id = _slurm(job_dir).get("SLURM_JOB_ID") or "?"
    started = (job_dir / JOB_CONFIG).stat().st_mtime
    ended = max((p.stat().st_mtime for p in job_dir.rglob("*") if p.is_file()), default=started)
    reason = (
        f"Slurm job {slurm_id} ended without recording its run: killed by Slurm (time limit, memory, node "
        "failure) or its driver died; see the Slurm log"
    )
    outcome = JobOutcome(
        status="FAILED", reason=reason, returncode=None, job_start_unix=started, job_end_unix=ended, result=None
    )
    return job_record(cfg, job_dir, outcome)


def record_sweep(sweep_dir: str | Path, uri: str | None = None) -> list[dict]:
    """Record every job of the sweep not recorded yet; returns one summary per job recorded now."""
    from ...store import log_measured_run
    from ..job_config import JOB_CONFIG
    from ..record import RUN_FILE, describe_experiment, load_record

    done = []
    for job_dir in sorted(p for p in Path(sweep_dir).iterdir() if (p / JOB_CONFIG).exists()):
        if (job_dir / RECORDED).exists():
            continue
        if not (job_dir / RUN_FILE).exists() and squeue(_slurm(job_dir).get("SLURM_JOB_ID") or "", "%T") in RUNNING:
            print(
                f"{job_dir.name}: its Slurm job is still running; record it later with "
                f"python -m scalestudy.harness.slurm record {sweep_dir}",
                file=sys.stderr,
            )
            continue
        record = load_record(job_dir / RUN_FILE) if (job_dir / RUN_FILE).exists() else _lost_job_record(job_dir)
        record.artifacts.update(_slurm_logs(job_dir))
        run_id = log_measured_run(record, uri=uri)
        (job_dir / RECORDED).write_text(run_id + "\n")
        describe_experiment(record.experiment, uri)
        done.append(
            {"job": job_dir.name, "run_id": run_id, "status": record.status, "failure": record.tags.get("failure", "")}
        )
    return done


def report(sweep_dir: Path, uri: str | None) -> int:
    """Record the sweep and print what was recorded; 1 if a job failed."""
    from ...store import tracking_uri

    uri = uri or tracking_uri()
    done = record_sweep(sweep_dir, uri)
    for job in done:
        line = f"recorded {job['job']}: run {job['run_id']} {job['status']}"
        print(line + (f" ({job['failure']})" if job["failure"] else ""), file=sys.stderr, flush=True)
    print(f"{len(done)} run(s) of {sweep_dir} recorded in {uri}", file=sys.stderr, flush=True)
    return 1 if any(j["status"] != "FINISHED" for j in done) else 0


def _record_in_child(sweep_dir: Path, uri: str | None) -> None:
    # At exit the interpreter starts no more threads, and MLflow needs some: record from a fresh process.
    from ..job_config import JOB_CONFIG

    if not any(sweep_dir.glob(f"*/{JOB_CONFIG}")):  # refused before or by sbatch: no job started, none to record
        return
    cmd = [sys.executable, "-m", "scalestudy.harness.slurm", "record", str(sweep_dir)] + (["--uri", uri] if uri else [])
    subprocess.run(cmd, check=False)


class RecordSweep(Callback):
    """Hydra callback: when the sweep's process exits (after the launcher returned or raised), record it."""

    def on_multirun_start(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir).resolve()
        uri = OmegaConf.select(config, "tracking.uri")
        # atexit, not on_multirun_end: Hydra skips that when a job failed, and failed jobs must be recorded too.
        atexit.register(_record_in_child, sweep_dir, uri)
