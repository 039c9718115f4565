"""Inside a Slurm allocation: what the job's driver asks Slurm (time left, hosts, its own ids and log), the
Gloo rendezvous server it starts for the ranks, and the `rank` wrapper each srun task runs.

Slurm's own tools answer: `squeue` (time left, job state), `scontrol show hostnames` (the nodes).
Nothing here imports Horovod, MLflow or a framework at module level.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from .commands import SlurmConfigError, host_plan, parse_duration, placement, rank_env, rendezvous_command


def squeue(job_id: str, field: str) -> str | None:
    """One field of `squeue -h -j JOB -o FIELD` (e.g. %L time left, %T state); None where Slurm cannot say."""
    if not job_id or not shutil.which("squeue"):
        return None
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-o", field], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def seconds_left(environ: Mapping[str, str] = os.environ) -> float | None:
    """Seconds until Slurm ends this job (None outside a job, or without a limit)."""
    left = squeue(environ.get("SLURM_JOB_ID", ""), "%L")
    return parse_duration(left) if left else None


def job_info() -> dict[str, str | None]:
    """This Slurm job's ids and the paths of its log (as submitit names them, when submitit started it)."""
    info = {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")}
    try:
        import submitit

        paths = submitit.JobEnvironment().paths
        info.update(stdout=str(paths.stdout), stderr=str(paths.stderr))
    except Exception:  # not started by submitit (e.g. sbatch by hand): no log paths to give
        pass
    return info


def hostnames(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The nodes of this allocation, in Slurm's order: `scontrol show hostnames` of SLURM_JOB_NODELIST."""
    nodelist = environ.get("SLURM_JOB_NODELIST")
    if not nodelist or not shutil.which("scontrol"):
        return [socket.gethostname()]
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"scontrol show hostnames {nodelist}: {out.stderr.strip()}")
    return out.stdout.split()


def start_rendezvous(cfg, env: dict, timeout_s: float = 60.0) -> tuple[subprocess.Popen, dict[str, str]]:
    """Horovod's Gloo rendezvous server for this job's ranks (horovodrun starts its own; srun does not).

    Returns the server process and what every rank needs to reach it."""
    from .commands import container_runtime, gloo_rendezvous_env

    used, per_node = placement(int(cfg.workers), int(cfg.cluster.nodes), int(cfg.cluster.tasks_per_node))
    image = cfg.cluster.get("image")
    interface = cfg.cluster.get("network_interface") or ("lo" if used == 1 else None)
    # The ranks reach the server on this node, the step's first (srun --relative=0).
    if used == 1:
        addr = bind = "127.0.0.1"  # nothing outside this node needs to reach it
    elif interface:
        addr = bind = interface_address(interface)  # where the ranks' Gloo traffic goes, and only there
    else:
        addr, bind = socket.gethostname(), ""  # the ranks resolve this node's name: listen on every address
    runtime = container_runtime(cfg) if image else None
    command = rendezvous_command(hostnames()[:used], per_node, int(cfg.workers), image, runtime, bind=bind)
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    ready, _, _ = select.select([server.stdout], [], [], timeout_s)
    line = server.stdout.readline().strip() if ready else ""
    if not line.isdigit():
        server.kill()
        raise RuntimeError(
            f"the rendezvous server ({shlex.join(command)}) gave no port within {timeout_s:.0f} s "
            f"(exit code {server.poll()}, first line {line!r}); its messages are in this job's log"
        )
    return server, gloo_rendezvous_env(addr, int(line), interface)


def interface_address(interface: str) -> str:
    """This node's IPv4 address on `interface` (cluster.network_interface, e.g. ib0 or the rehearsal's eth0)."""
    import psutil

    addrs = [a.address for a in psutil.net_if_addrs().get(interface, []) if a.family == socket.AF_INET]
    if not addrs:
        known = ", ".join(sorted(psutil.net_if_addrs()))
        raise SlurmConfigError(
            f"config cluster.network_interface={interface!r}: no IPv4 address on {socket.gethostname()} ({known})"
        )
    return addrs[0]


SRUN_TASK_ERROR = re.compile(r"^srun: error: (\S+: tasks? [\d,-]+: .+)$", re.MULTILINE)


def first_task_failure(launcher_log: Path) -> str:
    """'; first: node2: task 3: Killed' from srun's log of the step (the first task that failed), or ''."""
    try:
        match = SRUN_TASK_ERROR.search(launcher_log.read_text(errors="replace"))
    except OSError:
        return ""
    return f"; first: {match[1]}" if match else ""


# --------------------------------------------------------------------------------------------
# The programs srun and the driver start (python -m scalestudy.harness.slurm rank|rendezvous)


def rank_main(log_dir: str | None, rendezvous: str, command: list[str]) -> int:
    """Run `command` as this srun task's Horovod rank, its output in log_dir/rank.N/{stdout,stderr}."""
    env = dict(os.environ)
    if rendezvous == "gloo":
        env.update(rank_env(env))
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("scalestudy.harness.slurm rank: no command after --", file=sys.stderr)
        return 2
    if log_dir:
        folder = Path(log_dir) / f"rank.{int(env['SLURM_PROCID'])}"
        folder.mkdir(parents=True, exist_ok=True)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            target = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(target, fd)
            os.close(target)
    try:
        os.execvpe(command[0], command, env)
    except OSError as err:
        print(f"scalestudy.harness.slurm rank: cannot run {shlex.join(command)}: {err}", file=sys.stderr)
        return 127


def rendezvous_main(hosts: list[str], per_node: int, size: int, bind: str = "") -> int:
    """Horovod's HTTP rendezvous server for one job step: prints its port, serves until SIGTERM/SIGINT.

    Horovod's own RendezvousServer listens on every interface; this builds the same server from Horovod's
    classes on `bind` (127.0.0.1 for a one-node job: nothing outside the node can reach it)."""
    import threading

    from horovod.runner.common.util.hosts import SlotInfo  # the image's (or this venv's) Horovod
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    server = RendezvousHTTPServer((bind, 0), RendezvousHandler, 0)
    server.init([SlotInfo(**slot) for slot in host_plan(hosts, per_node, size)])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    server.shutdown()
    return 0
