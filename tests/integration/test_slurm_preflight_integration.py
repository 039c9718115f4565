"""A sweep Slurm would refuse, or whose jobs would not find their image or data, is refused on the login node
before sbatch, one line per problem, exit 2, nothing submitted; sbatch's own refusal is one line too.

Real Slurm (the session's test cluster), real Hydra submitit launcher (conf/cluster/slurm.yaml)."""

from __future__ import annotations

import subprocess

from helpers import REPO
from test_slurm_integration import TRAIN_PYTHON, _need_training_python


def _sweep(slurm_cluster, tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    env = dict(slurm_cluster.env, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'store.db'}")
    args = [
        str(TRAIN_PYTHON), "-m", "scalestudy.train", "-m", "cluster=slurm", f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cluster.partition={slurm_cluster.partition}", "cluster.gpus_per_node=null", "cluster.tasks_per_node=1",
        "cluster.cpus_per_node=1", "data=synthetic", "workers=1,2", *overrides,
    ]  # fmt: skip
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=90)


def _nothing_submitted(slurm_cluster, tmp_path) -> None:
    assert slurm_cluster.run("squeue", "--noheader").stdout.strip() == ""
    jobs = [p.name for p in (tmp_path / "sweep").glob(".submitit/*") if p.name.split("_")[0].isdigit()]
    assert not jobs, f"Slurm jobs were submitted: {jobs}"  # (submitit's own pickles may be there)
    assert not (tmp_path / "store.db").exists()  # nothing to record: the submitter did not open the store


def test_a_missing_image_and_data_file_are_refused_before_sbatch(slurm_cluster, tmp_path):
    _need_training_python()
    proc = _sweep(
        slurm_cluster, tmp_path, f"cluster.image={tmp_path}/scalestudy.sif", "data=cifar10",
        f"data.path={tmp_path}/cifar-10-python.tar.gz", "model=resnet50",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"error: config cluster.image={tmp_path}/scalestudy.sif: no such file (build it with `make sif`, or give "
        "the path of a .sif on the shared file system; docs/cluster.md); nothing submitted",
        f"error: config data.path={tmp_path}/cifar-10-python.tar.gz: no such file; data=cifar10 reads the archive "
        "from it (fetch it with `make data-cifar10`, which prints its path, or use data=synthetic); nothing submitted",
    ], proc.stderr
    _nothing_submitted(slurm_cluster, tmp_path)


def test_a_partition_slurm_does_not_have_is_refused_as_sinfo_lists_them(slurm_cluster, tmp_path):
    _need_training_python()
    proc = _sweep(slurm_cluster, tmp_path, "cluster.partition=gpux")
    assert proc.returncode == 2, proc.stderr[-3000:]
    partitions = slurm_cluster.run("sinfo", "--noheader", "--format=%R").stdout.split()
    assert proc.stderr.strip().splitlines() == [
        f"error: config cluster.partition=gpux: no such partition (sinfo lists: {', '.join(sorted(partitions))}); "
        "nothing submitted"
    ]
    _nothing_submitted(slurm_cluster, tmp_path)


def test_sbatchs_own_refusal_is_one_line(slurm_cluster, tmp_path):
    """GPUs on a cluster that has none (no GRES): nothing the preflight checks, so sbatch itself refuses."""
    _need_training_python()
    proc = _sweep(slurm_cluster, tmp_path, "cluster.gpus_per_node=2", "cluster.tasks_per_node=1")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: sbatch refused the sweep, nothing submitted: sbatch: error:"), line
    assert "gres" in line.lower(), line  # what sbatch said: no such generic resource
    assert "Traceback" not in proc.stderr and "run(s) of" not in proc.stderr
    _nothing_submitted(slurm_cluster, tmp_path)
