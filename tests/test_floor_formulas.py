"""Unit tests of the floor formulas against hand calculations (exact unless a tolerance is stated)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tracekit.budgets.configs import load_config
from tracekit.floor import CLASS_NAMES, ConfigError, compute_floor, expected_distinct_experts, place_measured
from tracekit.floor.decode import FP8_DISPATCH_BYTES, causal_pairs, collective_bytes


def part(result, name):
    return next(p for p in result.parts if p.name == name)


def test_class_names_contract():
    assert CLASS_NAMES == (
        "attn_proj",
        "attn_core",
        "indexer",
        "moe_router",
        "moe_experts",
        "shared_expert",
        "dense_mlp",
        "lm_head",
        "norm_elementwise",
        "quant",
        "a2a_dispatch",
        "a2a_combine",
        "allreduce",
        "allgather",
        "reducescatter",
        "sendrecv",
        "sampling",
        "embedding",
        "optimizer",
    )


def test_expected_distinct_experts_hand_values():
    # E = 4, k = 2, T = 2: each expert missed by one token with p = 1/2 -> touched = 4 * (1 - 1/4) = 3
    assert expected_distinct_experts(4, 2, 2) == pytest.approx(3.0)
    # one token touches exactly k experts; a GPU holding 16 of 256 sees 16 * 8/256 = 0.5 on average
    assert expected_distinct_experts(256, 8, 1) == pytest.approx(8.0)
    assert expected_distinct_experts(256, 8, 1, 16) == pytest.approx(0.5)
    assert expected_distinct_experts(256, 8, 0) == 0.0
    # many tokens touch all experts, never more
    assert expected_distinct_experts(256, 8, 10_000) == pytest.approx(256.0)
    # neither top-k only nor all experts at 128 tokens: 256 * (1 - (31/32)^128)
    assert expected_distinct_experts(256, 8, 128) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 128))


def test_causal_pairs():
    assert causal_pairs(4) == 10  # 1 + 2 + 3 + 4
    assert causal_pairs(4, window=2) == 7  # 1 + 2 + 2 + 2
    assert causal_pairs(2, window=2048) == 3


def test_collective_bytes_busbw_factors():
    s = 1_000_000.0
    # NCCL busbw (nccl-tests PERFORMANCE.md): allreduce 2(n-1)/n; allgather, reducescatter, a2a (n-1)/n
    assert collective_bytes("allreduce", s, 8, 8) == (pytest.approx(s * 2 * 7 / 8), 0.0)
    assert collective_bytes("allgather", s, 4, 8) == (pytest.approx(s * 3 / 4), 0.0)
    assert collective_bytes("a2a", s, 8, 8) == (pytest.approx(s * 7 / 8), 0.0)
    # 16 ranks on 2 nodes of 8: hierarchical allreduce, uniform all-to-all
    intra, inter = collective_bytes("allreduce", s, 16, 8)
    assert intra == pytest.approx(2 * s * 7 / 8) and inter == pytest.approx(2 * s * 1 / 16)
    intra, inter = collective_bytes("a2a", s, 16, 8)
    assert intra == pytest.approx(s * 7 / 16) and inter == pytest.approx(s * 8 / 16)
    assert collective_bytes("allreduce", s, 1, 8) == (0.0, 0.0)


def test_dense_decode_vector_by_hand():
    """Qwen3-8B, 1 request, 2048 tokens of context, one H100, physical peaks."""
    cfg = load_config("qwen3-8b-tp1-h100", {"batch": "1", "context_tokens": "2048", "peaks": "physical"})
    r = compute_floor(cfg)
    layers, d = 36, 4096
    p_attn = 2 * d * 32 * 128 + 2 * d * 8 * 128  # q + o, k + v
    ap = part(r, "attn_proj")
    assert ap.weight_bytes == layers * p_attn * 2
    assert ap.flops == layers * 2 * p_attn
    assert ap.hbm_bytes == layers * p_attn * 2 + layers * (2 * d + 32 * 256) * 2
    ac = part(r, "attn_core")
    assert ac.kv_bytes == layers * 2049 * (2 * 8 * 128 * 2)  # read 2048 + write 1 token, 4096 B/token/layer
    assert ac.flops == layers * 2048 * 4 * 32 * 128
    mlp = part(r, "dense_mlp")
    assert mlp.weight_bytes == layers * 3 * d * 12288 * 2
    assert mlp.flops == layers * 2 * 3 * d * 12288
    # physical peaks: HBM time = bytes / 3.35 TB/s, compute = FLOPs / 989.4 TFLOP/s, no network
    for p in r.parts:
        assert p.hbm_ns == round(p.hbm_bytes / 3.35e12 * 1e9)
        assert abs(p.compute_ns - p.flops / 989.4e12 * 1e9) <= 1
        assert p.floor_ns == max(p.hbm_ns, p.compute_ns, p.net_ns)
    assert r.resource_ns["network"] == 0
    assert {p.name for p in r.parts} <= set(CLASS_NAMES)
    assert "moe_experts" not in {p.name for p in r.parts}


def test_t_opt_is_max_and_t_sum_is_sum():
    r = compute_floor(load_config("dsv32-ep16"))
    assert r.latency_chain_ns == sum(p.latency_ns for p in r.parts) > 0
    assert r.t_opt_ns == max(*r.resource_ns.values(), r.latency_chain_ns)
    assert r.t_sum_ns == sum(r.resource_ns.values()) + r.latency_chain_ns
    assert r.resource_ns["hbm"] == sum(p.hbm_ns for p in r.parts)
    assert r.resource_ns["network"] == sum(p.net_ns for p in r.parts)
    assert r.resource_ns[r.binding] == r.t_opt_ns
    assert r.t_opt_ns <= r.t_sum_ns


def test_floor_is_physical_and_expected_carries_the_derates():
    """t_opt and every class time use spec-sheet peaks; the calibrated derates (HBM x0.8, size-dependent compute,
    NCCL busbw, 10 us per collective) only make expected_ns, the estimate beside the floor."""
    r = compute_floor(load_config("llama3-70b-tp8-h100"))
    assert r.peak_kind == "physical" and r.expected_peak_kind == "achievable"
    for p in r.parts:
        assert p.hbm_ns == round(p.hbm_bytes / 3.35e12 * 1e9)
        assert p.expected_ns >= p.floor_ns
    # 2 all-reduces per layer (attention, MLP) of the hidden state; on 8 H100s NVLink SHARP beats the ring:
    # S (1 + 1/8) each way, at the 450 GB/s line rate in the floor, at 0.85 of the 370 GB/s busbw plus 10 us
    # (aiconfigurator p2p_latency) per collective in the estimate
    ar = part(r, "allreduce")
    assert ar.net_messages == 160
    hidden = 64 * 8192 * 2
    assert ar.net_bytes == round(160 * hidden * (1 + 1 / 8))
    assert ar.net_ns == pytest.approx(ar.net_bytes / 450e9 * 1e9, abs=2)
    assert ar.expected_ns == pytest.approx(ar.net_bytes / (370e9 * 0.85) * 1e9 + 160 * 10_000, abs=2)
    # the step estimate is the old achievable floor: HBM at 0.8 of the spec binds here
    assert r.expected_ns >= r.resource_ns["hbm"] / 0.8 - len(r.parts)
    assert r.t_opt_ns < r.expected_ns


def test_gpus_without_nvls_all_reduce_on_the_ring():
    ar = part(compute_floor(load_config("llama3-70b-tp8-h100", {"hardware": "a100"})), "allreduce")
    assert ar.net_bytes == round(160 * 64 * 8192 * 2 * 2 * 7 / 8)
    assert ar.net_ns == pytest.approx(ar.net_bytes / 300e9 * 1e9, abs=2)
    assert ar.expected_ns == pytest.approx(ar.net_bytes / 230e9 * 1e9 + 160 * 10_000, abs=2)


def test_size_dependent_compute_efficiency():
    h100 = load_config("qwen3-8b-tp1-h100").hardware
    # calculon a100_80g.json fp16 matrix table: 128 GFLOP 0.95, 16 -> 0.9, 1 -> 0.6, below -> 0.1
    assert h100.compute_efficiency(200e9) == 0.95
    assert h100.compute_efficiency(16e9) == 0.9
    assert h100.compute_efficiency(2e9) == 0.6
    assert h100.compute_efficiency(1e6) == 0.1


def test_mfu_mbu_ridge_identity():
    r = compute_floor(load_config("dsv32-ep16"))
    for t in (r.t_opt_ns, r.t_sum_ns, 41_000_000):
        assert r.mfu(t) / r.mbu(t) == pytest.approx(
            r.i_work_flops_per_byte / r.i_ridge_flops_per_byte, rel=1e-12
        )
    assert r.mfu(1_000_000) == pytest.approx(r.total("flops") / (1e-3 * 296e12))


def test_placement_positions_and_verdicts():
    r = compute_floor(load_config("dsv32-ep16"))
    t_opt, t_sum = r.t_opt_ns, r.t_sum_ns
    assert place_measured(r, t_opt).position == pytest.approx(0.0)
    assert place_measured(r, t_sum).position == pytest.approx(1.0)
    mid = place_measured(r, (t_opt + t_sum) // 2)
    assert mid.position == pytest.approx(0.5, abs=1e-6)
    assert mid.residual_ratio == pytest.approx(((t_opt + t_sum) // 2) / t_opt)
    assert place_measured(r, int(t_opt * 1.29)).verdict == "near-floor"
    assert place_measured(r, int(t_opt * 1.31)).verdict == "above-floor"
    assert place_measured(r, int(t_opt * 1.31), threshold=1.5).verdict == "near-floor"
    # the stop rule at physical peaks: under 0.95 x t_opt is impossible (config or capture wrong), not fast
    below = place_measured(r, int(t_opt * 0.94))
    assert below.verdict == "inconclusive" and "faster than the physical lower bound" in below.reason
    assert place_measured(r, int(t_opt * 0.96)).verdict == "near-floor"
    above = place_measured(r, 3 * t_sum)
    assert above.position > 1 and "above t_sum" in above.reason
    with pytest.raises(ValueError):
        place_measured(r, 0)


def test_mla_latent_replicated_under_tp_partitioned_under_dp():
    ep, tp = load_config("dsv32-ep16"), load_config("dsv32-tp16")
    per_request_gpu = 4096 * 61 * (656 + 132)  # FlashMLA FP8 latent + indexer key, every layer
    hbm = tp.hardware.hbm_bytes  # the H20's memory as the device reports it (binary MiB), not the 96 GB sold
    assert hbm > 96e9 and hbm % 2**20 == 0
    free_tp = hbm - tp.weight_bytes_per_gpu - 8e9
    free_ep = hbm - ep.weight_bytes_per_gpu - 8e9
    assert tp.kv_capacity_requests == math.floor(free_tp / per_request_gpu)  # one copy per rank: 1 group
    assert ep.kv_capacity_requests == math.floor(free_ep / per_request_gpu) * 16  # 16 groups
    # the attention core of every TP rank reads the whole latent of every request
    r_tp = compute_floor(replace(tp, batch=16))
    assert part(r_tp, "attn_core").kv_bytes == 61 * 16 * 2049 * 656


def test_gqa_kv_heads_sharded_then_replicated():
    llama = load_config("llama3-70b-tp8-h100")  # 8 KV heads on 8 ranks: 1 each
    r = compute_floor(replace(llama, batch=8, context_tokens=1000))
    assert part(r, "attn_core").kv_bytes == 80 * 8 * 1001 * (2 * 1 * 128 * 2)
    qwen = load_config("qwen3-235b-ep8-h200")  # 4 KV heads on 8 ranks: each rank still holds one
    r = compute_floor(replace(qwen, batch=8, context_tokens=1000))
    assert part(r, "attn_core").kv_bytes == 94 * 8 * 1001 * (2 * 1 * 128 * 2)


def test_dsa_changes_kv_bandwidth_not_capacity():
    short = load_config("dsv32-ep16", {"context_tokens": "16384", "batch": "16"})
    longer = load_config("dsv32-ep16", {"context_tokens": "32768", "batch": "16"})
    rs, rl = compute_floor(short), compute_floor(longer)
    # core attention reads top-k = 2048 tokens (+1 written) whatever the context ...
    assert part(rs, "attn_core").kv_bytes == part(rl, "attn_core").kv_bytes == 61 * 1 * 2049 * 656
    # ... while the indexer scans the whole context of 132-byte keys
    assert part(rl, "indexer").kv_bytes == 61 * 1 * 32769 * 132
    # capacity counts the full context
    assert longer.kv_capacity_requests == pytest.approx(short.kv_capacity_requests / 2, abs=16)


def test_moe_weight_traffic_between_topk_and_all():
    cfg = load_config("dsv32-ep16", {"batch": "16"})
    r = compute_floor(cfg)
    expert_bytes = 3 * 7168 * 2048 * 1  # FP8
    touched = expected_distinct_experts(256, 8, 16, 16)
    assert part(r, "moe_experts").weight_bytes == round(58 * touched * expert_bytes)
    assert 58 * 16 * 8 / 256 * expert_bytes < part(r, "moe_experts").weight_bytes < 58 * 16 * expert_bytes


def test_ep_all_to_all_volume():
    r = compute_floor(load_config("dsv32-ep16", {"batch": "16"}))
    # 1 token per GPU, top-8, d = 7168, FP8 + scales dispatch, BF16 combine, 58 MoE layers
    # 16 ranks on 2 nodes: 7/16 of the copies to the 7 other GPUs of the node over NVLink, and each token
    # once to the other node when one of its 8 experts lives there (1 - (1/2)^8), not once per expert
    disp, comb = part(r, "a2a_dispatch"), part(r, "a2a_combine")
    per_copy = 58 * 7168 * FP8_DISPATCH_BYTES
    assert disp.net_bytes == round(per_copy * 8 * 7 / 16 + per_copy * (1 - 0.5**8))
    assert comb.net_bytes == round(58 * 7168 * 2 * (8 * 7 / 16 + (1 - 0.5**8)))
    assert disp.net_messages == comb.net_messages == 58


def test_prefill_phase_counts_every_prompt_token():
    cfg = load_config("qwen3-8b-tp1-h100", {"phase": "prefill", "batch": "2", "context_tokens": "1024"})
    r = compute_floor(cfg)
    p_attn = 2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128
    assert part(r, "attn_proj").flops == 36 * 2 * 2048 * p_attn
    assert part(r, "attn_core").flops == 36 * 2 * (1024 * 1025 / 2) * 4 * 32 * 128
    assert r.tokens_per_step == 2048
    assert r.binding == "compute"


def test_tokens_per_step_scales_per_token_work_not_weights():
    """MTP / speculative decoding: 2 accepted tokens per request per step double the per-token counts, read the
    weights and the cached context once, and halve the floor per output token only as far as weights dominate."""
    one = compute_floor(load_config("dsv32-ep16", {"batch": "64"}))
    two = compute_floor(load_config("dsv32-ep16", {"batch": "64", "tokens_per_step": "2"}))
    for name in ("attn_proj", "shared_expert", "dense_mlp"):
        assert part(two, name).weight_bytes == part(one, name).weight_bytes
        assert part(two, name).flops == 2 * part(one, name).flops
    core1, core2 = part(one, "attn_core"), part(two, "attn_core")
    assert core2.kv_bytes == core1.kv_bytes + 61 * 4 * 656  # 4 requests per GPU write one more token each
    assert core2.flops == 2 * core1.flops
    assert two.tokens_per_step == 2 * one.tokens_per_step == 128
    assert one.t_opt_ns <= two.t_opt_ns < 2 * one.t_opt_ns
    assert two.per_token_ns(two.t_opt_ns) < one.t_opt_ns
    tpot = place_measured(two, two.per_token_ns(two.t_opt_ns) * 11 // 10, per_token=True)
    assert tpot.verdict == "near-floor" and tpot.residual_ratio == pytest.approx(1.1, abs=1e-3)
    with pytest.raises(ConfigError, match="tokens_per_step"):
        load_config("dsv32-ep16", {"tokens_per_step": "0.5"})
    with pytest.raises(ConfigError, match="applies to decode"):
        load_config("dsv32-ep16", {"tokens_per_step": "2", "phase": "prefill", "batch": "16"})
