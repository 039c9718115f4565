"""A real one-node Slurm on this machine, for tests: munged, slurmctld and slurmd on loopback.

Import the fixture into a test module (`from slurm_cluster import slurm_cluster`). It writes slurm.conf and a
fresh munge key into a temporary folder, starts munged (its own key and socket), slurmctld and slurmd
(`localhost`, 2 CPUs, partition `debug`), sets SLURM_CONF for the whole test session, and on teardown
cancels every job, stops the daemons and checks that no process of this cluster is left.

Needs Debian's packages munge, slurmctld, slurmd and slurm-client (Slurm 22.05 on bookworm) and root
(munged, slurmd and the jobs run as root here). Not root and the packages missing: the tests are skipped,
saying so; as root with the packages missing: they fail with the apt-get command that installs them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import free_port

APT_PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client")
PROGRAMS = {
    "munged": "munge",
    "mungekey": "munge",
    "munge": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "srun": "slurm-client",
    "sbatch": "slurm-client",
    "scontrol": "slurm-client",
    "squeue": "slurm-client",
    "scancel": "slurm-client",
}
MARKER = "SCALESTUDY_SLURM_FIXTURE"  # in the daemons' environment (and so their slurmstepd's)
PARTITION = "debug"
NODE = "localhost"
CPUS = 2


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    partition: str
    marker: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def run(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}\n" + self.log_tails()
            )
        return proc

    def job(self, job_id: str | int) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, ExitCode, StdOut, ...)."""
        out = self.run("scontrol", "show", "job", "--oneliner", str(job_id)).stdout
        return dict(item.split("=", 1) for item in out.split() if "=" in item)

    def wait_job(self, job_id: str | int, timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                return info
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id} still {info.get('JobState')} after {timeout:.0f} s\n" + self.log_tails()
                )
            time.sleep(0.25)

    def log_tails(self, lines: int = 25) -> str:
        out = []
        for log in sorted((self.root / "log").glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log}\n" + "\n".join(text))
        return "\n".join(out)


def _require_programs() -> None:
    missing = sorted({pkg for prog, pkg in PROGRAMS.items() if not shutil.which(prog, path=_PATH)})
    if not missing:
        return
    command = "apt-get update && apt-get install -y --no-install-recommends " + " ".join(APT_PACKAGES)
    if os.geteuid() != 0:
        pytest.skip(f"a real Slurm needs root and Debian's {', '.join(missing)} (as root: {command})")
    pytest.fail(
        f"Slurm tests: Debian packages missing: {', '.join(missing)}; install them with: {command}", pytrace=False
    )


_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _write_conf(root: Path, ctld_port: int, slurmd_port: int) -> Path:
    conf = root / "slurm.conf"
    conf.write_text(f"""\
# One-node test cluster (tests/slurm_cluster.py): loopback only, everything under {root}
ClusterName=scalestudy-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/run/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory=1000 State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def _wait(what: str, check, cluster: SlurmCluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode} while waiting for {what}\n"
                    + (cluster.root / "log" / f"{name}.out").read_text(errors="replace")[-3000:]
                    + cluster.log_tails()
                )
        if time.monotonic() > deadline:
            raise RuntimeError(f"Slurm test cluster: {what} not ready after {timeout:.0f} s\n" + cluster.log_tails())
        time.sleep(0.2)


def _cluster_processes(cluster: SlurmCluster) -> list[int]:
    """Processes of this cluster still alive: its daemons (marker) and its jobs (SLURM_CONF = ours)."""
    found = []
    conf = f"SLURM_CONF={cluster.conf}".encode()
    marker = f"{MARKER}={cluster.marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if marker in environ or (conf in environ and any(v.startswith(b"SLURM_JOB_ID=") for v in environ)):
            found.append(int(entry.name))
    return found


def _stop(cluster: SlurmCluster) -> list[str]:
    problems = []
    try:
        ids = cluster.run("squeue", "--noheader", "--format=%A", check=False, timeout=15).stdout.split()
        if ids:
            cluster.run("scancel", *ids, check=False, timeout=15)
            deadline = time.monotonic() + 20
            while (
                time.monotonic() < deadline
                and cluster.run("squeue", "--noheader", check=False, timeout=15).stdout.strip()
            ):
                time.sleep(0.25)
    except (subprocess.SubprocessError, OSError) as err:
        problems.append(f"cancelling jobs: {err}")
    for name in ("slurmd", "slurmctld", "munged"):
        proc = cluster.procs.get(name)
        if proc is None or proc.poll() is not None:
            continue
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            problems.append(f"{name} (pid {proc.pid}) ignored SIGTERM: killed")
            proc.kill()
            proc.wait(timeout=5)
    left = _cluster_processes(cluster)
    for pid in left:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            os.kill(pid, signal.SIGKILL)
            problems.append(f"process {pid} ({cmdline.strip()}) was left behind: killed")
        except (ProcessLookupError, OSError):
            pass
    return problems


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running one-node Slurm (SLURM_CONF set for the session); stopped, with nothing left, at the end."""
    _require_programs()
    if os.geteuid() != 0:
        pytest.skip("the Slurm test cluster runs munged and slurmd as root: run the tests as root")
    root = Path(tempfile.mkdtemp(prefix="scalestudy-slurm-"))
    root.chmod(0o755)  # munged wants its socket's folder reachable by all
    for sub, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o700), ("spool", 0o755), ("log", 0o755)):
        (root / sub).mkdir(mode=mode)
        (root / sub).chmod(mode)
    conf = _write_conf(root, free_port(), free_port())
    cluster = SlurmCluster(root=root, conf=conf, partition=PARTITION, marker=uuid.uuid4().hex)
    env = dict(cluster.env, **{MARKER: cluster.marker, "PATH": _PATH})
    key = root / "munge" / "munge.key"
    socket_path = root / "run" / "munge.socket"

    def start(name: str, *cmd: str) -> None:
        with open(root / "log" / f"{name}.out", "w") as out:  # the daemon keeps its own copy of the descriptor
            cluster.procs[name] = subprocess.Popen(
                list(cmd),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        out.close()

    mp = pytest.MonkeyPatch()
    try:
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, env=env, capture_output=True)
        start(
            "munged",
            "munged",
            "--foreground",
            f"--key-file={key}",
            f"--socket={socket_path}",
            f"--pid-file={root / 'run' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--seed-file={root / 'munge' / 'munged.seed'}",
        )
        _wait(
            "munged",
            lambda: (
                subprocess.run(["munge", "-n", "-S", str(socket_path)], capture_output=True, env=env).returncode == 0
            ),
            cluster,
        )
        start("slurmctld", "slurmctld", "-D", "-i", "-f", str(conf))
        _wait("slurmctld", lambda: cluster.run("scontrol", "ping", check=False, timeout=10).returncode == 0, cluster)
        start("slurmd", "slurmd", "-D", "-N", NODE, "-f", str(conf))
        _wait(
            "slurmd (node idle)",
            lambda: (
                cluster.run(
                    "sinfo", "--noheader", "--format=%t", "--nodes", NODE, check=False, timeout=10
                ).stdout.strip()
                == "idle"
            ),
            cluster,
        )
        mp.setenv("SLURM_CONF", str(conf))
        yield cluster
    finally:
        mp.undo()
        problems = _stop(cluster)
        if not problems:
            shutil.rmtree(root, ignore_errors=True)
        else:
            pytest.fail(
                "Slurm test cluster teardown: " + "; ".join(problems) + f" (logs kept in {root})", pytrace=False
            )
