"""The scaling model, as pure functions (seconds, bytes, bytes per second).

A data-parallel step on N GPUs (batch per GPU fixed) takes the compute time of one GPU plus the part of the
gradient allreduce that the computation does not hide:

    t_step(N) = t_compute + max(0, t_allreduce(N) - overlap * t_compute)

`overlap` is the share of the compute time during which gradients already flow (the backward pass hands
them over layer by layer); 0 means the allreduce starts only when the step's computation is over.

Ring allreduce of B bytes over n ranks: a reduce-scatter and an allgather of n - 1 steps each, every rank
sending B/n per step:  t_ring(n) = 2 (n-1)/n * B / bandwidth + 2 (n-1) * latency.

Over nodes of g GPUs (hierarchical, as Horovod's and NCCL's): a ring inside each node over its g GPUs, and
between the m = ceil(N/g) nodes a ring allreduce of the node's data. The g GPUs of a node each carry B/g of it
in parallel rings that share the node's network link, so the link carries 2 (m-1)/m * B:
    t_hier(N) = t_ring(g; intra link) + 2 (m-1)/m * B / inter_bandwidth + 2 (m-1) * inter_latency.

Weak scaling (fixed batch per GPU): throughput(N) = N * batch / t_step(N), and the scaling efficiency
throughput(N) / (N throughput(1)) = t_compute / t_step(N), at most 1 by construction. fp16 compression halves B.

Bandwidths, latencies and the overlap may be NumPy arrays (the fit's envelope evaluates many at once); GPU counts
are integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Link:
    """A link's effective bandwidth (bytes/s) and latency per message (s)."""

    bandwidth: float
    latency: float = 0.0


@dataclass(frozen=True)
class Network:
    """The two kinds of link a multi-node job uses, and how many GPUs share a node."""

    intra: Link
    inter: Link
    gpus_per_node: int


def ring_allreduce_s(n: int, nbytes: float, link: Link) -> float:
    """Time of a ring allreduce of nbytes over n ranks on `link` (0 for one rank)."""
    if n < 1:
        raise ValueError(f"ring allreduce over {n} ranks")
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / link.bandwidth + 2 * (n - 1) * link.latency


def hierarchical_allreduce_s(n: int, nbytes: float, network: Network) -> float:
    """Time of an allreduce over n GPUs placed gpus_per_node to a node: a ring inside each node, then a ring
    over the nodes whose node-to-node traffic (2 (m-1)/m * nbytes) shares the node's link."""
    per_node = min(n, int(network.gpus_per_node))
    nodes = math.ceil(n / per_node)
    inside = ring_allreduce_s(per_node, nbytes, network.intra)
    between = ring_allreduce_s(nodes, nbytes, network.inter)
    return inside + between


def step_time_s(compute_s: float, allreduce_s: float, overlap: float) -> float:
    """Compute time plus the part of the allreduce the computation does not hide."""
    if np.any(np.asarray(overlap) < 0.0) or np.any(np.asarray(overlap) > 1.0):
        raise ValueError(f"overlap {overlap} is not a share in [0, 1]")
    exposed = np.maximum(0.0, allreduce_s - overlap * compute_s)
    return compute_s + (float(exposed) if np.ndim(exposed) == 0 else exposed)


def efficiency(n: int, compute_s: float, nbytes: float, network: Network, overlap: float) -> float:
    """Weak-scaling efficiency at n GPUs: t_compute / t_step(n)."""
    return compute_s / step_time_s(compute_s, hierarchical_allreduce_s(n, nbytes, network), overlap)


def throughput(n: int, batch_per_gpu: int, compute_s: float, nbytes: float, network: Network, overlap: float) -> float:
    """Images per second of n GPUs."""
    return n * batch_per_gpu / step_time_s(compute_s, hierarchical_allreduce_s(n, nbytes, network), overlap)
