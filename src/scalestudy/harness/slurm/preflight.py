"""Before sbatch: what a sweep needs that Slurm would only find wrong once a job runs, checked on the login node.

A sweep whose image or data file is missing, or that names a partition or account the cluster does not have,
would otherwise reach sbatch (a submitit traceback) or start jobs that fail one by one on the compute nodes.
`sweep_problems` returns one line per problem for every job's composed config (the same problem once); the
launcher (src/hydra_plugins/scalestudy_slurm) prints them and submits nothing.

Slurm's own tools answer: `sinfo` (partitions, their state, node counts and which is the default) and
`scontrol show partition` (AllowAccounts/DenyAccounts). Nothing here imports Horovod, MLflow or submitit.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .commands import _get

# The data sets read from a file (conf/data/*.yaml whose `path` the runner opens).
DATA_FROM_FILE = ("cifar10",)


class SlurmAnswerError(RuntimeError):
    """A Slurm command that could not be run or refused (its own message, on one line)."""


@dataclass(frozen=True)
class Partition:
    name: str
    up: bool
    nodes: int
    default: bool
    allow_accounts: tuple[str, ...] = ("ALL",)
    deny_accounts: tuple[str, ...] = field(default_factory=tuple)


def slurm_answer(*cmd: str, timeout: float = 30) -> str:
    """stdout of a Slurm command; SlurmAnswerError naming the command and what it said otherwise."""
    if not shutil.which(cmd[0]):
        raise SlurmAnswerError(f"{cmd[0]} not found: this is not a Slurm login node (or Slurm is not on PATH)")
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmAnswerError(f"{shlex.join(cmd)} gave no answer within {timeout:.0f} s") from None
    if out.returncode != 0:
        said = " ".join((out.stderr or out.stdout).split()) or f"exit code {out.returncode}"
        raise SlurmAnswerError(f"{shlex.join(cmd)}: {said}")
    return out.stdout


def parse_sinfo(text: str) -> dict[str, Partition]:
    """`sinfo --noheader --format='%P %a %D'`: one line per partition and node state, default marked `*`."""
    found: dict[str, Partition] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        name, avail, nodes = parts
        default, name = name.endswith("*"), name.rstrip("*")
        before = found.get(name)
        count = int(nodes) + (before.nodes if before else 0)
        found[name] = Partition(name, avail == "up", count, default)
    return found


def parse_partition_accounts(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(AllowAccounts, DenyAccounts) of `scontrol show partition NAME --oneliner`."""
    items = dict(item.split("=", 1) for item in text.split() if "=" in item)
    allow = tuple(filter(None, items.get("AllowAccounts", "ALL").split(",")))
    deny = tuple(a for a in items.get("DenyAccounts", "").split(",") if a and a != "(null)")
    return allow or ("ALL",), deny


def query_partitions(answer: Callable[..., str] = slurm_answer) -> dict[str, Partition]:
    """The cluster's partitions as sinfo and scontrol report them."""
    partitions = parse_sinfo(answer("sinfo", "--noheader", "--format=%P %a %D"))
    for name, part in list(partitions.items()):
        allow, deny = parse_partition_accounts(answer("scontrol", "show", "partition", name, "--oneliner"))
        partitions[name] = Partition(part.name, part.up, part.nodes, part.default, allow, deny)
    return partitions


def file_problems(cfg) -> list[str]:
    """The image and the data file: they must exist where the jobs will look (a shared file system)."""
    problems = []
    image = _get(cfg, "cluster.image")
    if image and not Path(str(image)).is_file():
        problems.append(
            f"config cluster.image={image}: no such file (build it with `make sif`, or give the path of a .sif "
            "on the shared file system; docs/cluster.md)"
        )
    if str(_get(cfg, "data.name")) in DATA_FROM_FILE:
        path = _get(cfg, "data.path")
        if not path or not Path(str(path)).is_file():
            problems.append(
                f"config data.path={path}: no such file; data={_get(cfg, 'data.name')} reads the archive from it "
                "(fetch it with `make data-cifar10`, which prints its path, or use data=synthetic)"
            )
    return problems


def partition_problems(cfg, partitions: dict[str, Partition]) -> list[str]:
    """The partition (or the default one), its state and size, and whether it takes the account."""
    wanted = _get(cfg, "cluster.partition")
    listed = ", ".join(sorted(partitions)) or "none"
    if wanted is None:
        part = next((p for p in partitions.values() if p.default), None)
        if part is None:
            return [f"config cluster.partition=null but the cluster has no default partition (sinfo lists: {listed})"]
    elif str(wanted) not in partitions:
        return [f"config cluster.partition={wanted}: no such partition (sinfo lists: {listed})"]
    else:
        part = partitions[str(wanted)]
    problems = []
    if not part.up:
        problems.append(f"config cluster.partition={part.name}: the partition is not up (sinfo)")
    nodes = int(_get(cfg, "cluster.nodes", 1))
    if nodes > part.nodes:
        problems.append(f"config cluster.nodes={nodes}: partition {part.name} has {part.nodes} node(s) (sinfo)")
    account = _get(cfg, "cluster.account")
    if account is not None:
        refused = str(account) in part.deny_accounts or (
            "ALL" not in part.allow_accounts and str(account) not in part.allow_accounts
        )
        if refused:
            problems.append(
                f"config cluster.account={account}: partition {part.name} does not take it (AllowAccounts="
                f"{','.join(part.allow_accounts)}, DenyAccounts={','.join(part.deny_accounts) or 'none'})"
            )
    return problems


def sweep_problems(configs: Iterable, partitions: Callable[[], dict[str, Partition]] = query_partitions) -> list[str]:
    """One line per problem over every job of the sweep, in order, each once; Slurm is asked once."""
    problems: list[str] = []
    known = None
    for cfg in configs:
        found = file_problems(cfg)
        try:
            known = partitions() if known is None else known
        except SlurmAnswerError as err:
            found.append(str(err))
            known = {}
        if known:
            found += partition_problems(cfg, known)
        problems += [p for p in found if p not in problems]
    return problems
