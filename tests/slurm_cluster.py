"""The `slurm_cluster` fixture: the rehearsal cluster of scripts/cluster.py (`make cluster-up`), a login host and two
nodes (node1, node2) each in its own namespaces, started in a temporary folder for the test session.

Registered as a plugin in conftest.py. It starts the cluster (its own namespaces, bridge and private /24, so a
user's .cluster/ may run beside it), sets SLURM_CONF for the whole session, and on teardown cancels every job,
stops the daemons, removes the namespaces and links, and fails the run if anything of the cluster was left.

Needs root and Debian's munge, slurmctld, slurmd, slurm-client (Slurm 22.05 on bookworm), iproute2 and util-linux.
Not root: the tests are skipped, saying so; as root with a package missing: they fail with the apt-get command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from helpers import load_script

cluster_tool = load_script("cluster")


class SlurmCluster(cluster_tool.Cluster):
    """The running cluster, with what the tests ask of it."""

    def run(self, *cmd: str, timeout: float = 60, check: bool = True):
        try:
            return super().run(*cmd, timeout=timeout, check=check)
        except cluster_tool.ClusterError as err:
            raise AssertionError(f"{err}\n{self.log_tails()}") from None

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

    def node_pids(self, node: str) -> list[int]:
        """The processes running on `node`: those in its network namespace (`ip netns pids`)."""
        return [int(pid) for pid in cluster_tool.network.ip("netns", "pids", self.netns(node)).split()]


@pytest.fixture(scope="session")
def slurm_cluster():
    """The running two-node rehearsal cluster (SLURM_CONF set for the session); gone, nothing left, at the end."""
    why = cluster_tool.refusal()
    if why and os.geteuid() != 0:
        pytest.skip(f"a real Slurm: {why}")
    if why:
        pytest.fail(f"Slurm tests: {why}", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="scalestudy-slurm-"))
    mp = pytest.MonkeyPatch()
    try:
        started = cluster_tool.up(root, name="t" + uuid.uuid4().hex[:6])
        mp.setenv("SLURM_CONF", str(started.conf))
        yield SlurmCluster(**vars(started))
    finally:
        mp.undo()
        problems = cluster_tool.down(root)
        if problems:
            pytest.fail(f"Slurm test cluster teardown: {'; '.join(problems)} (logs kept in {root})", pytrace=False)
        shutil.rmtree(root, ignore_errors=True)
