"""The job's settings: what cannot work is refused before anything starts (naming the config key), and the job's
one config file (config.yaml: the resolved config, plus where rank 0 writes its result) is written."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..files import write_text
from ..schema import canonical_model
from .launch import RESULT_FILE
from .timing import check_steps

JOB_CONFIG = "config.yaml"  # the job's one config file: what the ranks read and the run keeps
PROFILES = ("none", "timeline", "tf", "mxnet")  # cfg.profile


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


def recorded_by_submitter(cfg: DictConfig) -> bool:
    """cluster=slurm: the job leaves its run in run.json and the submitting process records it (slurm/sweep.py)."""
    return str(cfg.cluster.get("runs_recorded_by", "job")) == "submitter"


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
