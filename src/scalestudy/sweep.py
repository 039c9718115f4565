"""Record a cluster sweep's runs in MLflow from the submitting process: one writer, whatever the cluster.

With cluster=slurm each sweep job runs on a compute node, which may share no database and reach no server
with the submitting (login) node. So a job does not write MLflow itself: it leaves its run in its folder
(`run.json`, train.py), and the submitter records every job of the sweep when the sweep ends, however it
ends (`RecordSweep`, a Hydra callback of conf/cluster/slurm.yaml, registers that at the sweep's start).

- A job that left run.json: its run, FINISHED or FAILED, with the job's Slurm log attached.
- A job that started (its config.yaml is there) but left no run.json, because Slurm killed it (time limit,
  memory, node failure) or its driver died: a FAILED run with the reason and the Slurm log, never nothing.
- A job recorded once is not recorded again (`run.recorded` holds its run id), so recording a sweep twice,
  or by hand after the submitter was killed, adds nothing twice:

    python -m scalestudy.sweep multirun/train/2026-11-22_10-00-00
"""
from __future__ import annotations

import argparse
import atexit
import json
import shutil
import subprocess
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

RECORDED = "run.recorded"


def _slurm_logs(job_dir: Path) -> dict[str, str]:
    """The Slurm job's stdout/stderr files (as submitit named them), as run artifacts."""
    from .train import SLURM_JOB_FILE

    info_file = job_dir / SLURM_JOB_FILE
    if not info_file.exists():
        return {}
    info = json.loads(info_file.read_text())
    return {f"slurm/{Path(info[k]).name}": info[k] for k in ("stdout", "stderr")
            if info.get(k) and Path(info[k]).is_file()}


def _still_running(job_dir: Path) -> bool:
    """Whether Slurm still lists the job of this folder (a sweep may end early when one job failed)."""
    from .train import SLURM_JOB_FILE

    info_file = job_dir / SLURM_JOB_FILE
    job = json.loads(info_file.read_text()).get("SLURM_JOB_ID") if info_file.exists() else None
    if not job or not shutil.which("squeue"):
        return False
    out = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED")


def _lost_job_record(job_dir: Path):
    """A FAILED run for a job that started but recorded nothing (its config says what it was)."""
    from .launch import JobOutcome
    from .train import SLURM_JOB_FILE, record_job

    cfg = OmegaConf.load(job_dir / "config.yaml")
    info = json.loads((job_dir / SLURM_JOB_FILE).read_text()) if (job_dir / SLURM_JOB_FILE).exists() else {}
    slurm_id = info.get("SLURM_JOB_ID") or "?"
    started = (job_dir / "config.yaml").stat().st_mtime
    ended = max((p.stat().st_mtime for p in job_dir.rglob("*") if p.is_file()), default=started)
    reason = (f"Slurm job {slurm_id} ended without recording its run: killed by Slurm (time limit, memory, node "
              "failure) or its driver died; see the Slurm log")
    outcome = JobOutcome(status="FAILED", reason=reason, returncode=None, job_start_unix=started,
                         job_end_unix=ended, result=None)
    return record_job(cfg, job_dir, outcome)


def record_sweep(sweep_dir: str | Path, uri: str | None = None) -> list[dict]:
    """Record every job of the sweep not recorded yet; returns one summary per job recorded now."""
    from .tracking import log_measured_run
    from .train import RUN_FILE, load_record

    done = []
    for job_dir in sorted(p for p in Path(sweep_dir).iterdir() if (p / "config.yaml").exists()):
        if (job_dir / RECORDED).exists():
            continue
        if not (job_dir / RUN_FILE).exists() and _still_running(job_dir):
            print(f"{job_dir.name}: its Slurm job is still running; record it later with "
                  f"python -m scalestudy.sweep {sweep_dir}", file=sys.stderr)
            continue
        record = load_record(job_dir / RUN_FILE) if (job_dir / RUN_FILE).exists() else _lost_job_record(job_dir)
        record.artifacts.update(_slurm_logs(job_dir))
        run_id = log_measured_run(record, uri=uri)
        (job_dir / RECORDED).write_text(run_id + "\n")
        done.append({"job": job_dir.name, "run_id": run_id, "status": record.status,
                     "failure": record.tags.get("failure", "")})
    return done


def report(sweep_dir: Path, uri: str | None) -> int:
    """Record the sweep and print what was recorded; 1 if a job failed."""
    from .tracking import tracking_uri

    uri = uri or tracking_uri()
    done = record_sweep(sweep_dir, uri)
    for job in done:
        line = f"recorded {job['job']}: run {job['run_id']} {job['status']}"
        print(line + (f" ({job['failure']})" if job["failure"] else ""), file=sys.stderr, flush=True)
    print(f"{len(done)} run(s) of {sweep_dir} recorded in {uri}", file=sys.stderr, flush=True)
    return 1 if any(j["status"] != "FINISHED" for j in done) else 0


def _record_in_child(sweep_dir: Path, uri: str | None) -> None:
    # At exit the interpreter starts no more threads, and MLflow needs some: record from a fresh process.
    cmd = [sys.executable, "-m", "scalestudy.sweep", str(sweep_dir)] + (["--uri", uri] if uri else [])
    subprocess.run(cmd, check=False)


class RecordSweep(Callback):
    """Hydra callback: when the sweep's process exits (after the launcher returned or raised), record it."""

    def on_multirun_start(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir).resolve()
        uri = OmegaConf.select(config, "tracking.uri")
        # atexit, not on_multirun_end: Hydra skips that when a job failed, and failed jobs must be recorded too.
        atexit.register(_record_in_child, sweep_dir, uri)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scalestudy.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("sweep_dir", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    ap.add_argument("--uri", default=None, help="tracking URI (default: MLFLOW_TRACKING_URI or .mlflow/store.db)")
    args = ap.parse_args(argv)
    if not args.sweep_dir.is_dir():
        ap.error(f"{args.sweep_dir}: no such sweep folder")
    report(args.sweep_dir, args.uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
