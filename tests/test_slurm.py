"""Slurm, for real: a one-node cluster on this machine (tests/slurm_cluster.py), submitit, Hydra's submitit
launcher with the repository's conf/cluster/slurm.yaml, and the srun command of scalestudy.harness.slurm.

The unit tests at the top need no Slurm; the integration tests share one cluster for the session.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from helpers import load_script
from omegaconf import OmegaConf

import scalestudy.config  # noqa: F401  (registers train.yaml's schema, train_schema, as composing it needs)
from scalestudy.harness.slurm import commands as slurm
from scalestudy.store import load_runs

REPO = Path(__file__).resolve().parents[1]
cluster_tool = load_script("cluster")  # scripts/cluster.py: the rehearsal cluster (make cluster-up)


def need_submitit_launcher():
    """cluster=slurm needs hydra-submitit-launcher (and submitit): missing is a failure that says how to fix it."""
    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        pytest.fail(
            f"hydra-submitit-launcher is not installed in {sys.prefix}: conf/cluster/slurm.yaml needs it "
            "(it is in requirements.lock; install it with: uv pip install -c requirements.lock "
            "hydra-submitit-launcher, or add it to the test extra)",
            pytrace=False,
        )


def cfg(**over):
    base = {
        "workers": 4,
        "device": "gpu",
        "cluster": {
            "nodes": 2,
            "gpus_per_node": 2,
            "tasks_per_node": 2,
            "cpus_per_node": 16,
            "rendezvous": "gloo",
            "mpi": "pmix",
            "container_runtime": "singularity",
            "bind": [],
            "extra_args": [],
        },
    }
    conf = OmegaConf.create(base)
    for key, value in over.items():
        OmegaConf.update(conf, key, value, force_add=True)
    return conf


# --------------------------------------------------------------------------------------------
# Command lines and environments (pure)


def test_srun_command_one_rank_per_gpu_in_the_image():
    cmd = slurm.srun_command(
        cfg(),
        ["-m", "scalestudy.harness.runners", "/j/config.yaml"],
        image="/img/scalestudy.sif",
        log_dir="/j/rank-logs",
        binds=["/j"],
    )
    assert cmd[0] == "srun" and "--overlap" in cmd and "--kill-on-bad-exit=1" in cmd
    assert {
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--cpus-per-task=8",
        "--gpus-per-node=2",
        "--distribution=block",
        "--relative=0",
        "--mpi=none",
    } <= set(cmd)
    exec_at = cmd.index("singularity")
    assert cmd[exec_at : exec_at + 6] == ["singularity", "exec", "--nv", "--bind", "/j", "/img/scalestudy.sif"]
    assert cmd[exec_at + 6 :] == [
        "python",
        "-m",
        "scalestudy.harness.slurm",
        "rank",
        "--log-dir",
        "/j/rank-logs",
        "--rendezvous",
        "gloo",
        "--",
        "python",
        "-m",
        "scalestudy.harness.runners",
        "/j/config.yaml",
    ]


def test_srun_command_uses_few_nodes_and_this_python_without_image():
    cmd = slurm.srun_command(cfg(workers=2, device="cpu", **{"cluster.gpus_per_node": None}), ["-c", "pass"])
    assert {"--nodes=1", "--ntasks=2", "--ntasks-per-node=2"} <= set(cmd)
    assert not any(a.startswith("--gpus") for a in cmd) and "--nv" not in cmd
    assert cmd[-3:] == [sys.executable, "-c", "pass"]


def test_srun_command_mpi_rendezvous_asks_srun_for_pmix():
    cmd = slurm.srun_command(cfg(**{"cluster.rendezvous": "mpi"}), ["-c", "pass"], image="x.sif")
    assert "--mpi=pmix" in cmd and cmd[cmd.index("--rendezvous") + 1] == "mpi"


@pytest.mark.parametrize(
    "over, key",
    [
        ({"workers": 6}, "cluster.nodes"),  # 6 ranks of 2 per node: 3 nodes > 2
        ({"workers": 3}, "cluster.tasks_per_node"),  # 3 ranks: 2 + 1 is uneven
        ({"cluster.gpus_per_node": None}, "cluster.gpus_per_node"),  # device=gpu needs GPUs
        ({"cluster.tasks_per_node": 4}, "cluster.tasks_per_node"),  # more ranks than GPUs on a node
        ({"cluster.rendezvous": "ssh"}, "cluster.rendezvous"),
        ({"cluster.container_runtime": "docker"}, "cluster.container_runtime"),
    ],
)
def test_srun_command_refuses_what_cannot_work_naming_the_key(over, key):
    with pytest.raises(slurm.SlurmConfigError, match=key.replace(".", r"\.")):
        slurm.srun_command(cfg(**over), ["-c", "pass"], image="x.sif")


def test_container_runtime_may_be_the_path_of_an_executable(tmp_path, monkeypatch):
    """An executable with Apptainer's exec CLI (scripts/sif-exec) runs the ranks like singularity would."""
    stand_in = tmp_path / "sif-exec"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    conf = cfg(**{"cluster.container_runtime": str(stand_in)})
    cmd = slurm.srun_command(conf, ["-c", "pass"], image="x.sif", binds=["/j"])
    at = cmd.index(str(stand_in))
    assert cmd[at : at + 6] == [str(stand_in), "exec", "--nv", "--bind", "/j", "x.sif"]
    monkeypatch.chdir(tmp_path)  # a relative path is the driver's, made absolute for every node
    assert slurm.container_runtime(cfg(**{"cluster.container_runtime": "./sif-exec"})) == str(stand_in)
    assert slurm.container_runtime(cfg(**{"cluster.container_runtime": "apptainer"})) == "apptainer"


@pytest.mark.parametrize(
    "runtime, why",
    [
        ("docker", "is not a known runtime"),
        ("sif-exec", "is not a known runtime"),  # a bare name is not looked up on PATH: say where it is
        ("{tmp}/absent", "is not an executable file"),
        ("{tmp}/not-executable", "is not an executable file"),
        ("{tmp}", "is not an executable file"),  # a folder
    ],
)
def test_container_runtime_refuses_anything_else_naming_the_key(runtime, why, tmp_path):
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    conf = cfg(**{"cluster.container_runtime": runtime.format(tmp=tmp_path)})
    with pytest.raises(slurm.SlurmConfigError, match=rf"config cluster\.container_runtime=.* {why}"):
        slurm.srun_command(conf, ["-c", "pass"], image="x.sif")


def test_rendezvous_address_is_the_network_interfaces():
    from scalestudy.harness.slurm.job import interface_address

    assert interface_address("lo") == "127.0.0.1"
    with pytest.raises(slurm.SlurmConfigError, match=r"config cluster\.network_interface='nope0': no IPv4 address"):
        interface_address("nope0")


def test_the_first_failed_task_and_its_node_are_read_from_sruns_log(tmp_path):
    from scalestudy.harness.slurm.job import first_task_failure

    log = tmp_path / "launcher.log"
    log.write_text(
        "$ srun --overlap ...\nsrun: error: node2: task 3: Killed\nsrun: launch/slurm: _step_signal: Terminating "
        "StepId=4.1\nsrun: error: node2: task 2: Terminated\nsrun: error: node1: tasks 0-1: Terminated\n"
    )
    assert first_task_failure(log) == "; first: node2: task 3: Killed"
    log.write_text("$ srun --overlap ...\nsrun: error: Unable to create step for job 7: Invalid node name\n")
    assert first_task_failure(log) == "" and first_task_failure(tmp_path / "absent") == ""


def test_rank_env_from_slurm_ids():
    env = slurm.rank_env(
        {
            "SLURM_PROCID": "3",
            "SLURM_LOCALID": "1",
            "SLURM_NODEID": "1",
            "SLURM_STEP_NUM_TASKS": "4",
            "SLURM_STEP_NUM_NODES": "2",
            "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
            "SLURMD_NODENAME": "gpu02",
        }
    )
    assert env == {
        "HOROVOD_HOSTNAME": "gpu02",
        "HOROVOD_RANK": "3",
        "HOROVOD_SIZE": "4",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "1",
        "HOROVOD_CROSS_SIZE": "2",
    }
    with pytest.raises(KeyError, match="not inside an srun step"):
        slurm.rank_env({})


def test_host_plan_matches_block_placement_and_horovods_own():
    plan = slurm.host_plan(["a", "b"], per_node=2, size=4)
    assert [(s["hostname"], s["rank"], s["local_rank"], s["cross_rank"]) for s in plan] == [
        ("a", 0, 0, 0),
        ("a", 1, 1, 0),
        ("b", 2, 0, 1),
        ("b", 3, 1, 1),
    ]
    assert {(s["size"], s["local_size"], s["cross_size"]) for s in plan} == {(4, 2, 2)}


def test_gloo_rendezvous_env_and_slurm_lists():
    env = slurm.gloo_rendezvous_env("gpu01", 4711, interface="ib0")
    assert env == {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "gpu01",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "4711",
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": "ib0",
        "NCCL_SOCKET_IFNAME": "ib0",
    }
    assert slurm.expand_counts("2(x3),1") == [2, 2, 2, 1]


def test_cluster_slurm_config_composes_with_the_submitit_launcher():
    need_submitit_launcher()
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        conf = compose(
            "train",
            overrides=["cluster=slurm", "cluster.partition=gpu", "cluster.nodes=2", "hydra.sweep.dir=/tmp/sweep"],
            return_hydra_config=True,
        )
    launcher = OmegaConf.to_container(conf.hydra.launcher, resolve=True)
    assert launcher["_target_"] == "hydra_plugins.scalestudy_slurm.launcher.CheckedSlurmLauncher"
    from hydra.core.plugins import Plugins

    from hydra_plugins.scalestudy_slurm.launcher import CheckedSlurmLauncher

    # Hydra finds it among its plugins (only hydra_plugins.* can be a launcher), and it is submitit's Slurm launcher.
    # By name: where src/ is on the path twice (mutmut's mutants/src before the checkout's), Hydra's scan loads the
    # plugin's module again, as another class object
    found = {f"{plugin.__module__}.{plugin.__qualname__}" for plugin in Plugins.instance().discover()}
    assert launcher["_target_"] in found
    bases = [f"{base.__module__}.{base.__qualname__}" for base in CheckedSlurmLauncher.__mro__]
    assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in bases
    assert (launcher["partition"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == ("gpu", 1, 4)
    # sbatch asks for the job's 2 nodes; submitit counts ONE task (the driver) and waits for its result only
    assert launcher["additional_parameters"] == {"nodes": 2} and launcher["nodes"] == 1
    assert conf.cluster.tasks_per_node == 4 and conf.cluster.image is None


def test_cluster_rehearsal_sizes_slurm_for_the_rehearsal_clusters_two_nodes():
    """cluster=rehearsal: partition debug, two CPU nodes of 2 cores, 2 ranks per node over eth0."""
    need_submitit_launcher()
    from hydra import compose, initialize_config_dir

    from scalestudy.harness.launch import launcher_command

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        conf = compose(
            "train",
            overrides=["cluster=rehearsal", "workers=4", "hydra.sweep.dir=/tmp/sweep"],
            return_hydra_config=True,
        )
    launcher = OmegaConf.to_container(conf.hydra.launcher, resolve=True)
    assert (
        launcher["_target_"].endswith("scalestudy_slurm.launcher.CheckedSlurmLauncher")
        and "record_sweep" in conf.hydra.callbacks
    )
    asked = [launcher[k] for k in ("partition", "nodes", "tasks_per_node", "cpus_per_task", "gpus_per_node")]
    assert asked == ["debug", 1, 1, 2, None] and launcher["additional_parameters"] == {"nodes": 2}
    assert conf.cluster.network_interface == "eth0" and conf.cluster.runs_recorded_by == "submitter"
    cmd = launcher_command(conf, Path("/j/config.yaml"), Path("/j/rank-logs"))
    assert {"--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--cpus-per-task=1", "--relative=0"} <= set(cmd)


def test_cluster_tool_refuses_in_one_line_without_root_or_a_package(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cluster_tool.os, "geteuid", lambda: 1000)
    assert cluster_tool.main(["up", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scripts/cluster.py up: ") and "run it as root" in err
    monkeypatch.setattr(cluster_tool.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster_tool.shutil, "which", lambda prog, path=None: None if prog == "slurmd" else prog)
    assert cluster_tool.main(["down", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "scripts/cluster.py down: the rehearsal cluster needs Debian's slurmd: install with: apt-get update && "
        "apt-get install -y --no-install-recommends munge slurmctld slurmd slurm-client iproute2 util-linux\n"
    )
    assert cluster_tool.main(["status", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"the rehearsal cluster is down (no running cluster in {tmp_path})\n"


def test_cluster_tool_slurm_conf_puts_both_nodes_in_debug_at_their_addresses(tmp_path):
    c = cluster_tool.Cluster(root=tmp_path, name="x", subnet="10.233.41", marker="m", ctld_port=7000)
    lines = cluster_tool.slurm_conf(c).splitlines()
    assert {"SlurmctldHost=login(10.233.41.1)", "SlurmctldPort=7000", "SlurmdPort=6818"} <= set(lines)
    assert {
        "NodeName=node1 NodeAddr=10.233.41.11 NodeHostname=node1 CPUs=2 RealMemory=1000 State=UNKNOWN",
        "NodeName=node2 NodeAddr=10.233.41.12 NodeHostname=node2 CPUs=2 RealMemory=1000 State=UNKNOWN",
        "PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP",
    } <= set(lines)
    paths = [line.split("=")[-1] for line in lines if "=/" in line and not line.startswith("MailProg")]
    assert len(paths) == 7 and all(path.startswith(f"{tmp_path}/") for path in paths), paths  # one state folder
    assert (c.netns("node2"), c.bridge, c.veth("node2")) == ("x-node2", "x-br", "x-n2")


def test_slurm_time_left_is_read_from_squeue_format():
    assert slurm.parse_duration("4:58") == 298
    assert slurm.parse_duration("1:00:05") == 3605
    assert slurm.parse_duration("2-03:04:05") == ((2 * 24 + 3) * 60 + 4) * 60 + 5
    assert slurm.parse_duration("UNLIMITED") is None and slurm.parse_duration("") is None


def test_cluster_slurm_launches_the_ranks_with_srun_in_the_image():
    need_submitit_launcher()
    from hydra import compose, initialize_config_dir

    from scalestudy.harness.launch import launcher_command

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        conf = compose(
            "train",
            overrides=[
                "cluster=slurm",
                "device=gpu",
                "workers=8",
                "cluster.nodes=2",
                "cluster.image=/img/s.sif",
                "framework=mxnet",
            ],
        )
    cmd = launcher_command(conf, Path("/j/config.yaml"), Path("/j/rank-logs"))
    assert cmd[0] == "srun" and {"--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--gpus-per-node=4"} <= set(cmd)
    assert cmd[cmd.index("singularity") : cmd.index("singularity") + 6] == [
        "singularity",
        "exec",
        "--nv",
        "--bind",
        "/j",
        "/img/s.sif",
    ]
    assert cmd[-3:] == ["-m", "scalestudy.harness.runners", "/j/config.yaml"]
    assert conf.cluster.runs_recorded_by == "submitter"


# --------------------------------------------------------------------------------------------
# A real Slurm


# --------------------------------------------------------------------------------------------
# The harness itself through Slurm: a figure's sweep, and jobs that fail


def _artifact_files(uri: str, run_id: str) -> set[str]:
    from mlflow import MlflowClient

    root = Path(unquote(urlparse(MlflowClient(tracking_uri=uri).get_run(run_id).info.artifact_uri).path))
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_a_job_that_left_no_run_is_recorded_failed_from_its_config(tmp_path, empty_store, monkeypatch, capsys):
    """The submitter's side alone: a job folder with its config and Slurm log but no run.json (Slurm killed the
    driver) becomes a FAILED run naming the Slurm job, once Slurm no longer says the job runs; a folder with
    run.json is recorded as it says."""
    from hydra import compose, initialize_config_dir

    from scalestudy.harness.slurm import sweep
    from scalestudy.harness.slurm.sweep import record_sweep

    # What squeue says of job 7 is the test's: this machine's own Slurm (a cluster's login node, or the one-node
    # Slurm `make test` starts) may hold a job 7 of its own, which made this test fail once.
    states = {"7": "RUNNING"}
    monkeypatch.setattr(sweep, "squeue", lambda job_id, field: states.get(job_id) if field == "%T" else None)

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        conf = compose("train", overrides=["cluster=slurm", "workers=2", "model=vgg16", "platform=test"])
    job = tmp_path / "sweep" / "0_vgg16_tensorflow_w2"
    job.mkdir(parents=True)
    log = tmp_path / "sweep" / ".submitit" / "7_0" / "7_0_0_log.err"
    log.parent.mkdir(parents=True)
    log.write_text("slurmstepd: error: *** JOB 7 ON localhost CANCELLED DUE TO TIME LIMIT ***\n")
    job_cfg = OmegaConf.create(OmegaConf.to_container(conf, resolve=True))
    job_cfg.launch = {
        "job_dir": str(job),
        "result_file": str(job / "result.json"),
        "slurm": {"SLURM_JOB_ID": "7", "stderr": str(log)},
    }
    (job / "config.yaml").write_text(OmegaConf.to_yaml(job_cfg))  # as the driver writes it at its start
    uri = empty_store  # tmp_path/store.db, its tables already made
    assert record_sweep(tmp_path / "sweep", uri) == []  # Slurm says it still runs: recorded later
    assert "0_vgg16_tensorflow_w2: its Slurm job is still running; record it later" in capsys.readouterr().err
    states.clear()
    (done,) = record_sweep(tmp_path / "sweep", uri)
    assert done["status"] == "FAILED" and "Slurm job 7 ended without recording its run" in done["failure"]
    (run,) = load_runs(uri).itertuples()
    assert (run.model, run.workers, run.status, run.platform) == ("vgg16", 2, "FAILED", "test")
    assert "slurm/7_0_0_log.err/7_0_0_log.err" in _artifact_files(uri, run.run_id)  # one folder per file
    assert record_sweep(tmp_path / "sweep", uri) == []
    # What MLflow's UI shows as the descriptions of the run (its job folder) and of its experiment.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    note = client.get_run(run.run_id).data.tags["mlflow.note.content"]
    assert note.startswith(f"Measured run: `python -m scalestudy.train (no overrides)`, job folder `{job.resolve()}`")
    assert "FAILED: Slurm job 7 ended without recording its run" in note
    described = client.get_experiment_by_name(run.experiment).tags["mlflow.note.content"]
    assert described.startswith("Measured runs: this repository's training harness")
    assert "- Used by: figure-1, figure-2, figure-5, figure-6, figure-9, table-2, table-3" in described
