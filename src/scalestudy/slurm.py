"""Horovod ranks under Slurm: one job step (srun) per training job, one rank per GPU, in the image if given.

Each sweep job is one Slurm job, submitted by Hydra's submitit launcher (conf/cluster/slurm.yaml). Its one
task, the job's *driver* (python -m scalestudy.train), starts the job's ranks as one job step:

    srun --overlap --nodes=N --ntasks=W --ntasks-per-node=W/N ... \
         [singularity exec --nv IMAGE] python -m scalestudy.slurm rank --log-dir DIR -- python -m RUNNER CFG

The pure functions below build that command line and the environments (tests/test_slurm.py runs them in a
real one-node Slurm); the two small programs at the bottom run inside the allocation:

- `python -m scalestudy.slurm rank [--log-dir DIR] -- CMD...` turns a task's Slurm ids into Horovod's
  (HOROVOD_RANK = SLURM_PROCID, ...), sends its output to DIR/rank.N/{stdout,stderr} as horovodrun does, and
  execs CMD.
- `python -m scalestudy.slurm rendezvous --hosts A,B --per-node G --size W --port-file F` runs Horovod's HTTP
  rendezvous server for the Gloo controller (it needs Horovod: run it with the image's Python) and writes
  its port to F.

Rendezvous (cluster.rendezvous): `gloo` works with any host MPI (none needed): the driver starts the
rendezvous server, every rank gets gloo_rendezvous_env() plus its own rank_env(). `mpi` lets srun start the
ranks as MPI processes (srun --mpi=pmix) and Horovod uses its MPI controller: only where the image's Open MPI
was built against the host's PMIx (docs/slurm.md).

Nothing here imports Horovod, MLflow or a framework at module level.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

RUNTIMES = ("singularity", "apptainer")
RENDEZVOUS = ("gloo", "mpi")


class SlurmConfigError(ValueError):
    """A cluster=slurm setting that cannot work (the message names the config key)."""


def _get(cfg, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        if node is None:
            return default
        node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node


# --------------------------------------------------------------------------------------------
# Where the ranks go


def placement(workers: int, nodes: int, tasks_per_node: int) -> tuple[int, int]:
    """(nodes used, ranks per node) for `workers` ranks, block-wise: fill a node before the next.

    A job uses as few nodes of its allocation as it can; every used node runs the same number of ranks
    (Horovod's local and cross communicators assume it).
    """
    if workers < 1:
        raise SlurmConfigError(f"config workers={workers}: need at least one rank")
    if tasks_per_node is None or int(tasks_per_node) < 1:
        raise SlurmConfigError(f"config cluster.tasks_per_node={tasks_per_node!r}: ranks per node must be >= 1 "
                               "(device=cpu: set it; device=gpu: it follows cluster.gpus_per_node)")
    per_node = min(int(workers), int(tasks_per_node))
    used = math.ceil(workers / per_node)
    if used > int(nodes):
        raise SlurmConfigError(
            f"config workers={workers}: needs {used} nodes of {per_node} ranks but the allocation has "
            f"cluster.nodes={nodes} (raise cluster.nodes, or cluster.tasks_per_node)")
    if workers % per_node:
        raise SlurmConfigError(
            f"config workers={workers}: not a multiple of cluster.tasks_per_node={tasks_per_node} "
            "(every node of a job runs the same number of ranks)")
    return used, per_node


def srun_command(cfg, rank_argv: Sequence[str], image: str | None = None, *, log_dir: str | Path | None = None,
                 binds: Sequence[str | Path] = (), python: str | None = None) -> list[str]:
    """The srun command line that starts cfg.workers ranks of `rank_argv` inside the current allocation.

    rank_argv is the rank program without its interpreter, e.g. ["-m", "scalestudy.runners.tensorflow",
    "/job/rank-config.yaml"]. With `image`, every rank runs in `<runtime> exec [--nv] IMAGE python ...`
    (the image's Python); without, in `python` (default: this interpreter).
    """
    cluster = cfg.cluster
    workers = int(cfg.workers)
    gpu = str(cfg.device) == "gpu"
    tasks_per_node = _get(cfg, "cluster.tasks_per_node")
    gpus_per_node = _get(cfg, "cluster.gpus_per_node")
    if gpu and not gpus_per_node:
        raise SlurmConfigError("config device=gpu with cluster.gpus_per_node unset: one rank per GPU needs it")
    if gpu and tasks_per_node and gpus_per_node and int(tasks_per_node) > int(gpus_per_node):
        raise SlurmConfigError(f"config cluster.tasks_per_node={tasks_per_node} > cluster.gpus_per_node="
                               f"{gpus_per_node}: device=gpu runs one rank per GPU")
    used, per_node = placement(workers, int(_get(cfg, "cluster.nodes", 1)), int(tasks_per_node or 0))
    rendezvous = str(_get(cfg, "cluster.rendezvous", "gloo"))
    if rendezvous not in RENDEZVOUS:
        raise SlurmConfigError(f"config cluster.rendezvous={rendezvous!r}: choose one of {', '.join(RENDEZVOUS)}")

    cmd = ["srun",
           "--overlap",                 # the driver's own step holds resources of the allocation
           "--kill-on-bad-exit=1",      # one rank fails: the step ends (as horovodrun does)
           "--distribution=block",      # ranks 0..G-1 on the first node: matches host_plan()
           "--label",                   # srun's own lines in the launcher log name their task
           f"--nodes={used}", f"--ntasks={workers}", f"--ntasks-per-node={per_node}"]
    cpus_per_node = _get(cfg, "cluster.cpus_per_node")
    if cpus_per_node:
        cmd.append(f"--cpus-per-task={max(1, int(cpus_per_node) // per_node)}")
    if gpu:
        # All of the node's GPUs visible to each rank: the runners pin GPU number local_rank.
        cmd.append(f"--gpus-per-node={per_node}")
    cmd.append(f"--mpi={_get(cfg, 'cluster.mpi', 'pmix') if rendezvous == 'mpi' else 'none'}")
    cmd += [str(a) for a in (_get(cfg, "cluster.extra_args") or [])]

    wrapper = ["-m", "scalestudy.slurm", "rank"]
    if log_dir is not None:
        wrapper += ["--log-dir", str(log_dir)]
    wrapper += ["--rendezvous", rendezvous, "--"]
    if image:
        runtime = str(_get(cfg, "cluster.container_runtime", "singularity"))
        if runtime not in RUNTIMES:
            raise SlurmConfigError(f"config cluster.container_runtime={runtime!r}: choose one of {', '.join(RUNTIMES)}")
        inner = python or "python"
        container = [runtime, "exec"] + (["--nv"] if gpu else [])
        for path in [*binds, *(_get(cfg, "cluster.bind") or [])]:
            container += ["--bind", str(path)]
        container.append(str(image))
        return cmd + container + [inner, *wrapper, inner, *rank_argv]
    inner = python or sys.executable
    return cmd + [inner, *wrapper, inner, *rank_argv]


# --------------------------------------------------------------------------------------------
# Environments


def gloo_rendezvous_env(addr: str, port: int, interface: str | None = None) -> dict[str, str]:
    """What every rank needs to find Horovod's Gloo rendezvous server (the same for all ranks)."""
    env = {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": str(addr),
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(int(port)),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
    }
    if interface:
        env["HOROVOD_GLOO_IFACE"] = str(interface)
        env["NCCL_SOCKET_IFNAME"] = str(interface)
    return env


def expand_counts(compressed: str) -> list[int]:
    """Slurm's compressed task counts, '2(x3),1' -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in filter(None, compressed.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise ValueError(f"cannot read Slurm task counts {compressed!r}")
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


def rank_env(slurm: Mapping[str, str]) -> dict[str, str]:
    """A task's Horovod identity from its Slurm environment (inside one srun step, block distribution)."""
    missing = [k for k in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID") if k not in slurm]
    if missing:
        raise KeyError(f"not inside an srun step: {', '.join(missing)} unset")
    size = slurm.get("SLURM_STEP_NUM_TASKS") or slurm.get("SLURM_NTASKS")
    per_node = expand_counts(slurm.get("SLURM_STEP_TASKS_PER_NODE") or slurm.get("SLURM_TASKS_PER_NODE") or "")
    node = int(slurm["SLURM_NODEID"])
    nodes = int(slurm.get("SLURM_STEP_NUM_NODES") or slurm.get("SLURM_NNODES") or len(per_node) or 1)
    local_size = per_node[node] if node < len(per_node) else int(size) // nodes
    return {
        "HOROVOD_HOSTNAME": slurm.get("SLURMD_NODENAME") or socket.gethostname(),
        "HOROVOD_RANK": str(int(slurm["SLURM_PROCID"])),
        "HOROVOD_SIZE": str(int(size)),
        "HOROVOD_LOCAL_RANK": str(int(slurm["SLURM_LOCALID"])),
        "HOROVOD_LOCAL_SIZE": str(local_size),
        "HOROVOD_CROSS_RANK": str(node),
        "HOROVOD_CROSS_SIZE": str(nodes),
    }


def host_plan(hosts: Sequence[str], per_node: int, size: int) -> list[dict]:
    """Horovod's slot plan for `size` ranks placed block-wise, per_node on each host (as srun does with
    --distribution=block): what the rendezvous server is initialised with."""
    used = math.ceil(size / per_node)
    if used > len(hosts):
        raise SlurmConfigError(f"{size} ranks of {per_node} per node need {used} hosts, got {list(hosts)}")
    return [{"hostname": hosts[r // per_node], "rank": r, "local_rank": r % per_node, "cross_rank": r // per_node,
             "size": size, "local_size": per_node, "cross_size": used} for r in range(size)]


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's node list, 'gpu[01-03,7],login' -> ['gpu01', 'gpu02', 'gpu03', 'gpu7', 'login']."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", nodelist):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                names.append(prefix + lo)
                continue
            names += [f"{prefix}{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
    return names


def rendezvous_command(hosts: Sequence[str], per_node: int, size: int, port_file: str | Path,
                       image: str | None = None, runtime: str = "singularity", python: str | None = None) -> list[str]:
    """The command that runs the Gloo rendezvous server (in the image when given: Horovod lives there)."""
    args = ["-m", "scalestudy.slurm", "rendezvous", "--hosts", ",".join(hosts), "--per-node", str(per_node),
            "--size", str(size), "--port-file", str(port_file)]
    if image:
        return [runtime, "exec", str(image), python or "python", *args]
    return [python or sys.executable, *args]


# --------------------------------------------------------------------------------------------
# Inside the allocation


def _rank_main(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.rendezvous == "gloo":
        env.update(rank_env(env))
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("scalestudy.slurm rank: no command after --", file=sys.stderr)
        return 2
    if args.log_dir:
        folder = Path(args.log_dir) / f"rank.{int(env['SLURM_PROCID'])}"
        folder.mkdir(parents=True, exist_ok=True)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            target = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(target, fd)
            os.close(target)
    try:
        os.execvpe(command[0], command, env)
    except OSError as err:
        print(f"scalestudy.slurm rank: cannot run {shlex.join(command)}: {err}", file=sys.stderr)
        return 127


def _rendezvous_main(args: argparse.Namespace) -> int:
    from horovod.runner.common.util.hosts import SlotInfo  # the image's (or this venv's) Horovod
    from horovod.runner.http.http_server import RendezvousServer

    plan = [SlotInfo(**slot) for slot in host_plan(args.hosts.split(","), args.per_node, args.size)]
    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(plan)
    tmp = Path(str(args.port_file) + ".tmp")
    tmp.write_text(f"{port}\n")
    tmp.replace(args.port_file)  # the driver never reads a half-written port
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    server.stop()
    return 0


def wait_for_port(port_file: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> int:
    """The rendezvous server's port, once it wrote it (fails naming the file if it died or took too long)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text().strip())
        if proc.poll() is not None:
            raise RuntimeError(f"the rendezvous server exited with {proc.returncode} before writing {port_file}")
        time.sleep(0.1)
    raise RuntimeError(f"the rendezvous server wrote no port to {port_file} within {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scalestudy.slurm", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    rank = sub.add_parser("rank", help="run CMD as this Slurm task's Horovod rank")
    rank.add_argument("--log-dir", default=None)
    rank.add_argument("--rendezvous", choices=RENDEZVOUS, default="gloo")
    rank.add_argument("command", nargs=argparse.REMAINDER)
    rdv = sub.add_parser("rendezvous", help="run Horovod's Gloo rendezvous server for one job step")
    rdv.add_argument("--hosts", required=True)
    rdv.add_argument("--per-node", type=int, required=True)
    rdv.add_argument("--size", type=int, required=True)
    rdv.add_argument("--port-file", type=Path, required=True)
    args = ap.parse_args(argv)
    return _rank_main(args) if args.what == "rank" else _rendezvous_main(args)


if __name__ == "__main__":
    sys.exit(main())
