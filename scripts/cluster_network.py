"""The rehearsal cluster's network (scripts/cluster.py): a bridge on the login side (this machine's own network
namespace), and per node a network namespace whose eth0 is one end of a veth pair, the other end on the bridge.

Names come from the cluster (its `bridge`, `netns(node)`, `veth(node)`), addresses from a private 10.233.N.0/24
that this machine does not use (the bridge .1, the nodes .11, .12). Standard library only: `ip` of iproute2.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
LOCK = Path("/run/lock/scalestudy-cluster.lock")  # two `up`s at once must not pick the same subnet


class ClusterError(RuntimeError):
    """The cluster did not start, or cannot: the message says why (an `ip` command's error, the daemons' logs)."""


def ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, env=dict(os.environ, PATH=PATH))
    if check and proc.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def free_subnet() -> str:
    """The first 10.233.N (N from 40) that no address or route of this machine uses."""
    used = ip("-4", "-o", "addr") + ip("-4", "route")
    for third in range(40, 255):
        if f"10.233.{third}." not in used:
            return f"10.233.{third}"
    raise ClusterError("no free 10.233.N.0/24 for the rehearsal cluster's network")


def create(c) -> None:
    """The bridge with the login address, and per node its namespace, veth pair and address."""
    ip("link", "add", c.bridge, "type", "bridge")
    ip("addr", "add", f"{c.login_addr}/24", "dev", c.bridge)
    ip("link", "set", c.bridge, "up")
    for node in c.nodes:
        ns, veth = c.netns(node), c.veth(node)
        ip("netns", "add", ns)
        ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        ip("link", "set", veth + "p", "netns", ns)
        ip("-n", ns, "link", "set", veth + "p", "name", "eth0")
        ip("-n", ns, "addr", "add", f"{c.node_addr(node)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")  # a one-node job's ranks meet on the node's loopback
        ip("link", "set", veth, "master", c.bridge)
        ip("link", "set", veth, "up")


def claim(c) -> None:
    """Make the network on a free subnet, under a lock of the machine's: two `up`s at once pick different ones."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        taken = left(c)
        if taken:  # another cluster's (or anyone's): never ours to remove
            raise ClusterError(f"{', '.join(taken)} exist already: start this cluster with another --name")
        c.subnet = free_subnet()
        c.save()  # from here on `down` finds what to remove
        create(c)


def remove(c) -> None:
    """Everything `create` made, whatever of it is there."""
    for node in c.nodes:
        ip("link", "del", c.veth(node), check=False)  # deletes the node's eth0 with it
        ip("netns", "del", c.netns(node), check=False)
    ip("link", "del", c.bridge, check=False)


def left(c) -> list[str]:
    """The cluster's namespaces and links that exist (by name)."""
    namespaces = {line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0] for line in ip("-o", "link").splitlines()}
    found = [f"network namespace {c.netns(n)}" for n in c.nodes if c.netns(n) in namespaces]
    return found + [f"link {link}" for link in (c.bridge, *map(c.veth, c.nodes)) if link in links]
