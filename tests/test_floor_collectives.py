"""Collectives by topology: hand values and nccl-tests busbw conventions (the measured busbw rows, at the catalog
values the product uses, are in tests/test_validation.py)."""

from __future__ import annotations

import pytest

from tracekit.floor import get_gpu
from tracekit.floor.collectives import OPS, Topology, bus_factor, collective_time, gpu_collective_s
from tracekit.floor.decode import collective_bytes

GB = 1e9


def test_ring_allreduce_is_serialisation_plus_latency_per_step():
    topo = Topology("ring", 8, 100 * GB, link_latency_s=2e-6)
    c = collective_time("allreduce", 1 * GB, topo)
    assert c.serialization_s == pytest.approx(2 * 7 / 8 * 1 * GB / (100 * GB))
    assert c.latency_s == pytest.approx(14 * 2e-6) and c.steps == 14
    assert c.busbw_bytes_per_s == pytest.approx(c.algbw_bytes_per_s * 2 * 7 / 8)


def test_switch_adds_the_switching_delay_to_every_hop():
    plain = collective_time("allgather", GB, Topology("ring", 8, 100 * GB, link_latency_s=1e-6))
    switched = collective_time("allgather", GB, Topology("switch", 8, 100 * GB, link_latency_s=1e-6,
                                                         switch_latency_s=0.5e-6))
    assert switched.latency_s - plain.latency_s == pytest.approx(7 * 0.5e-6)


def test_tree_latency_is_logarithmic():
    c = collective_time("allreduce", 1e3, Topology("tree", 64, 100 * GB, link_latency_s=1e-6))
    assert c.steps == 12 and c.latency_s == pytest.approx(12e-6)


def test_torus_beats_mesh_and_fully_connected_alltoall_is_one_step():
    torus = collective_time("allreduce", GB, Topology("torus2d", 16, 100 * GB, dims=(4, 4)))
    mesh = collective_time("allreduce", GB, Topology("mesh2d", 16, 100 * GB, dims=(4, 4)))
    assert mesh.time_s == pytest.approx(2 * torus.time_s)
    a2a = collective_time("alltoall", GB, Topology("fully_connected", 8, 100 * GB, link_latency_s=1e-6))
    assert a2a.steps == 1 and a2a.serialization_s == pytest.approx(7 / 8 * GB / (100 * GB))


def test_hierarchical_bytes_match_the_inference_floor():
    """The hierarchical all-reduce moves the bytes decode.collective_bytes charges per link."""
    topo = Topology("hierarchical", 32, 400 * GB, gpus_per_node=8, inter_bytes_per_s=50 * GB)
    c = collective_time("allreduce", GB, topo)
    intra, inter = collective_bytes("allreduce", GB, 32, 8)
    assert c.serialization_s == pytest.approx(intra / (400 * GB) + inter / (50 * GB))


@pytest.mark.parametrize("op", OPS)
def test_bus_factors_follow_nccl_tests(op):
    want = {"allreduce": 2 * 7 / 8, "allgather": 7 / 8, "reducescatter": 7 / 8, "alltoall": 7 / 8, "sendrecv": 1.0}
    assert bus_factor(op, 8) == pytest.approx(want[op])


def test_bad_topologies_are_rejected():
    with pytest.raises(ValueError, match="dims"):
        Topology("torus2d", 8, GB, dims=(3, 3))
    with pytest.raises(ValueError, match="unknown"):
        Topology("hypercube", 8, GB)
    with pytest.raises(ValueError, match="unknown"):
        collective_time("broadcast", GB, Topology("ring", 8, GB))
    with pytest.raises(ValueError, match="nvls"):
        Topology("nvls", 8, GB)  # no switch efficiency given


def test_nvls_beats_the_ring_only_for_all_reduce():
    ring, nvls = Topology("switch", 8, 360 * GB), Topology("nvls", 8, 360 * GB, nvls_efficiency=0.85)
    assert collective_time("allreduce", GB, nvls).time_s < collective_time("allreduce", GB, ring).time_s
    assert collective_time("allgather", GB, nvls) == collective_time("allgather", GB, ring)


def test_catalog_collective_adds_one_latency_per_collective():
    a100 = get_gpu("a100")  # no NVLink SHARP: the ring over NVSwitch
    t = gpu_collective_s(a100, "allreduce", GB, 8)
    assert t == pytest.approx(2 * 7 / 8 * GB / a100.scaleup_achievable_bytes_per_s + a100.net_latency_ns * 1e-9)
    assert gpu_collective_s(a100, "allreduce", GB, 1) == 0.0


def test_hopper_all_reduce_takes_nvls_on_8_gpus_and_the_ring_on_2():
    h100 = get_gpu("h100")
    up, lat = h100.scaleup_achievable_bytes_per_s, h100.net_latency_ns * 1e-9
    assert gpu_collective_s(h100, "allreduce", GB, 8) == pytest.approx(GB * (1 + 1 / 8) / (up * 0.85) + lat)
    assert gpu_collective_s(h100, "allreduce", GB, 2) == pytest.approx(GB / up + lat)  # 2(n-1)/n = 1 < 1.5/0.85
    assert gpu_collective_s(h100, "allgather", GB, 8) == pytest.approx(7 / 8 * GB / up + lat)
