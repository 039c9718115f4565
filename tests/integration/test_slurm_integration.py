"""The end-to-end tests of tests/test_slurm.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from test_slurm import _artifact_files, cfg, need_submitit_launcher

from scalestudy.harness.slurm import commands as slurm
from scalestudy.store import load_runs

APP = REPO / "tests" / "slurm_app" / "app.py"


# A Python with Horovod for the real Horovod test: this one, else the training environment beside it.
TRAIN_PYTHON = Path(sys.executable) if importlib.util.find_spec("horovod") else REPO / ".venv-train" / "bin" / "python"


def test_sinfo_and_srun_hostname(slurm_cluster):
    """Two idle nodes; an srun from the login side runs tasks on both, each with its node's own hostname."""
    info = slurm_cluster.run("sinfo", "--noheader", "--format=%P %a %D %t").stdout.split()
    assert info == ["debug*", "up", "2", "idle"]
    out = slurm_cluster.run("srun", "--nodes=2", "--ntasks=4", "--label", "hostname").stdout.splitlines()
    tasks = dict(line.split(": ") for line in out)
    assert tasks == {"0": "node1", "1": "node1", "2": "node2", "3": "node2"}


def _executor(slurm_cluster, folder):
    need_submitit_launcher()
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(
        slurm_partition=slurm_cluster.partition, timeout_min=2, cpus_per_task=1, tasks_per_node=1, nodes=1
    )
    return executor


def test_submitit_job_result_comes_back(slurm_cluster, tmp_path):
    executor = _executor(slurm_cluster, tmp_path / "submitit")

    def work(a, b):
        import os

        return a * b, os.environ["SLURM_JOB_ID"]

    job = executor.submit(work, 6, 7)
    product, job_id = job.result()
    assert product == 42 and job_id == job.job_id
    assert slurm_cluster.wait_job(job.job_id)["JobState"] == "COMPLETED"


def test_failing_job_is_reported_failed_with_its_log(slurm_cluster, tmp_path):
    import submitit

    executor = _executor(slurm_cluster, tmp_path / "submitit")

    def broken():
        print("about to fail", flush=True)
        raise ValueError("broken on purpose")

    job = executor.submit(broken)
    with pytest.raises(submitit.core.utils.FailedJobError, match="broken on purpose"):
        job.result()
    info = slurm_cluster.wait_job(job.job_id)
    assert info["JobState"] == "FAILED" and info["ExitCode"] != "0:0"
    assert "about to fail" in job.paths.stdout.read_text()
    assert "ValueError: broken on purpose" in job.paths.stderr.read_text()  # Slurm's log of the job


def _multirun(tmp_path, *overrides):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HYDRA_FULL_ERROR="1")
    return subprocess.run(
        [
            sys.executable,
            str(APP),
            "-m",
            f"hydra.searchpath=[file://{REPO / 'conf'}]",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "cluster.partition=debug",
            "cluster.gpus_per_node=null",
            "cluster.tasks_per_node=2",
            "cluster.cpus_per_node=2",
            "cluster.timeout_min=5",
            *overrides,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_hydra_multirun_through_slurm_starts_each_jobs_ranks_with_srun(slurm_cluster, tmp_path):
    need_submitit_launcher()
    proc = _multirun(tmp_path, "workers=1,2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:] + slurm_cluster.log_tails()
    results = {}
    for path in sorted((tmp_path / "sweep").glob("*_w*/result.json")):
        result = json.loads(path.read_text())
        results[result["workers"]] = result
    assert sorted(results) == [1, 2], proc.stderr[-3000:]
    job_ids = set()
    for workers, result in results.items():
        assert result["returncode"] == 0, result["srun_output"]
        ranks = result["ranks"]
        assert sorted(ranks) == [f"rank.{r}" for r in range(workers)]
        for name, env in ranks.items():
            rank = int(name.split(".")[1])
            assert env["HOROVOD_RANK"] == env["SLURM_PROCID"] == str(rank)
            assert env["HOROVOD_SIZE"] == env["HOROVOD_LOCAL_SIZE"] == str(workers)
            assert env["HOROVOD_LOCAL_RANK"] == str(rank) and env["HOROVOD_CROSS_SIZE"] == "1"
        job_ids |= {env["SLURM_JOB_ID"] for env in ranks.values()}
    assert len(job_ids) == 2  # one Slurm job per sweep job; ranks ran as a step inside it
    for job_id in job_ids:
        assert slurm_cluster.wait_job(job_id)["JobState"] == "COMPLETED"


def test_hydra_multirun_failed_task_fails_the_sweep_not_the_slurm_job(slurm_cluster, tmp_path):
    """Hydra's submitit launcher catches the task's exception inside the job and raises it in the submitting
    process: the sweep fails loudly, naming the error, while Slurm sees a job that COMPLETED. So the Slurm
    state is not where a failed run shows: the harness records it as a FAILED MLflow run."""
    need_submitit_launcher()
    proc = _multirun(tmp_path, "workers=1", "fail=true")
    assert proc.returncode != 0
    assert "RuntimeError: job with workers=1 asked to fail" in proc.stderr
    (job_dir,) = [p for p in (tmp_path / "sweep" / ".submitit").iterdir() if p.is_dir()]
    assert slurm_cluster.wait_job(job_dir.name)["JobState"] == "COMPLETED"
    assert "Job completed successfully" in (job_dir / f"{job_dir.name}_0_log.out").read_text()
    assert json.loads((tmp_path / "sweep" / "0_w1" / "result.json").read_text())["returncode"] == 0


@pytest.mark.skipif(not TRAIN_PYTHON.exists(), reason=f"no Horovod: neither {sys.executable} nor .venv-train has it")
def test_horovod_gloo_allreduce_across_two_nodes_with_our_rendezvous(slurm_cluster, tmp_path):
    """Two Horovod ranks, one per node, started by srun_command inside an allocation (salloc), find each other
    through rendezvous_command's server on the login host and allreduce over the nodes' eth0."""
    probe = subprocess.run([str(TRAIN_PYTHON), "-c", "import horovod.tensorflow"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f".venv-train has no working Horovod yet: {probe.stderr.strip()[-300:]}")
    nodes = list(slurm_cluster.nodes)
    server = subprocess.Popen(
        slurm.rendezvous_command(nodes, 1, 2, python=str(TRAIN_PYTHON), bind=slurm_cluster.login_addr),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        port = int(server.stdout.readline())  # the server's first line: its port
        program = (
            "import socket, horovod.tensorflow as hvd, tensorflow as tf; hvd.init();"
            "x = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum);"
            "print('rank', hvd.rank(), 'of', hvd.size(), 'on', socket.gethostname(), 'sum', float(x[0]))"
        )
        one_per_node = {"cluster.gpus_per_node": None, "cluster.cpus_per_node": 2, "cluster.tasks_per_node": 1}
        conf = cfg(workers=2, device="cpu", **one_per_node)
        cmd = slurm.srun_command(conf, ["-c", program], log_dir=tmp_path / "rank-logs", python=str(TRAIN_PYTHON))
        allocation = ["salloc", "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=2", "--time=3"]
        env = dict(
            slurm_cluster.env,
            **slurm.gloo_rendezvous_env(slurm_cluster.login_addr, port, interface="eth0"),
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        step = subprocess.run(allocation + cmd, env=env, capture_output=True, text=True, timeout=180)
        logs = {
            p.parent.name + "/" + p.name: p.read_text()
            for p in sorted((tmp_path / "rank-logs").rglob("*"))
            if p.is_file()
        }
        assert step.returncode == 0, step.stdout + step.stderr + json.dumps(logs, indent=1)[-4000:]
        for rank, node in enumerate(nodes):
            assert f"rank {rank} of 2 on {node} sum 3.0" in logs[f"rank.{rank}/stdout"], logs
    finally:
        server.terminate()
        server.wait(timeout=10)


def _need_training_python():
    if subprocess.run([str(TRAIN_PYTHON), "-c", "import horovod.tensorflow"], capture_output=True).returncode:
        pytest.fail(f"{TRAIN_PYTHON} has no working Horovod: run `make train-env`", pytrace=False)


def _train_sweep(slurm_cluster, tmp_path, uri, overrides: str, timeout=600):
    """`python -m scalestudy.train -m cluster=slurm ... OVERRIDES` as a user on the login node would type it."""
    env = dict(slurm_cluster.env, MLFLOW_TRACKING_URI=uri, HYDRA_FULL_ERROR="1", TF_CPP_MIN_LOG_LEVEL="2")
    fixed = (
        f"cluster=slurm hydra.sweep.dir={tmp_path / 'sweep'} cluster.partition={slurm_cluster.partition} "
        "cluster.gpus_per_node=null cluster.tasks_per_node=2 cluster.cpus_per_node=2 batch_per_worker=4 "
        "data.image_size=32 platform=test-slurm min_measured_steps=3"
    )
    args = [str(TRAIN_PYTHON), "-m", "scalestudy.train", "-m", *fixed.split(), *overrides.split()]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def test_figure_sweep_on_slurm_lands_in_mlflow_and_redraws_the_figure(slurm_cluster, tmp_path):
    """Figure 1's sweep, cut to one model and synthetic images: a 1-rank and a 2-rank Slurm job, each starting
    its Horovod ranks with srun; the submitter records both runs; figure 1 redraws from them."""
    _need_training_python()
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    overrides = "experiment=figure-1 hydra.sweeper.params.model=resnet50 data=synthetic data.num_images=64"
    proc = _train_sweep(slurm_cluster, tmp_path, uri, overrides + " warmup_steps=2 cluster.timeout_min=8")
    assert proc.returncode == 0, proc.stderr[-5000:] + slurm_cluster.log_tails()
    assert "2 run(s) of" in proc.stderr
    runs = load_runs(uri).sort_values("workers")
    assert runs.workers.tolist() == [1, 2] and set(runs.status) == {"FINISHED"}
    assert set(runs.study) == {"figure-1"} and set(runs.source) == {"measured"}
    assert set(runs["cluster.launcher"]) == {"srun"} and set(runs.platform) == {"test-slurm"}
    # 64 images of 4 per step: 16 steps on 1 rank, 8 on each of 2 (2 of them warm-up)
    assert runs.measured_steps.tolist() == [14, 6] and (runs.throughput_total > 0).all()
    for run in runs.itertuples():
        files = _artifact_files(uri, run.run_id)
        assert {f"logs/rank-logs/rank.{r}/stdout" for r in range(run.workers)} <= {f.rsplit("/", 1)[0] for f in files}
        slurm_logs = [f for f in files if f.startswith("slurm/") and f.endswith("_log.err")]
        assert slurm_logs, files  # the Slurm job's own log, as submitit wrote it
        assert "srun --overlap" in (tmp_path / "sweep" / Path(run.job_dir).name / "launcher.log").read_text()
    # the ranks of the 2-rank job were one srun step of its Slurm job, and found each other (Gloo)
    two = json.loads((Path(runs.iloc[1].job_dir) / "result.json").read_text())
    assert len(two["ranks"]) == 2
    # the figure, from these runs only
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    build = subprocess.run(
        [sys.executable, "-m", "scalestudy.paper", "figure-1", "source=measured", f"out_dir={tmp_path / 'paper'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    sidecar = json.loads((tmp_path / "paper" / "figures" / "figure-1.json").read_text())
    assert sorted(r["run_id"] for r in sidecar["mlflow_runs"]) == sorted(runs.run_id)
    assert (tmp_path / "paper" / "figures" / "figure-1.pdf").stat().st_size > 1000
    # recording the sweep again adds nothing
    from scalestudy.harness.slurm.sweep import record_sweep

    assert record_sweep(tmp_path / "sweep", uri) == [] and len(load_runs(uri)) == 2


def test_failed_slurm_jobs_are_failed_runs_with_their_slurm_log(slurm_cluster, tmp_path):
    """A crashed rank (workers=2, rank 1 killed) and a bad override (workers=3 on 2 tasks per node): the
    sweep fails loudly, and both jobs are FAILED runs with the reason and the Slurm log, none FINISHED."""
    _need_training_python()
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    overrides = "workers=2,3 data=synthetic steps=4 warmup_steps=2 fault.kill_rank=1 fault.at_step=2"
    proc = _train_sweep(slurm_cluster, tmp_path, uri, overrides + " cluster.timeout_min=5 timeout_s=240")
    assert proc.returncode != 0 and "FAILED" in proc.stderr
    runs = load_runs(uri).sort_values("workers")
    assert runs.workers.tolist() == [2, 3] and set(runs.status) == {"FAILED"}, runs[["workers", "status"]]
    crashed, refused = runs.iloc[0], runs.iloc[1]
    assert "exited with code" in crashed.failure
    assert "cluster.tasks_per_node" in refused.failure and "launch refused" in refused.failure
    for run in (crashed, refused):
        files = _artifact_files(uri, run.run_id)
        assert any(f.startswith("slurm/") for f in files), files
    assert any(f.startswith("logs/rank-logs/rank.1/") for f in _artifact_files(uri, crashed.run_id))


def test_a_job_at_slurms_time_limit_is_stopped_and_recorded_failed(slurm_cluster, tmp_path):
    """A hanging rank in a job with a 2-minute Slurm limit: the driver stops the ranks before submitit's SIGUSR2
    (asked for 20 s before the limit; Slurm may send it 60 s earlier still) ends it, although timeout_s is
    30 min, and the run is FAILED, naming the limit.
    (Without that margin submitit ends the driver first; the submitter then records the job as FAILED from its
    config: test_a_job_that_left_no_run_is_recorded_failed_from_its_config.)"""
    _need_training_python()
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    hang = "workers=1 data=synthetic steps=4 warmup_steps=2 fault.kill_rank=0 fault.at_step=1 fault.mode=hang"
    limit = "cluster.timeout_min=2 cluster.signal_delay_s=20 cluster.kill_grace_s=2"
    proc = _train_sweep(slurm_cluster, tmp_path, uri, f"{hang} {limit}")
    assert proc.returncode != 0
    (run,) = load_runs(uri).itertuples()
    assert run.status == "FAILED" and "the Slurm job's time limit" in run.failure, run.failure
    assert any(f.startswith("slurm/") for f in _artifact_files(uri, run.run_id))
