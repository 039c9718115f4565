"""The training harness end to end: real Horovod ranks over Gloo, real MLflow on SQLite.

Each test runs `python -m scalestudy.train ...` as a user would, with tiny images and a few steps,
and reads back the one MLflow run it must leave. Needs the training environment (.venv-train:
TensorFlow, MXNet and Horovod built with Gloo); skipped, saying so, where Horovod is missing.
"""

from __future__ import annotations

import importlib.util
import io
import os
import pickle
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
from helpers import REPO

from scalestudy.store import load_runs, load_series

HAVE_HOROVOD = importlib.util.find_spec("horovod") is not None
pytestmark = [
    pytest.mark.skipif(
        not HAVE_HOROVOD,
        reason=f"horovod is not importable by {sys.executable}: "
        "these tests need the training environment (.venv-train, Horovod built with Gloo)",
    )
]

RUN_METRICS = {
    "throughput_total",
    "throughput_per_worker",
    "throughput_mean",
    "throughput_median",
    "throughput_stderr",
    "throughput_ci95_low",
    "throughput_ci95_high",
    "measured_steps",
    "warmup_detected_step",
    "time_total_s",
    "time_init_s",
    "time_work_s",
    "time_per_epoch_s",
    "time_launch_s",
    "memory_peak_mb",
}
TINY = [
    "workers=2",
    "batch_per_worker=4",
    "warmup_steps=3",
    "min_measured_steps=5",
    "timeout_s=240",
    "data.image_size=32",
    "platform=test-box",
]


def train(tmp_path: Path, *overrides: str, uri: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    args = [sys.executable, "-m", "scalestudy.train", f"hydra.run.dir={tmp_path / 'job'}", *overrides]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def job_processes(tmp_path: Path) -> list[str]:
    """Processes still running for the job of this test (their command line names its folder)."""
    import psutil

    marker = str(tmp_path / "job")
    alive = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if marker in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            alive.append(f"{proc.pid}: {cmd}")
    return alive


def artifacts(uri: str, run_id: str) -> set[str]:
    """Files logged with a run, read from where the store says its artifacts are."""
    con = sqlite3.connect(uri[len("sqlite:///") :])
    try:
        (location,) = con.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    finally:
        con.close()
    root = Path(unquote(urlparse(location).path))
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture()
def uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(scope="session")
def cifar_archive(tmp_path_factory) -> Path:
    """A tiny archive in the format of cifar-10-python.tar.gz: 64 training and 32 test images."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("cifar") / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, n in (("data_batch_1", 32), ("data_batch_2", 32), ("test_batch", 32)):
            blob = pickle.dumps(
                {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, n).tolist()}
            )
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def check_finished_run(run, uri: str, framework: str, workers: int, steps: int, started: float) -> None:
    """Everything a FINISHED measured run must carry (2 ranks or 1, CIFAR-10 archive, one epoch)."""
    assert (run.experiment, run.status, run.source) == ("measured", "FINISHED", "measured")
    assert (run.model, run.framework, run.workers, run.device, run.data, run.batch_per_worker, run.platform) == (
        "resnet50",
        framework,
        workers,
        "cpu",
        "cifar10",
        4,
        "test-box",
    )
    assert run.seed == 1337 and run.epochs == 1 and run.device_type == "cpu"
    for name in RUN_METRICS | {"accuracy_train", "accuracy_test"}:
        assert np.isfinite(run[name]), name
    assert run.measured_steps == steps - 3 and run.throughput_total > 0
    assert run.throughput_per_worker == pytest.approx(run.throughput_total / workers)
    assert run.throughput_ci95_low <= run.throughput_mean <= run.throughput_ci95_high
    assert 0 < run.time_init_s < run.time_total_s < time.monotonic() - started + 1
    assert run.time_work_s == pytest.approx(run.time_total_s - run.time_init_s)
    assert 0 < run.time_launch_s < run.time_init_s
    assert 0 <= run.accuracy_train <= 1 and 0 <= run.accuracy_test <= 1
    series = load_series([run.run_id], ["step_throughput_total"], uri)
    assert series.step.tolist() == list(range(steps))
    assert (series.timestamp_ms.diff().dropna() >= 0).all() and (series.value > 0).all()
    files = artifacts(uri, run.run_id)
    assert {"config/config.yaml", "environment/environment.json", "result/result.json"} <= files
    assert {f"logs/rank-logs/rank.{r}/stdout" for r in range(workers)} <= {f.rsplit("/", 1)[0] for f in files}, files
    assert "logs/launcher.log/launcher.log" in files, files


def test_tensorflow_two_ranks_record_one_finished_run(tmp_path, uri, cifar_archive):
    # 64 images over 2 ranks, batch 4: 8 steps per epoch; 1 epoch = 3 warm-up + 5 measured steps
    started = time.monotonic()
    proc = train(
        tmp_path,
        "framework=tensorflow",
        "model=resnet50",
        "data=cifar10",
        f"data.path={cifar_archive}",
        "epochs=1",
        *TINY,
        uri=uri,
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    runs = load_runs(uri)
    assert len(runs) == 1
    check_finished_run(runs.iloc[0], uri, "tensorflow", 2, 8, started)
    assert runs.iloc[0]["data.path"] == str(cifar_archive)
    assert job_processes(tmp_path) == []


def test_mxnet_sweep_of_an_experiment_records_one_run_per_job(tmp_path, uri, cifar_archive):
    # figure 6's sweep cut to MXNet and ResNet-50: 1 rank (16 steps of 4 images) and 2 ranks (8 steps each)
    started = time.monotonic()
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    args = [
        sys.executable,
        "-m",
        "scalestudy.train",
        "-m",
        "experiment=figure-6",
        f"hydra.sweep.dir={tmp_path / 'job'}",
        "hydra.sweeper.params.framework=mxnet",
        "hydra.sweeper.params.model=resnet50",
        f"data.path={cifar_archive}",
        "epochs=1",
        *[o for o in TINY if not o.startswith("workers=")],
    ]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    runs = load_runs(uri).sort_values("workers")
    assert runs.workers.tolist() == [1, 2] and set(runs.study) == {"figure-6"}
    for run, steps in zip(runs.itertuples(index=False), (16, 8)):
        check_finished_run(runs[runs.run_id == run.run_id].iloc[0], uri, "mxnet", run.workers, steps, started)
    assert sorted(p.name for p in (tmp_path / "job").iterdir() if p.is_dir()) == [
        "0_resnet50_mxnet_w1",
        "1_resnet50_mxnet_w2",
    ]
    assert job_processes(tmp_path) == []


def test_a_killed_rank_ends_as_a_failed_run_with_logs_and_no_orphans(tmp_path, uri):
    proc = train(
        tmp_path,
        "framework=tensorflow",
        "model=resnet50",
        "data=synthetic",
        "steps=5",
        "fault.kill_rank=1",
        "fault.at_step=3",
        *TINY,
        uri=uri,
    )
    assert proc.returncode != 0
    assert "FAILED" in proc.stderr + proc.stdout
    runs = load_runs(uri)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert (run.status, run.source, run.workers, run.framework) == ("FAILED", "measured", 2, "tensorflow")
    assert "exited with code" in run.failure or "timeout" in run.failure
    assert "throughput_total" not in runs.columns or not np.isfinite(run.get("throughput_total", np.nan))
    files = artifacts(uri, run.run_id)
    assert any(f.startswith("logs/rank-logs/rank.1/") for f in files), files
    logs = tmp_path / "job" / "rank-logs"
    assert "fault injection: rank 1 kill at step 3" in "".join(p.read_text() for p in logs.rglob("*") if p.is_file())
    assert job_processes(tmp_path) == []


def test_a_hanging_rank_is_killed_at_the_timeout(tmp_path, uri):
    started = time.monotonic()
    proc = train(
        tmp_path,
        "framework=mxnet",
        "model=resnet50",
        "data=synthetic",
        "steps=5",
        "fault.kill_rank=0",
        "fault.at_step=4",
        "fault.mode=hang",
        *TINY,
        "timeout_s=45",
        "cluster.kill_grace_s=2",
        uri=uri,
    )
    assert proc.returncode != 0
    assert time.monotonic() - started < 45 + 40  # the timeout, the kill grace, and logging the run
    run = load_runs(uri).iloc[0]
    assert run.status == "FAILED" and run.failure.startswith("timeout")
    assert job_processes(tmp_path) == []


def test_unknown_choice_lists_the_valid_ones_and_creates_no_run(tmp_path, uri):
    proc = train(tmp_path, "model=resnet9000", uri=uri)
    assert proc.returncode != 0
    assert "Could not find 'model/resnet9000'" in proc.stderr and "Available options in 'model'" in proc.stderr
    assert "resnet50" in proc.stderr and "inception3" in proc.stderr
    assert not Path(uri[len("sqlite:///") :]).exists() or load_runs(uri).empty
    assert not (tmp_path / "job").exists()


def test_a_local_jobs_ranks_talk_over_loopback_only(tmp_path, uri):
    """cluster=local sets Gloo's interface to lo: every socket of the ranks is on 127.0.0.1. What stays exposed is
    the rendezvous server horovodrun itself starts (Horovod 0.28.1 binds it to every interface; README)."""
    import psutil

    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    args = [sys.executable, "-m", "scalestudy.train", f"hydra.run.dir={tmp_path / 'job'}", "framework=tensorflow",
            "model=resnet50", "data=synthetic", "steps=40", *TINY]  # fmt: skip
    job = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ranks, launcher = {}, set()
    while job.poll() is None:
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if str(tmp_path / "job") not in cmd and "horovodrun" not in cmd:
                continue
            try:
                conns = proc.net_connections(kind="inet")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if (proc.info["cmdline"] or [""])[1:3] == [
                "-m",
                "scalestudy.harness.runners",
            ]:  # python -m scalestudy.harness.runners
                ranks.setdefault(proc.pid, set()).update(c.laddr.ip for c in conns)
            elif "horovodrun" in cmd:
                launcher.update(c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN)
        time.sleep(0.5)
    assert job.returncode == 0, job.stderr.read()[-3000:]
    assert len(ranks) == 2 and any(ranks.values()), ranks  # both ranks seen, with their Gloo connections
    assert set().union(*ranks.values()) == {"127.0.0.1"}, ranks
    assert launcher <= {"0.0.0.0", "127.0.0.1"}
