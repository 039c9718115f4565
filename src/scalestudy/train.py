"""python -m scalestudy.train [OVERRIDE...]   (or -m +experiment=figure-1 for a figure's sweep)

Composes conf/train.yaml, launches cfg.workers Horovod ranks of the framework's runner
(scalestudy.launch), and records ONE MLflow run of the job in cfg.tracking.experiment, tagged
source=measured: FINISHED with the timing numbers of every rank (scalestudy.timing), or FAILED
with the reason and the rank logs. The job folder (Hydra's output dir, git-ignored) keeps the
resolved config, the logs and rank 0's result file.
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
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from .launch import RANK_CONFIG, JobOutcome, LaunchError, environment_manifest, run_job
from .runners.common import data_label
from .schema import RunRecord, canonical_model
from .slurm import SlurmConfigError
from .timing import TimingError, aggregate, check_steps


def _conf_dir() -> Path:
    if os.environ.get("SCALESTUDY_CONF"):
        return Path(os.environ["SCALESTUDY_CONF"]).resolve()
    here = Path.cwd() / "conf"
    if (here / "train.yaml").exists():
        return here.resolve()
    return (Path(__file__).resolve().parents[2] / "conf").resolve()  # the repository's, editable install


CONF_DIR = _conf_dir()


RUN_FILE = "run.json"            # the job's run, when the submitter records it (cluster=slurm)
SLURM_JOB_FILE = "slurm_job.json"


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
        bad("mixed_precision", "MXNet's AMP on a CPU needs oneDNN bfloat16 kernels (AVX-512 BF16); use it with device=gpu")
    if cfg.xla and fw != "tensorflow":
        bad("xla", "XLA is a TensorFlow option")
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


def run_params(cfg: DictConfig, resolved: dict, device: str) -> dict[str, object]:
    """The run schema's params, then the whole resolved config flattened (the schema wins on a clash)."""
    params = {k: v for k, v in flatten(resolved).items() if v is not None}
    params.update({
        "model": str(cfg.model.name),
        "framework": str(cfg.framework.name),
        "workers": int(cfg.workers),
        "device": device,
        "device_type": str(cfg.device),
        "data": data_label(cfg),
        "batch_per_worker": int(cfg.batch_per_worker),
        "platform": str(cfg.platform or socket.gethostname()),
    })
    return params


def measure(cfg: DictConfig, outcome: JobOutcome) -> tuple[dict, dict, str]:
    """(metrics, series, failure reason) from rank 0's result file."""
    ranks = outcome.result["ranks"]
    try:
        numbers = aggregate(ranks, warmup_steps=int(cfg.warmup_steps), min_measured=int(cfg.min_measured_steps),
                            job_start_unix=outcome.job_start_unix)
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


def record_job(cfg: DictConfig, job_dir: Path, outcome: JobOutcome) -> RunRecord:
    resolved = OmegaConf.to_container(cfg, resolve=True)
    manifest = environment_manifest()
    if outcome.result:
        manifest["ranks"] = [{k: r.get(k) for k in ("rank", "hostname", "pid", "device_name", "threads")}
                             for r in outcome.result.get("ranks", [])]
        manifest["framework"] = outcome.result.get("framework", {})
    (job_dir / "environment.json").write_text(json.dumps(manifest, indent=1))
    metrics, series, reason = ({}, {}, outcome.reason)
    if outcome.status == "FINISHED":
        metrics, series, reason = measure(cfg, outcome)
    tags = {"source": "measured", "job_dir": str(job_dir.resolve()), "git_commit": manifest["git_commit"],
            "git_dirty": manifest["git_dirty"], "hostname": manifest["hostname"],
            "launcher": " ".join(outcome.command)[:5000]}
    overrides = HydraConfig.get().overrides.task if HydraConfig.initialized() else []
    tags["overrides"] = " ".join(overrides)[:5000]
    if reason:
        tags["failure"] = reason[:5000]
    artifacts = {"config": str(job_dir / "config.yaml"), "environment": str(job_dir / "environment.json")}
    if outcome.result is not None:
        artifacts["result"] = str(job_dir / "result.json")
    for path in outcome.logs:
        rel = path.relative_to(job_dir)
        artifacts[str(Path("logs") / rel)] = str(path)  # one folder per file keeps names unique
    return RunRecord(
        experiment=str(cfg.tracking.experiment), key=job_dir.name + "-" + os.urandom(4).hex(),
        params=run_params(cfg, resolved, device_label(cfg, outcome, manifest)), metrics=metrics, tags=tags,
        series=series, artifacts=artifacts, status="FAILED" if reason else "FINISHED",
        start_ms=int(outcome.job_start_unix * 1000), end_ms=int(outcome.job_end_unix * 1000),
        where=str(job_dir),
    )


def recorded_by_submitter(cfg: DictConfig) -> bool:
    """cluster=slurm: the job leaves its run in run.json and the submitting process records it (sweep.py)."""
    return str(cfg.cluster.get("runs_recorded_by", "job")) == "submitter"


def refused_outcome(reason: str) -> JobOutcome:
    now = time.time()
    return JobOutcome(status="FAILED", reason=reason, returncode=None, job_start_unix=now, job_end_unix=now,
                      result=None)


def save_record(record: RunRecord, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record), indent=1))
    tmp.replace(path)  # the submitter never reads half a run


def load_record(path: Path) -> RunRecord:
    data = json.loads(path.read_text())
    data["series"] = {k: [tuple(p) for p in v] for k, v in data["series"].items()}
    return RunRecord(**data)


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    job_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    by_submitter = recorded_by_submitter(cfg)
    if by_submitter:
        write_slurm_job(job_dir)
    try:
        check_config(cfg)
    except ValueError as err:
        if not by_submitter:
            raise  # here the user sees it at once; no run
        # A cluster job leaves a FAILED run, so a sweep's refused job is not silently missing.
        (job_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        finish(cfg, job_dir, refused_outcome(f"config refused: {err}"), by_submitter)
        return
    (job_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    rank_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    rank_cfg.launch = {"job_dir": str(job_dir), "result_file": str(job_dir / "result.json")}
    (job_dir / RANK_CONFIG).write_text(OmegaConf.to_yaml(rank_cfg))

    print(f"job {job_dir}: {cfg.workers} x {cfg.framework.name} {cfg.model.name} ({cfg.device}), "
          f"timeout {cfg.timeout_s} s", flush=True)
    try:
        outcome = run_job(cfg, job_dir, job_dir / RANK_CONFIG)
    except (LaunchError, SlurmConfigError) as err:  # e.g. workers that do not fit cluster.nodes
        if not by_submitter:
            raise
        outcome = refused_outcome(f"launch refused: {err}")
    finish(cfg, job_dir, outcome, by_submitter)


def write_slurm_job(job_dir: Path) -> None:
    """Which Slurm job ran this sweep job, and where its log is (for the submitter to attach)."""
    info = {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")}
    try:
        import submitit

        paths = submitit.JobEnvironment().paths
        info.update(stdout=str(paths.stdout), stderr=str(paths.stderr))
    except Exception:  # not started by submitit (e.g. sbatch by hand): no log paths to give
        pass
    (job_dir / SLURM_JOB_FILE).write_text(json.dumps(info, indent=1))


def finish(cfg: DictConfig, job_dir: Path, outcome: JobOutcome, by_submitter: bool) -> None:
    """Record the job's one run (or leave it in run.json for the submitter) and say how it went."""
    from .tracking import log_measured_run, tracking_uri  # imports mlflow only when a job runs

    record = record_job(cfg, job_dir, outcome)
    if by_submitter:
        save_record(record, job_dir / RUN_FILE)
        run_id, uri = "(recorded by the submitter)", str(job_dir / RUN_FILE)
    else:
        uri = cfg.tracking.uri or tracking_uri()
        run_id = log_measured_run(record, uri=uri)
    summary = {"run_id": run_id, "status": record.status, "run_name": record.run_name, "store": uri}
    if record.status == "FINISHED":
        m = record.metrics
        summary.update({k: round(m[k], 3) for k in ("throughput_total", "throughput_ci95_low",
                                                    "throughput_ci95_high", "time_work_s") if k in m})
    print(json.dumps(summary), flush=True)
    detected = record.metrics.get("warmup_detected_step")
    if detected is not None and detected > int(cfg.warmup_steps):
        print(f"warning: the series reaches steady state at step {int(detected)}, after the {cfg.warmup_steps} "
              f"warm-up steps configured: consider warmup_steps={int(detected)}", file=sys.stderr, flush=True)
    if record.status != "FINISHED":
        raise RunFailed(f"run {run_id} ({record.run_name}) FAILED: {record.tags['failure']}; logs in {job_dir}")


if __name__ == "__main__":
    sys.exit(main())
