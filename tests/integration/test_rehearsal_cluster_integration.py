"""The rehearsal cluster (scripts/cluster.py, `make cluster-up`) as a user starts it, and a 4-rank job across its two
nodes with a rank killed on node2. The sweep itself (workers=1,2,4, ranks 0, 1 on node1 and 2, 3 on node2) runs as
docs/cluster.md writes it, inside the SIF: test_cluster_path_integration.py. The session's cluster is
tests/slurm_cluster.py's (the same tool, in a temporary folder)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import REPO
from slurm_cluster import cluster_tool
from test_slurm import _artifact_files
from test_slurm_integration import TRAIN_PYTHON, _need_training_python

from scalestudy.store import load_runs

TOOL = REPO / "scripts" / "cluster.py"
# Figure 1's sweep cut to one model and tiny synthetic images: 128 images of 4 per rank and step, one epoch.
TINY = (
    "experiment=figure-1 model=resnet50 data=synthetic data.num_images=128 data.image_size=32 batch_per_worker=4 "
    "warmup_steps=2 min_measured_steps=3 platform=rehearsal"
)


def _tool(*args: str, root: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOL), *args, "--root", str(root)], capture_output=True, text=True, timeout=timeout
    )


def _ours_left(name: str) -> list[str]:
    """Namespaces and links of the cluster `name` that this machine still has."""
    found = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found += subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.replace(":", " ").split()
    return sorted({word.split("@")[0] for word in found if word.startswith(f"{name}-")})


def test_cluster_up_status_down_as_a_user_beside_the_tests_cluster(slurm_cluster):
    """up (twice), status and down of a second cluster while the session's runs: its own names and subnet; down
    leaves no daemon, namespace or link of it."""
    base = Path(tempfile.mkdtemp(prefix="scalestudy-cluster-"))
    base.chmod(0o755)  # munged wants every folder above its socket searchable by all (pytest's tmp_path is not)
    root, name = base / "cluster", "u" + os.urandom(3).hex()
    start = time.monotonic()
    started = _tool("up", "--name", name, root=root)
    up_s = time.monotonic() - start
    assert started.returncode == 0, started.stderr
    assert started.stdout == f"export SLURM_CONF={root / 'slurm.conf'}\n" and "is up" in started.stderr
    again = _tool("up", root=root)
    assert again.returncode == 0 and "is already up" in again.stderr and again.stdout == started.stdout
    mine = cluster_tool.Cluster.load(root)
    assert mine.subnet != slurm_cluster.subnet and _ours_left(name) == sorted(
        [f"{name}-br", f"{name}-n1", f"{name}-n2", f"{name}-node1", f"{name}-node2"]
    )
    status = _tool("status", root=root).stdout
    assert "node1 debug* idle 2 1000" in status and "node2 debug* idle 2 1000" in status, status
    start = time.monotonic()
    stopped = _tool("down", root=root)
    down_s = time.monotonic() - start
    assert stopped.returncode == 0 and stopped.stderr == "the rehearsal cluster is down\n", stopped.stderr
    assert _ours_left(name) == [] and cluster_tool.cluster_processes(mine) == []
    assert "is down" in _tool("status", root=root).stdout
    print(f"rehearsal cluster: up {up_s:.1f} s, down {down_s:.1f} s")
    assert slurm_cluster.run("sinfo", "--noheader", "--format=%D %t").stdout.split() == ["2", "idle"]
    shutil.rmtree(base)


def _sweep(slurm_cluster, tmp_path: Path, uri: str, overrides: str, **popen) -> subprocess.Popen:
    """`python -m scalestudy.train -m cluster=rehearsal ...` as the user types it on the login side."""
    env = dict(slurm_cluster.env, MLFLOW_TRACKING_URI=uri, HYDRA_FULL_ERROR="1", TF_CPP_MIN_LOG_LEVEL="2")
    args = [str(TRAIN_PYTHON), "-m", "scalestudy.train", "-m", "cluster=rehearsal", f"hydra.sweep.dir={tmp_path}/sweep"]
    out = open(tmp_path / "sweep.log", "w")  # noqa: SIM115 (the child keeps its own copy)
    with out:
        return subprocess.Popen(
            args + overrides.split(), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, **popen
        )


def _finish(proc: subprocess.Popen, tmp_path: Path, timeout: float) -> str:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return (tmp_path / "sweep.log").read_text(errors="replace")


def _hosts(job_dir: Path) -> dict[int, str]:
    """Where each rank ran, from the job's result.json (rank 0 gathers every rank's record)."""
    return {r["rank"]: r["hostname"] for r in json.loads((job_dir / "result.json").read_text())["ranks"]}


def _rank_process(slurm_cluster, node: str, rank: int) -> int | None:
    """The pid of the training process of `rank` running on `node` (its Slurm task id is the rank)."""
    for pid in slurm_cluster.node_pids(node):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"SLURM_PROCID={rank}".encode() in environ and b"scalestudy.harness.runners" in cmdline:
            return pid
    return None


def _wait_for(what: str, found, proc: subprocess.Popen, tmp_path: Path, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while not (value := found()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {what}: " + (tmp_path / "sweep.log").read_text(errors="replace")[-4000:])
        time.sleep(0.5)
    return value


@pytest.mark.skipif(not TRAIN_PYTHON.exists(), reason=f"no Horovod: neither {sys.executable} nor .venv-train has it")
def test_a_rank_killed_on_node2_is_a_failed_run_with_its_logs(slurm_cluster, tmp_path):
    """Rank 3 of a 4-rank job killed on node2 while it trains: srun ends the step on both nodes, the sweep says
    FAILED, and the run is FAILED with the reason, every rank's log and the Slurm log; nothing of the job is left."""
    _need_training_python()
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    proc = _sweep(slurm_cluster, tmp_path, uri, TINY.replace("experiment=figure-1 ", "") + " steps=5000 workers=4")
    rank_log = tmp_path / "sweep" / "0_resnet50_tensorflow_w4" / "rank-logs" / "rank.3" / "stdout"
    _wait_for(
        "training rank 3", lambda: rank_log.exists() and "[rank 3] 4 ranks" in rank_log.read_text(), proc, tmp_path
    )
    pid = _wait_for("rank 3 on node2", lambda: _rank_process(slurm_cluster, "node2", 3), proc, tmp_path, timeout=30)
    os.kill(pid, signal.SIGKILL)
    log = _finish(proc, tmp_path, timeout=300)
    assert proc.returncode != 0 and "FAILED" in log, log[-4000:]
    (run,) = load_runs(uri).itertuples()
    assert run.status == "FAILED" and run.workers == 4 and "exited with code" in run.failure, run.failure
    assert run.failure.endswith("; first: node2: task 3: Killed"), run.failure
    launcher = (Path(run.job_dir) / "launcher.log").read_text()
    assert "node2: task 3: Killed" in launcher, launcher[-3000:]
    files = _artifact_files(uri, run.run_id)
    assert {f"logs/rank-logs/rank.{r}/stdout" for r in range(4)} <= {f.rsplit("/", 1)[0] for f in files}
    assert any(f.startswith("logs/launcher.log") for f in files), files
    assert any(f.startswith("slurm/") and f.endswith("_log.err") for f in files), files
    assert not [
        p for node in slurm_cluster.nodes for p in [_rank_process(slurm_cluster, node, r) for r in range(4)] if p
    ]
