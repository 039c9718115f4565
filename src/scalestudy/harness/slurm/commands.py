"""Pure functions: the srun command line of a job's ranks, where they go, and their Horovod environments.

tests/integration/test_slurm_integration.py runs these in a real one-node Slurm. Nothing here imports Horovod,
MLflow or a framework.
"""

from __future__ import annotations

import math
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

RUNTIMES = ("singularity", "apptainer")  # or the path of an executable with their `exec` CLI (scripts/sif-exec)
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
        raise SlurmConfigError(
            f"config cluster.tasks_per_node={tasks_per_node!r}: ranks per node must be >= 1 "
            "(device=cpu: set it; device=gpu: it follows cluster.gpus_per_node)"
        )
    per_node = min(int(workers), int(tasks_per_node))
    used = math.ceil(workers / per_node)
    if used > int(nodes):
        raise SlurmConfigError(
            f"config workers={workers}: needs {used} nodes of {per_node} ranks but the allocation has "
            f"cluster.nodes={nodes} (raise cluster.nodes, or cluster.tasks_per_node)"
        )
    if workers % per_node:
        raise SlurmConfigError(
            f"config workers={workers}: not a multiple of cluster.tasks_per_node={tasks_per_node} "
            "(every node of a job runs the same number of ranks)"
        )
    return used, per_node


def srun_command(
    cfg,
    rank_argv: Sequence[str],
    image: str | None = None,
    *,
    log_dir: str | Path | None = None,
    binds: Sequence[str | Path] = (),
    python: str | None = None,
) -> list[str]:
    """The srun command line that starts cfg.workers ranks of `rank_argv` inside the current allocation.

    rank_argv is the rank program without its interpreter, e.g. ["-m", "scalestudy.harness.runners",
    "/job/config.yaml"]. With `image`, every rank runs in `<runtime> exec [--nv] IMAGE python ...`
    (the image's Python); without, in `python` (default: this interpreter).
    """
    workers = int(cfg.workers)
    gpu = str(cfg.device) == "gpu"
    tasks_per_node = _get(cfg, "cluster.tasks_per_node")
    gpus_per_node = _get(cfg, "cluster.gpus_per_node")
    if gpu and not gpus_per_node:
        raise SlurmConfigError("config device=gpu with cluster.gpus_per_node unset: one rank per GPU needs it")
    if gpu and tasks_per_node and gpus_per_node and int(tasks_per_node) > int(gpus_per_node):
        raise SlurmConfigError(
            f"config cluster.tasks_per_node={tasks_per_node} > cluster.gpus_per_node="
            f"{gpus_per_node}: device=gpu runs one rank per GPU"
        )
    used, per_node = placement(workers, int(_get(cfg, "cluster.nodes", 1)), int(tasks_per_node or 0))
    rendezvous = str(_get(cfg, "cluster.rendezvous", "gloo"))
    if rendezvous not in RENDEZVOUS:
        raise SlurmConfigError(f"config cluster.rendezvous={rendezvous!r}: choose one of {', '.join(RENDEZVOUS)}")

    cmd = [
        "srun",
        "--overlap",  # the driver's own step holds resources of the allocation
        "--kill-on-bad-exit=1",  # one rank fails: the step ends (as horovodrun does)
        "--distribution=block",  # ranks 0..G-1 on the first node: matches host_plan()
        # The step's nodes are the allocation's first ones, the driver's own node first: where the rendezvous
        # server listens (on loopback for a one-node job) and the order of host_plan()'s hosts.
        "--relative=0",
        "--label",  # srun's own lines in the launcher log name their task
        f"--nodes={used}",
        f"--ntasks={workers}",
        f"--ntasks-per-node={per_node}",
    ]
    cpus_per_node = _get(cfg, "cluster.cpus_per_node")
    if cpus_per_node:
        cmd.append(f"--cpus-per-task={max(1, int(cpus_per_node) // per_node)}")
    if gpu:
        # All of the node's GPUs visible to each rank: the runners pin GPU number local_rank.
        cmd.append(f"--gpus-per-node={per_node}")
    cmd.append(f"--mpi={_get(cfg, 'cluster.mpi', 'pmix') if rendezvous == 'mpi' else 'none'}")
    cmd += [str(a) for a in (_get(cfg, "cluster.extra_args") or [])]

    wrapper = ["-m", "scalestudy.harness.slurm", "rank"]
    if log_dir is not None:
        wrapper += ["--log-dir", str(log_dir)]
    wrapper += ["--rendezvous", rendezvous, "--"]
    if image:
        inner = python or "python"
        container = [container_runtime(cfg), "exec"] + (["--nv"] if gpu else [])
        for path in [*binds, *(_get(cfg, "cluster.bind") or [])]:
            container += ["--bind", str(path)]
        container.append(str(image))
        return cmd + container + [inner, *wrapper, inner, *rank_argv]
    inner = python or sys.executable
    return cmd + [inner, *wrapper, inner, *rank_argv]


def container_runtime(cfg) -> str:
    """cluster.container_runtime as a command: singularity, apptainer, or the absolute path of an executable file
    with their `exec [--nv] [--bind SRC[:DST]]... IMAGE CMD...` (a stand-in such as scripts/sif-exec). Checked
    where the driver runs: a path must name the same file on every node (a shared file system)."""
    runtime = str(_get(cfg, "cluster.container_runtime", "singularity"))
    if runtime in RUNTIMES:
        return runtime
    path = Path(runtime).expanduser()
    if "/" in runtime and path.is_file() and os.access(path, os.X_OK):
        return str(path.resolve())
    why = "is not an executable file" if "/" in runtime else "is not a known runtime"
    raise SlurmConfigError(
        f"config cluster.container_runtime={runtime!r} {why}: choose one of {', '.join(RUNTIMES)} or the path of "
        "an executable with their exec CLI"
    )


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
    return [
        {
            "hostname": hosts[r // per_node],
            "rank": r,
            "local_rank": r % per_node,
            "cross_rank": r // per_node,
            "size": size,
            "local_size": per_node,
            "cross_size": used,
        }
        for r in range(size)
    ]


def rendezvous_command(
    hosts: Sequence[str],
    per_node: int,
    size: int,
    image: str | None = None,
    runtime: str | None = "singularity",
    python: str | None = None,
    bind: str = "",
) -> list[str]:
    """The command that runs the Gloo rendezvous server (in the image when given: Horovod lives there), listening
    on `bind` ('' = every interface); it prints its port on its first line of output."""
    args = (
        f"-m scalestudy.harness.slurm rendezvous --hosts {','.join(hosts)} --per-node {per_node} --size {size}".split()
    )
    args += ["--bind", bind] if bind else []
    if image:
        return [runtime, "exec", str(image), python or "python", *args]
    return [python or sys.executable, *args]


def parse_duration(text: str) -> float | None:
    """Slurm's [days-][hours:]minutes:seconds (squeue %L), or None for UNLIMITED/NOT_SET/empty."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text)
    if not match:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)
