#!/usr/bin/env python3
"""A rehearsal Slurm cluster on this machine, as root: a login host and two compute nodes, as on a real cluster.

    python3 scripts/cluster.py up|status|down [--root DIR]   # make cluster-up, cluster-status, cluster-down

The login host is this machine (munged, and slurmctld with the hostname `login`); node1 and node2 run slurmd each
in its own network, UTS and mount namespaces (their own hostname and /etc/hosts), their eth0 a veth pair's end on
a bridge whose address, in a private /24, is the login host's. Every file is under the state folder (default
.cluster/). docs/slurm.md ("The rehearsal cluster") tells the whole layout; tests/slurm_cluster.py starts the same
cluster for the tests. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: the network's module beside this one
import cluster_network as network
from cluster_network import PATH, ClusterError

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".cluster"
DEFAULT_NAME = "rehearsal"  # prefixes the namespaces and links: rehearsal-node1, rehearsal-br
NODES = ("node1", "node2")
LOGIN = "login"
PARTITION = "debug"
CPUS = 2
REAL_MEMORY_MB = 1000
SLURMD_PORT = 6818  # each slurmd listens in its own namespace: the port is free there
APT_PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client", "iproute2", "util-linux")
PROGRAMS = {
    **dict.fromkeys(("munged", "mungekey", "munge"), "munge"),
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    **dict.fromkeys(("sinfo", "srun", "sbatch", "scontrol", "squeue", "scancel"), "slurm-client"),
    "ip": "iproute2",
    **dict.fromkeys(("nsenter", "unshare"), "util-linux"),
}
MARKER = "SCALESTUDY_CLUSTER"  # in the daemons' environment (and so their slurmstepd's): finds what is left


@dataclass
class Cluster:
    root: Path
    name: str
    subnet: str  # the first three octets, e.g. "10.233.40"
    marker: str
    ctld_port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    partition: str = PARTITION
    nodes: tuple[str, ...] = NODES

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def login_addr(self) -> str:
        return f"{self.subnet}.1"

    def node_addr(self, node: str) -> str:
        return f"{self.subnet}.{11 + self.nodes.index(node)}"

    def netns(self, node: str) -> str:
        return f"{self.name}-{node}"

    @property
    def bridge(self) -> str:
        return f"{self.name}-br"

    def veth(self, node: str) -> str:
        return f"{self.name}-n{self.nodes.index(node) + 1}"  # the login side; the node's side is its eth0

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf), PATH=PATH)

    def run(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        return proc

    def log_tails(self, lines: int = 25) -> str:
        out = []
        for log in sorted((self.root / "log").glob("*")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log}\n" + "\n".join(text))
        return "\n".join(out)

    def save(self) -> None:
        state = dict(asdict(self), root=str(self.root))
        (self.root / "cluster.json").write_text(json.dumps(state, indent=1) + "\n")

    @classmethod
    def load(cls, root: Path) -> Cluster | None:
        try:
            state = json.loads((Path(root) / "cluster.json").read_text())
        except (OSError, ValueError):
            return None
        return cls(**dict(state, root=Path(state["root"]), nodes=tuple(state["nodes"])))


# --------------------------------------------------------------------------------------------
# What the cluster needs


def refusal() -> str | None:
    """Why this machine cannot start the cluster (one line naming the fix), or None."""
    missing = sorted({pkg for prog, pkg in PROGRAMS.items() if not shutil.which(prog, path=PATH)})
    command = "apt-get update && apt-get install -y --no-install-recommends " + " ".join(APT_PACKAGES)
    if os.geteuid() != 0:
        return "the rehearsal cluster runs munged, slurmctld, slurmd and makes network namespaces: run it as root"
    if missing:
        return f"the rehearsal cluster needs Debian's {', '.join(missing)}: install with: {command}"
    return None


# --------------------------------------------------------------------------------------------
# The files: slurm.conf, the hosts file of the cluster's hosts, the munge key


def _write_files(c: Cluster) -> None:
    c.root.mkdir(parents=True, exist_ok=True)
    c.root.chmod(0o755)  # munged wants its socket's folder reachable by all
    for sub, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o700), ("spool", 0o755), ("log", 0o755)):
        shutil.rmtree(c.root / sub, ignore_errors=True)  # a fresh cluster: no job or node state of an earlier one
        (c.root / sub).mkdir(mode=mode)
        (c.root / sub).chmod(mode)
    hosts = [f"{c.login_addr} {LOGIN}"] + [f"{c.node_addr(n)} {n}" for n in c.nodes]
    (c.root / "hosts").write_text("127.0.0.1 localhost\n" + "\n".join(hosts) + "\n")
    c.conf.write_text(slurm_conf(c))
    key = c.root / "munge" / "munge.key"
    subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, env=c.env, capture_output=True)


def slurm_conf(c: Cluster) -> str:
    """scripts/cluster-slurm.conf for this cluster: the login host's controller, the nodes in one partition."""
    node = "NodeName={0} NodeAddr={1} NodeHostname={0} CPUs={2} RealMemory={3} State=UNKNOWN"
    nodes = "\n".join(node.format(n, c.node_addr(n), CPUS, REAL_MEMORY_MB) for n in c.nodes)
    fields = dict(asdict(c), login=LOGIN, login_addr=c.login_addr, slurmd_port=SLURMD_PORT, nodes=nodes)
    template = string.Template((Path(__file__).parent / "cluster-slurm.conf").read_text())
    return template.substitute(fields, node_names=",".join(c.nodes))


# --------------------------------------------------------------------------------------------
# The daemons


def _start(c: Cluster, name: str, cmd: list[str], hostname: str | None = None, netns: str | None = None) -> None:
    """Start a daemon in its own session; with `hostname`, in its own UTS and mount namespaces (that hostname, the
    cluster's /etc/hosts); with `netns`, in that network namespace. Its pid is the daemon's (every step execs)."""
    if hostname:
        hosts = shlex.quote(str(c.root / "hosts"))
        script = f'hostname {hostname} && mount --bind {hosts} /etc/hosts && exec "$@"'
        cmd = ["unshare", "--uts", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *cmd]
    if netns:
        cmd = ["nsenter", f"--net=/run/netns/{netns}", "--", *cmd]
    with open(c.root / "log" / f"{name}.out", "w") as out:
        proc = subprocess.Popen(
            cmd,
            env=dict(c.env, **{MARKER: c.marker}),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    c.pids[name] = proc.pid


def _wait(c: Cluster, what: str, ready, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [name for name, pid in c.pids.items() if not _alive(pid)]
        if dead or time.monotonic() > deadline:
            cause = f"{', '.join(dead)} exited" if dead else f"not ready after {timeout:.0f} s"
            raise ClusterError(f"rehearsal cluster: {cause} while waiting for {what}\n" + c.log_tails())
        time.sleep(0.2)


def _nodes_idle(c: Cluster) -> bool:
    out = c.run("sinfo", "--noheader", "--Node", "--format=%N %t", check=False, timeout=10).stdout.split()
    return dict(zip(out[::2], out[1::2])) == dict.fromkeys(c.nodes, "idle")


def _start_daemons(c: Cluster) -> None:
    key, sock = c.root / "munge" / "munge.key", c.root / "run" / "munge.socket"
    munged = ["munged", "--foreground", f"--key-file={key}", f"--socket={sock}"]
    munged += [f"--pid-file={c.root / 'run/munged.pid'}", f"--log-file={c.root / 'log/munged.log'}"]
    _start(c, "munged", [*munged, f"--seed-file={c.root / 'munge/munged.seed'}"])
    _wait(c, "munged", lambda: subprocess.run(["munge", "-n", "-S", str(sock)], capture_output=True).returncode == 0)
    _start(c, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(c.conf)], hostname=LOGIN)
    _wait(c, "slurmctld", lambda: c.run("scontrol", "ping", check=False, timeout=10).returncode == 0)
    for node in c.nodes:
        _start(c, f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(c.conf)], hostname=node, netns=c.netns(node))
    _wait(c, f"{' and '.join(c.nodes)} idle", lambda: _nodes_idle(c), timeout=60)


def _alive(pid: int) -> bool:
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child (the tests' fixture): reaped now
            return False
    except ChildProcessError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cluster_processes(c: Cluster) -> list[int]:
    """Processes of this cluster still alive: its daemons (marker) and its jobs (SLURM_CONF = ours)."""
    found = []
    conf, marker = f"SLURM_CONF={c.conf}".encode(), f"{MARKER}={c.marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        job = conf in environ and any(v.startswith(b"SLURM_JOB_ID=") for v in environ)
        if (marker in environ or job) and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _cancel_jobs(c: Cluster) -> list[str]:
    try:
        ids = c.run("squeue", "--noheader", "--format=%A", check=False, timeout=15).stdout.split()
        if ids:
            c.run("scancel", *ids, check=False, timeout=15)
            _until(lambda: not c.run("squeue", "--noheader", check=False, timeout=15).stdout.strip(), 20)
    except (subprocess.SubprocessError, OSError) as err:
        return [f"cancelling jobs: {err}"]
    return []


def _stop_daemons(c: Cluster) -> list[str]:
    problems = []
    for name in [*(f"slurmd-{n}" for n in c.nodes), "slurmctld", "munged"]:  # munged last: the others use it
        pid = c.pids.get(name)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            if not _until(lambda pid=pid: not _alive(pid), 15):
                problems.append(f"{name} (pid {pid}) ignored SIGTERM: killed")
                os.kill(pid, signal.SIGKILL)
    return problems


def _kill_leftovers(c: Cluster) -> list[str]:
    problems = []
    for pid in cluster_processes(c):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            os.kill(pid, signal.SIGKILL)
            problems.append(f"process {pid} ({cmdline.strip()}) was left behind: killed")
        except OSError:
            pass
    _until(lambda: not cluster_processes(c), 10)  # a namespace goes when its last process has gone
    return problems


def _until(done, timeout: float) -> bool:
    """Wait until done() says True (True), or timeout seconds (False)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# --------------------------------------------------------------------------------------------
# up, status, down


def is_up(c: Cluster | None) -> bool:
    return c is not None and bool(c.pids) and all(_alive(pid) for pid in c.pids.values())


def up(root: Path = DEFAULT_ROOT, name: str = DEFAULT_NAME) -> Cluster:
    """Start the cluster and wait until both nodes are idle; one that is up already is returned as it is."""
    root = Path(root).resolve()
    old = Cluster.load(root)
    if is_up(old):
        return old
    if old is not None:
        down(root)  # what a stopped cluster (a reboot, a killed daemon) left: gone before starting again
    c = Cluster(root=root, name=name, subnet="", marker=uuid.uuid4().hex)
    root.mkdir(parents=True, exist_ok=True)
    closed = [str(p) for p in root.parents if not p.stat().st_mode & 0o001]
    if closed:  # munged refuses a socket below them
        raise ClusterError(f"munged needs every folder above {root} searchable by all: chmod o+x {closed[0]}")
    try:
        network.claim(c)
        with socket.socket() as sock:  # a free port on the login address for slurmctld
            sock.bind((c.login_addr, 0))
            c.ctld_port = sock.getsockname()[1]
        _write_files(c)
        _start_daemons(c)
    except BaseException:
        if c.subnet:  # the network is ours
            c.save()  # with the daemons started so far
            down(root)
        raise
    c.save()
    return c


def down(root: Path = DEFAULT_ROOT) -> list[str]:
    """Cancel the jobs, stop the daemons, remove the network; returns what had to be forced or is left."""
    c = Cluster.load(Path(root).resolve())
    if c is None:
        return []
    problems = _cancel_jobs(c) if is_up(c) else []
    problems += _stop_daemons(c) + _kill_leftovers(c)
    network.remove(c)
    problems += [f"{what} is left" for what in network.left(c)]
    problems += [f"process {pid} is left" for pid in cluster_processes(c)]
    (c.root / "cluster.json").unlink(missing_ok=True)
    return problems


def status(root: Path = DEFAULT_ROOT) -> str:
    c = Cluster.load(Path(root).resolve())
    if c is None or not any(_alive(pid) for pid in c.pids.values()):
        return f"the rehearsal cluster is down (no running cluster in {Path(root).resolve()})"
    dead = [name for name, pid in c.pids.items() if not _alive(pid)]
    if dead:
        return f"the rehearsal cluster is broken: {', '.join(dead)} not running (make cluster-up starts it afresh)"
    nodes = c.run("sinfo", "--Node", "--format=%N %P %t %c %m", timeout=15).stdout.rstrip()
    hosts = ", ".join([f"{LOGIN} {c.login_addr}"] + [f"{n} {c.node_addr(n)} (netns {c.netns(n)})" for n in c.nodes])
    return f"{nodes}\nhosts: {hosts}\nexport SLURM_CONF={c.conf}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/cluster.py", description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("up", "status", "down"))
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the state folder (default: .cluster/)")
    ap.add_argument("--name", default=DEFAULT_NAME, help="prefix of the namespaces and links (up only)")
    args = ap.parse_args(argv)
    if args.what == "status":
        print(status(args.root))
        return 0
    why = refusal()
    if why:
        print(f"scripts/cluster.py {args.what}: {why}", file=sys.stderr)
        return 2
    if args.what == "down":
        problems = down(args.root)
        for problem in problems:
            print(f"scripts/cluster.py down: {problem}", file=sys.stderr)
        print("the rehearsal cluster is down" + (" (see above)" if problems else ""), file=sys.stderr)
        return 1 if problems else 0
    return _up_command(args.root, args.name)


def _up_command(root: Path, name: str) -> int:
    start, already = time.monotonic(), is_up(Cluster.load(root.resolve()))
    try:
        c = up(root, name)
    except ClusterError as err:
        print(f"scripts/cluster.py up: {err}", file=sys.stderr)
        return 1
    state = "already up" if already else f"up ({time.monotonic() - start:.1f} s: {', '.join(c.nodes)} idle)"
    print(f"the rehearsal cluster in {root} is {state}; for Slurm's commands:", file=sys.stderr)
    print(f"export SLURM_CONF={c.conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
