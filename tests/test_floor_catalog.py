"""The network and catalog fixes of issue 25: NVLS (and NVLS-tree across nodes) where the GPU has it, node-limited
routing in the inference all-to-all, a 72-GPU NVLink domain, FP4 peaks and NVFP4 experts, FP8 attention with an
FP8 KV cache, and the V100's datasheet peak."""

from __future__ import annotations

import pytest

from tracekit.budgets.configs import load_config
from tracekit.floor import compute_floor, get_gpu
from tracekit.floor.decode import route_collective
from tracekit.floor.moe_a2a import remote_nodes_per_token


def test_node_limited_routing_reaches_fewer_nodes() -> None:
    assert remote_nodes_per_token(8, 8) == pytest.approx(7 * (1 - (7 / 8) ** 8))  # 4.59, uniform
    assert remote_nodes_per_token(8, 8, 8, 4) == pytest.approx(4 * (1 - 0.75**8) * 7 / 8)  # 3.15, DeepSeek EP64
    for nodes in (2, 4, 8, 16, 18, 32):
        for k in (1, 2, 8):
            assert remote_nodes_per_token(k, nodes, 8, 4) <= remote_nodes_per_token(k, nodes) + 1e-12


def test_deepseek_declares_its_group_limit_and_the_a2a_honours_it() -> None:
    uniform = route_collective("a2a", 1e6, 64, 8, 0.0, 8)
    limited = route_collective("a2a", 1e6, 64, 8, 0.0, 8, (8, 4))
    assert limited[2] == pytest.approx(uniform[2] * 3.1496 / 4.5947, rel=1e-3) and limited[0] == uniform[0]
    r = compute_floor(load_config("dsv3-ep144-h800"))
    assert r.config.model.topk_group == 4 and r.config.model.n_group == 8


@pytest.mark.parametrize("gpu", ["h100", "h200", "h800", "h20", "b200", "gb200"])
def test_every_nvswitch_gpu_has_nvls_and_multi_node_all_reduce_uses_it_in_the_node(gpu: str) -> None:
    hw = get_gpu(gpu)
    assert hw.nvls_efficiency > 0
    intra, nvls, inter = route_collective("allreduce", 1e9, 8, 8, 1.0)
    assert (intra, inter) == (0.0, 0.0) and nvls == pytest.approx(1e9 * 9 / 8)
    intra, nvls, inter = route_collective("allreduce", 1e9, 16, 8, 1.0)  # NVLS-tree: switch inside, NIC across
    assert intra == 0.0 and nvls == pytest.approx(1e9 * 9 / 8) and inter == pytest.approx(2e9 * 1 / 16)


def test_no_nvls_keeps_the_ring() -> None:
    assert get_gpu("a100").nvls_efficiency == 0
    intra, nvls, _ = route_collective("allreduce", 1e9, 8, 8, 0.0)
    assert nvls == 0 and intra == pytest.approx(2e9 * 7 / 8)


def test_gb200_nvl72_keeps_the_all_to_all_on_nvlink() -> None:
    hw = get_gpu("gb200")
    assert hw.gpus_per_node == 72
    r = compute_floor(load_config("dsv3-ep48-gb200"))
    a2a = [p for p in r.parts if p.name.startswith("a2a_")]
    assert a2a and all(p.net_ns == round(p.net_bytes / hw.scaleup_bytes_per_s * 1e9) for p in a2a)
    assert route_collective("a2a", 1e6, 144, 72, 0.0, 8, (8, 4))[2] > 0  # two racks: the NIC again


def test_fp4_peaks_and_nvfp4_experts() -> None:
    assert get_gpu("b200").peak_flops_per_s("fp4") == 9e15
    assert get_gpu("gb200").peak_flops_per_s("fp4") == 10e15
    assert get_gpu("h100").peak_flops_per_s("fp4") == get_gpu("h100").fp8_flops_per_s  # no FP4 units
    assert get_gpu("a100").peak_flops_per_s("fp4") == get_gpu("a100").bf16_flops_per_s
    parts = {p.name: p for p in compute_floor(load_config("dsv3-ep48-gb200")).parts}
    assert parts["moe_experts"].flops_dtype == "fp4"
    fp8 = {p.name: p for p in compute_floor(load_config("dsv3-ep48-gb200", {"expert_weight_dtype": "fp8"})).parts}
    want = fp8["moe_experts"].weight_bytes * (0.5 + 1 / 16)
    assert parts["moe_experts"].weight_bytes == pytest.approx(want, rel=1e-6)
    assert parts["moe_experts"].compute_ns < fp8["moe_experts"].compute_ns


def test_an_fp8_kv_cache_charges_attention_flops_at_fp8() -> None:
    fp8 = {p.name: p for p in compute_floor(load_config("dsv32-ep16")).parts}["attn_core"]
    bf16 = {p.name: p for p in compute_floor(load_config("dsv32-ep16", {"kv_format": "bf16"})).parts}["attn_core"]
    assert fp8.flops_dtype == "fp8" and bf16.flops_dtype == "bf16" and fp8.flops == bf16.flops
    assert fp8.compute_ns == pytest.approx(bf16.compute_ns / 2, rel=1e-3)  # H20: FP8 296 vs BF16 148 TFLOP/s


def test_v100_peak_is_the_sxm2_datasheet() -> None:
    assert get_gpu("v100").bf16_flops_per_s == 125e12


def test_the_latency_chain_is_one_hop_per_collective_and_binds_when_links_are_slow() -> None:
    from dataclasses import replace

    r = compute_floor(load_config("dsv32-tp16", {"batch": "1"}))  # two nodes: every collective crosses the NIC
    msgs = sum(p.net_messages for p in r.parts)
    assert msgs == 123 and r.latency_chain_ns == round(msgs * r.config.hardware.net_hop_ns)
    assert r.t_opt_ns == max(r.resource_ns.values()) > r.latency_chain_ns and r.binding == "hbm"
    one_node = compute_floor(load_config("llama3-70b-tp8-h100", {"batch": "1"}))
    assert one_node.latency_chain_ns == round(sum(p.net_messages for p in one_node.parts) * 600)
    cfg = load_config("dsv32-tp16", {"batch": "1"})
    slow = compute_floor(replace(cfg, hardware=replace(cfg.hardware, net_hop_ns=100_000)))
    assert slow.binding == "latency" and slow.t_opt_ns == slow.latency_chain_ns == 123 * 100_000
    assert slow.t_sum_ns == sum(slow.resource_ns.values()) + slow.latency_chain_ns
    # the estimate adds the calibrated 10 us per collective on the critical path
    assert r.expected_ns >= msgs * r.config.hardware.net_latency_ns + r.resource_ns["hbm"]
