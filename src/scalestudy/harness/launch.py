"""Start the ranks of one training job, watch them, and say what happened.

- `launcher_command` is the ONE place that knows how ranks are started: horovodrun over Gloo for
  cluster=local, one srun step inside the allocation for cluster=slurm (slurm/commands.py).
- `run_job` starts that command in its own process group, enforces timeout_s by killing the whole
  group (and any process that carries this job's id in its environment, so ranks that a launcher
  moved to another session die too: no orphans), collects the launcher's and every rank's log,
  and reads rank 0's result file.

Nothing here imports a framework or MLflow: the driver (driver.py) turns a JobOutcome into one MLflow run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

JOB_ID_ENV = "SCALESTUDY_JOB_ID"
RESULT_FILE = "result.json"
LOG_DIR = "rank-logs"
LAUNCHER_LOG = "launcher.log"
TIMELINE_FILE = "horovod_timeline.json"  # profile=timeline: Horovod's coordinator (rank 0) writes it
PROFILE_DIR = "profile"  # profile=tf|mxnet: each rank's profiler output, in rank-N/
# What every rank runs: the framework's runner (cfg.framework.runner._target_) on the job's config file.
RANK_PROGRAM = ["-m", "scalestudy.harness.runners"]
SLURM_RECORD_MARGIN_S = 20.0  # time kept back from the Slurm limit to kill the ranks and record the run
SLURM_SIGNAL_SLACK_S = 60.0  # Slurm sends a job's --signal up to this much earlier than asked


class LaunchError(RuntimeError):
    """The job cannot be started as configured (names the config key)."""


@dataclass
class JobOutcome:
    status: str  # FINISHED | FAILED
    reason: str  # why FAILED ('' when FINISHED)
    returncode: int | None
    job_start_unix: float
    job_end_unix: float
    result: dict | None  # rank 0's result file, when it wrote one
    logs: list[Path] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    leftover_pids: list[int] = field(default_factory=list)  # processes of the job found after it ended


# --------------------------------------------------------------------------------------------
# The launcher command line


def _tool(name: str, python: str | None = None) -> str:
    """An executable of the ranks' interpreter's environment (a venv's bin/), else from PATH."""
    python = python or sys.executable
    beside = Path(python).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise LaunchError(
            f"cluster.launcher: {name!r} is neither beside {python} nor on PATH: run the "
            "harness with the training environment's python (.venv-train/bin/python, Horovod built)"
        )
    return found


def rank_python(cfg) -> str | None:
    """The interpreter of the ranks when it is not this one: framework.gpu_python for device=gpu (the GPU
    image's MXNet runs in its own CUDA 11 environment, /opt/venv-mxnet, apart from TensorFlow's CUDA 12);
    None: this interpreter."""
    gpu_python = cfg.framework.get("gpu_python")
    if str(cfg.device) != "gpu" or not gpu_python:
        return None
    return str(gpu_python)


def launcher_command(cfg, job_config: Path, log_dir: Path) -> list[str]:
    """The command line that starts cfg.workers ranks of the framework's runner on the job's config file."""
    cluster = cfg.cluster
    python = rank_python(cfg)
    if python and cluster.launcher == "horovodrun" and not Path(python).exists():
        raise LaunchError(f"framework.gpu_python={python}: no such interpreter here")
    ranks = [python or sys.executable, *RANK_PROGRAM, str(job_config)]
    if cluster.launcher == "horovodrun":
        cmd = [_tool("horovodrun", python), "-np", str(int(cfg.workers)), "-H", str(cluster.hosts), "--gloo"]
        if int(cfg.workers) > 1:  # horovodrun 0.28.1 fails on it with -np 1 (log10(0)); see split_launcher_log
            cmd += ["--output-filename", str(log_dir)]
        if cluster.get("network_interface"):
            cmd += ["--network-interface", str(cluster.network_interface)]
        return cmd + [str(a) for a in cluster.get("extra_args") or []] + ranks
    if cluster.launcher == "srun":  # inside a Slurm allocation: one job step, one rank per GPU
        from .slurm.commands import srun_command

        return srun_command(
            cfg, ranks[1:], image=cluster.get("image"), log_dir=log_dir, binds=[log_dir.parent], python=python
        )
    raise LaunchError(
        f"cluster.launcher={cluster.launcher!r}: choose horovodrun (cluster=local) or srun (cluster=slurm)"
    )


def rank_environment(cfg, job_id: str) -> dict[str, str]:
    """Environment of the launcher (and so of every rank)."""
    env = dict(os.environ)
    env[JOB_ID_ENV] = job_id
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if str(cfg.device) == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # no rank touches a GPU in a CPU run
        threads = cpu_threads_per_rank(cfg)
        env["OMP_NUM_THREADS"] = str(threads)  # MXNet reads it at import; TF is set by its runner
        env["MXNET_CPU_WORKER_NTHREADS"] = str(threads)
    return env


def profile_environment(cfg, job_dir: Path) -> dict[str, str]:
    """profile=timeline: HOROVOD_TIMELINE, so that Horovod records the whole job's timeline in its folder."""
    if str(cfg.get("profile") or "none") != "timeline":
        return {}
    return {"HOROVOD_TIMELINE": str(Path(job_dir).resolve() / TIMELINE_FILE)}


def cpu_threads_per_rank(cfg) -> int:
    """CPU threads per rank: cfg.threads_per_rank, else this machine's cores shared by its ranks."""
    if cfg.get("threads_per_rank"):
        return int(cfg.threads_per_rank)
    if cfg.cluster.launcher == "srun":  # srun gives each rank cpus_per_node / ranks per node cores
        per_node = min(int(cfg.workers), int(cfg.cluster.tasks_per_node or cfg.workers))
        return max(1, int(cfg.cluster.cpus_per_node or os.cpu_count() or 1) // per_node)
    local_ranks = int(str(cfg.cluster.hosts).split(",")[0].rsplit(":", 1)[-1] or 1)
    return max(1, (os.cpu_count() or 1) // max(1, min(local_ranks, int(cfg.workers))))


# --------------------------------------------------------------------------------------------
# Running and watching the job


def _job_processes(job_id: str, exclude: set[int]) -> list:
    """Live processes whose environment carries this job's id (ours only: found by that marker)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in exclude:
            continue
        try:
            if proc.environ().get(JOB_ID_ENV) == job_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _kill_job(popen: subprocess.Popen, job_id: str, grace_s: float) -> list[int]:
    """SIGTERM the job's process group and every process carrying its id; SIGKILL what is left
    after grace_s. Returns the pids that were still alive after SIGKILL (should be none)."""
    import psutil

    me = {os.getpid()}
    targets = {p.pid: p for p in _job_processes(job_id, me)}
    try:
        targets.setdefault(popen.pid, psutil.Process(popen.pid))
        targets.update({c.pid: c for c in psutil.Process(popen.pid).children(recursive=True)})
    except psutil.NoSuchProcess:
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in list(targets.values()):
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(list(targets.values()), timeout=grace_s if sig == signal.SIGTERM else 5)
        if sig == signal.SIGTERM:
            # the launcher may have started more processes meanwhile
            targets = {p.pid: p for p in alive}
            targets.update({p.pid: p for p in _job_processes(job_id, me)})
            if not targets:
                break
    try:
        popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return [p.pid for p in _job_processes(job_id, me)]


RANK_LINE = re.compile(r"^\[(\d+)\]<(stdout|stderr)>:(.*)$")


def split_launcher_log(launcher_log: Path, log_dir: Path) -> None:
    """Write rank.N/stdout and rank.N/stderr from the launcher's prefixed output ('[0]<stdout>:...'),
    for the ranks whose log files the launcher did not write itself."""
    if not launcher_log.exists():
        return
    lines: dict[tuple[str, str], list[str]] = {}
    for line in launcher_log.read_text(errors="replace").splitlines():
        match = RANK_LINE.match(line)
        if match:
            lines.setdefault((match[1], match[2]), []).append(match[3])
    for (rank, stream), text in lines.items():
        path = log_dir / f"rank.{rank}" / stream
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(text) + "\n")


def collect_logs(job_dir: Path) -> list[Path]:
    """The launcher's log and every rank's stdout/stderr files, sorted."""
    logs = [job_dir / LAUNCHER_LOG] if (job_dir / LAUNCHER_LOG).exists() else []
    log_dir = job_dir / LOG_DIR
    split_launcher_log(job_dir / LAUNCHER_LOG, log_dir)
    if log_dir.exists():
        logs += sorted(p for p in log_dir.rglob("*") if p.is_file())
    return logs


def run_job(cfg, job_dir: Path, job_config: Path) -> JobOutcome:
    """Run the job's ranks to the end or to timeout_s; never leaves a process of the job behind."""
    job_dir = Path(job_dir)
    job_id = uuid.uuid4().hex
    log_dir = job_dir / LOG_DIR
    result_file = job_dir / RESULT_FILE
    result_file.unlink(missing_ok=True)
    cmd = launcher_command(cfg, job_config, log_dir)
    env = rank_environment(cfg, job_id)
    env.update(profile_environment(cfg, job_dir))
    (job_dir / TIMELINE_FILE).unlink(missing_ok=True)
    timeout, limited_by = float(cfg.timeout_s), "timeout_s"
    start = time.time()
    rendezvous = None
    if cfg.cluster.launcher == "srun":
        from .slurm.job import seconds_left, start_rendezvous

        left = seconds_left()
        # Stop the ranks before submitit's SIGUSR2 (signal_delay_s before Slurm's limit, which Slurm may send
        # up to 60 s early: man sbatch, --signal) ends this driver, so the job still records its FAILED run.
        if left is not None:
            left -= float(cfg.cluster.get("signal_delay_s") or 0) + SLURM_SIGNAL_SLACK_S + SLURM_RECORD_MARGIN_S
            if left < timeout:
                timeout, limited_by = max(1.0, left), "the Slurm job's time limit"
        if str(cfg.cluster.get("rendezvous", "gloo")) == "gloo":
            rendezvous, rendezvous_env = start_rendezvous(cfg, env)
            env.update(rendezvous_env)
    try:
        rc, reason, leftover = _watch(cmd, env, job_dir, job_id, timeout, limited_by, float(cfg.cluster.kill_grace_s))
    finally:
        if rendezvous is not None:
            rendezvous.terminate()
            try:
                rendezvous.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rendezvous.kill()
    end = time.time()
    if rc and cfg.cluster.launcher == "srun":  # which task failed first, and where: srun said it in its log
        from .slurm.job import first_task_failure

        reason += first_task_failure(job_dir / LAUNCHER_LOG)
    if leftover:
        reason = (reason + "; " if reason else "") + f"processes {leftover} of the job survived SIGKILL"
    result = None
    if result_file.exists():
        try:
            result = json.loads(result_file.read_text())
        except json.JSONDecodeError as err:
            reason = reason or f"{result_file}: unreadable result ({err})"
    elif not reason:
        reason = f"the launcher exited 0 but rank 0 wrote no {result_file}"
    status = "FINISHED" if not reason and result is not None else "FAILED"
    logs = collect_logs(job_dir)
    return JobOutcome(status, reason, rc, start, end, result, logs=logs, command=cmd, leftover_pids=leftover)


def _watch(cmd, env, job_dir: Path, job_id: str, timeout: float, limited_by: str, grace_s: float):
    """Run the launcher to its end or the timeout: (returncode, failure reason, surviving pids)."""
    with open(job_dir / LAUNCHER_LOG, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        popen = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=os.getcwd(),
            start_new_session=True,
        )
        try:
            rc = popen.wait(timeout=timeout)
            reason = "" if rc == 0 else f"the launcher exited with code {rc} (a rank failed: see its log)"
        except subprocess.TimeoutExpired:
            rc = None
            reason = f"timeout: the job ran past {timeout:g} s ({limited_by}) and was killed"
        except BaseException:  # Ctrl-C: take the ranks down with us
            _kill_job(popen, job_id, grace_s)
            raise
        leftover = _kill_job(popen, job_id, grace_s)
    return rc, reason, leftover
