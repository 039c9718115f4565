"""The scaling model's cost formulas (scaling/cost.py) against values worked out by hand from the module's formulas,
at their edges: one rank, a node boundary (ceil, not floor), overlap 0 and 1, a fully hidden allreduce."""

import pytest

from scalestudy.scaling.cost import (
    Link,
    Network,
    efficiency,
    hierarchical_allreduce_s,
    ring_allreduce_s,
    step_time_s,
    throughput,
)

# 8 MB of gradients; NVLink-like inside a node (10 GB/s, 1 us), a network between nodes (1 GB/s, 10 us)
B = 8e6
NET = Network(intra=Link(1e10, 1e-6), inter=Link(1e9, 1e-5), gpus_per_node=4)


def test_ring_allreduce_by_hand():
    # 2 (n-1)/n B / bw + 2 (n-1) lat = 2 * 3/4 * 8e6 / 1e9 + 6 * 1e-5 = 0.012 + 0.00006
    assert ring_allreduce_s(4, B, Link(1e9, 1e-5)) == pytest.approx(0.01206, rel=1e-12)
    assert ring_allreduce_s(2, B, Link(1e9)) == pytest.approx(0.008, rel=1e-12)  # latency 0 by default
    assert ring_allreduce_s(1, B, Link(1e9, 1e-5)) == 0.0
    for n in (0, -1):
        with pytest.raises(ValueError, match=rf"^ring allreduce over {n} ranks$"):
            ring_allreduce_s(n, B, Link(1e9))


def test_hierarchical_allreduce_by_hand():
    # 16 GPUs, 4 per node: inside 2*3/4*8e6/1e10 + 6e-6 = 0.001206; between 4 nodes 0.01206 (as above)
    assert hierarchical_allreduce_s(16, B, NET) == pytest.approx(0.001206 + 0.01206, rel=1e-12)
    # 6 GPUs: 4 per node on ceil(6/4) = 2 nodes: 0.001206 + (2*1/2*8e6/1e9 + 2e-5 = 0.00802)
    assert hierarchical_allreduce_s(6, B, NET) == pytest.approx(0.001206 + 0.00802, rel=1e-12)
    # 2 GPUs on one node: a ring of 2 inside (8e6/1e10 + 2e-6 = 0.000802), nothing between nodes
    assert hierarchical_allreduce_s(2, B, NET) == pytest.approx(0.000802, rel=1e-12)
    assert hierarchical_allreduce_s(1, B, NET) == 0.0


def test_step_time_hides_only_the_overlapped_share():
    assert step_time_s(0.1, 0.05, 0.25) == pytest.approx(0.125, rel=1e-12)  # 0.1 + (0.05 - 0.025)
    assert step_time_s(0.1, 0.05, 0.0) == pytest.approx(0.15, rel=1e-12)
    assert step_time_s(0.1, 0.05, 1.0) == 0.1  # the whole allreduce hidden
    assert step_time_s(0.1, 0.01, 0.5) == 0.1  # never less than the compute time
    for overlap in (-0.01, 1.01):
        with pytest.raises(ValueError, match=rf"^overlap {overlap} is not a share in \[0, 1\]$"):
            step_time_s(0.1, 0.05, overlap)


def test_efficiency_and_throughput_by_hand():
    # 16 GPUs, no overlap: step = 0.1 + 0.013266 = 0.113266 s
    assert efficiency(16, 0.1, B, NET, 0.0) == pytest.approx(0.1 / 0.113266, rel=1e-12)
    assert throughput(16, 64, 0.1, B, NET, 0.0) == pytest.approx(16 * 64 / 0.113266, rel=1e-12)
    # overlap 0.5 hides 0.05 s > 0.013266 s: perfect scaling
    assert efficiency(16, 0.1, B, NET, 0.5) == 1.0
    assert throughput(16, 64, 0.1, B, NET, 0.5) == pytest.approx(16 * 64 / 0.1, rel=1e-12)
    # half the bytes (fp16): 2*3/4*4e6/1e10 + 6e-6 + 2*3/4*4e6/1e9 + 6e-5 = 0.000606 + 0.00606
    assert efficiency(16, 0.1, B / 2, NET, 0.0) == pytest.approx(0.1 / (0.1 + 0.000606 + 0.00606), rel=1e-12)
