"""The launcher without Horovod: its command line, and that a timeout leaves no process behind."""

import os
import sys
import time

import pytest
from omegaconf import OmegaConf

from scalestudy.harness import launch


def config(**over):
    cfg = OmegaConf.create(
        {
            "workers": 2,
            "device": "cpu",
            "timeout_s": 60,
            "threads_per_rank": None,
            "framework": {"runner": {"_target_": "scalestudy.harness.runners.tensorflow.train"}},
            "cluster": {
                "launcher": "horovodrun",
                "hosts": "localhost:2",
                "network_interface": None,
                "extra_args": ["--verbose"],
                "kill_grace_s": 1,
            },
        }
    )
    return OmegaConf.merge(cfg, over)


def test_launcher_command_is_horovodrun_over_gloo(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, "_tool", lambda name, python=None: f"/venv/bin/{name}")
    cmd = launch.launcher_command(config(), tmp_path / "config.yaml", tmp_path / "logs")
    assert cmd == [
        "/venv/bin/horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        "--output-filename",
        str(tmp_path / "logs"),
        "--verbose",
        sys.executable,
        "-m",
        "scalestudy.harness.runners",
        str(tmp_path / "config.yaml"),
    ]
    one = launch.launcher_command(config(workers=1, cluster={"hosts": "localhost:1"}), tmp_path / "c.yaml", tmp_path)
    assert "--output-filename" not in one and one[1:5] == ["-np", "1", "-H", "localhost:1"]
    with pytest.raises(launch.LaunchError, match=r"cluster\.launcher='mpirun'"):
        launch.launcher_command(config(cluster={"launcher": "mpirun"}), tmp_path / "c.yaml", tmp_path)


def test_mxnet_gpu_ranks_run_in_their_own_environment(monkeypatch, tmp_path):
    """The GPU image's MXNet runs in /opt/venv-mxnet (CUDA 11), named by SCALESTUDY_MXNET_GPU_PYTHON through
    conf/framework/mxnet.yaml: its python runs the ranks and its horovodrun starts them, for device=gpu only."""
    from scalestudy.config import compose

    venv = tmp_path / "venv-mxnet" / "bin"
    venv.mkdir(parents=True)
    for tool in ("python", "horovodrun"):
        (venv / tool).touch()
    monkeypatch.setenv("SCALESTUDY_MXNET_GPU_PYTHON", str(venv / "python"))
    assert compose("train", ["framework=mxnet"]).framework.gpu_python == str(venv / "python")
    monkeypatch.delenv("SCALESTUDY_MXNET_GPU_PYTHON")
    assert compose("train", ["framework=mxnet"]).framework.gpu_python is None

    mxnet = {"framework": {"gpu_python": str(venv / "python")}}
    gpu = launch.launcher_command(config(device="gpu", **mxnet), tmp_path / "c.yaml", tmp_path / "logs")
    assert gpu[0] == str(venv / "horovodrun") and gpu[-4:-2] == [str(venv / "python"), "-m"]
    assert launch.rank_python(config(**mxnet)) is None  # device=cpu: the driver's own interpreter
    missing = {"framework": {"gpu_python": str(tmp_path / "nowhere" / "python")}}
    with pytest.raises(launch.LaunchError, match=r"framework\.gpu_python=.*nowhere/python: no such interpreter"):
        launch.launcher_command(config(device="gpu", **missing), tmp_path / "c.yaml", tmp_path)


def test_rank_logs_are_split_from_the_launcher_log_where_missing(tmp_path):
    (tmp_path / launch.LAUNCHER_LOG).write_text(
        "$ horovodrun ...\n[0]<stdout>:hello\n[0]<stderr>:warn\n[1]<stdout>:other\n[0]<stdout>:bye\nplain\n"
    )
    (tmp_path / launch.LOG_DIR / "rank.1").mkdir(parents=True)
    (tmp_path / launch.LOG_DIR / "rank.1" / "stdout").write_text("written by the launcher\n")
    logs = launch.collect_logs(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in logs] == [
        "launcher.log",
        "rank-logs/rank.0/stderr",
        "rank-logs/rank.0/stdout",
        "rank-logs/rank.1/stdout",
    ]
    assert (tmp_path / "rank-logs/rank.0/stdout").read_text() == "hello\nbye\n"
    assert (tmp_path / "rank-logs/rank.1/stdout").read_text() == "written by the launcher\n"


def test_cpu_ranks_share_the_cores_and_see_no_gpu(monkeypatch):
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 8)
    env = launch.rank_environment(config(), "job-1")
    assert env[launch.JOB_ID_ENV] == "job-1" and env["CUDA_VISIBLE_DEVICES"] == ""
    # 8 cores shared by the 2 local ranks (hosts localhost:2): 4 threads each, for OpenMP and MXNet alike
    assert (env["OMP_NUM_THREADS"], env["MXNET_CPU_WORKER_NTHREADS"]) == ("4", "4")
    assert launch.rank_environment(config(threads_per_rank=3), "job-1")["OMP_NUM_THREADS"] == "3"
    one = config(workers=1, cluster={"hosts": "localhost:1"})
    assert launch.rank_environment(one, "job-1")["OMP_NUM_THREADS"] == "8"
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 1)
    assert launch.rank_environment(config(), "job-1")["OMP_NUM_THREADS"] == "1"  # never 0
    gpu = launch.rank_environment(config(device="P100"), "job-1")  # a GPU run keeps the GPUs it was given
    assert gpu.get("CUDA_VISIBLE_DEVICES") == os.environ.get("CUDA_VISIBLE_DEVICES")


def test_timeout_kills_the_group_and_processes_that_left_it(monkeypatch, tmp_path):
    """A "launcher" that starts one child in its group, one in a new session (still its child), and one rank
    daemonised as launchers' helpers do: forked by a subshell that exits (so the launcher is not its parent), in
    a session of its own (so not in the launcher's process group), which only the job id in its environment
    leads to; and one orphan left in the launcher's group without the job id (only the group kill reaches it).
    The timeout kills all four."""
    psutil = pytest.importorskip("psutil", reason="psutil is in the test and training environments")
    pidfile, escaped, launcher = tmp_path / "pids", tmp_path / "escaped", tmp_path / "launcher"
    script = (
        f"echo $$ > {launcher}; sleep 300 & echo $! >> {pidfile}; setsid sleep 301 & echo $! >> {pidfile}; "
        f"( setsid sleep 302 </dev/null >/dev/null 2>&1 & echo $! > {escaped} ); "
        f"( env -i sleep 303 </dev/null >/dev/null 2>&1 & echo $! >> {pidfile} ); "
        f'p=$(cat {escaped}); for i in $(seq 100); do [ "$(ps -o sid= -p $p | tr -d \' \')" = "$p" ] && break; '
        f"sleep 0.05; done; ps -o ppid=,sid= -p $p > {tmp_path / 'where'}; wait"
    )
    monkeypatch.setattr(launch, "launcher_command", lambda cfg, rank_config, log_dir: ["bash", "-c", script])
    started = time.monotonic()
    outcome = launch.run_job(config(timeout_s=2), tmp_path, tmp_path / "config.yaml")
    assert time.monotonic() - started < 15
    assert outcome.status == "FAILED" and outcome.reason.startswith("timeout") and outcome.returncode is None
    assert outcome.leftover_pids == []
    pid, launcher_pid = int(escaped.read_text()), int(launcher.read_text())
    ppid, sid = map(int, (tmp_path / "where").read_text().split())
    assert ppid != launcher_pid and sid == pid != launcher_pid  # it really left the launcher's tree and group
    pids = [int(p) for p in pidfile.read_text().split()] + [pid]
    assert len(pids) == 4
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    assert outcome.logs == [tmp_path / launch.LAUNCHER_LOG]


def test_a_launcher_that_exits_0_without_a_result_is_a_failure(monkeypatch, tmp_path):
    pytest.importorskip("psutil", reason="psutil is in the test and training environments")
    monkeypatch.setattr(launch, "launcher_command", lambda cfg, rank_config, log_dir: ["true"])
    outcome = launch.run_job(config(), tmp_path, tmp_path / "config.yaml")
    assert outcome.status == "FAILED" and "wrote no" in outcome.reason and outcome.returncode == 0


def test_profile_timeline_points_horovod_at_the_job_folder(tmp_path):
    assert launch.profile_environment(config(profile="none"), tmp_path) == {}
    assert launch.profile_environment(config(profile="tf"), tmp_path) == {}
    env = launch.profile_environment(config(profile="timeline"), tmp_path)
    assert env == {"HOROVOD_TIMELINE": str(tmp_path.resolve() / launch.TIMELINE_FILE)}


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["profile=perf"], "config profile='perf': choose none, timeline, tf, mxnet"),
        (["framework=mxnet", "profile=tf"], "profiler of the other framework"),
        (["profile=mxnet"], "profiler of the other framework"),
        (["profile=tf", "profile_steps=0"], "config profile_steps=0"),
    ],
)
def test_profile_settings_that_cannot_work_are_refused(overrides, key):
    from scalestudy.config import compose
    from scalestudy.harness.job_config import check_config

    with pytest.raises(ValueError, match=key):
        check_config(compose("train", overrides))
