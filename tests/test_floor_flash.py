"""FlashAttention and standard attention byte counts: hand values and the FlashAttention paper's Fig. 2."""

from __future__ import annotations

import pytest

from tracekit.floor.flash import AttnShape, attention_cost, attention_flops, block_sizes

A100_SRAM = 192 * 1024  # FlashAttention paper section 2.1: 192 KB SRAM per SM
N, D = 1024, 64


def fwd_bwd(shape: AttnShape, kernel: str) -> float:
    return sum(attention_cost(shape, kernel, x, A100_SRAM).hbm_bytes for x in ("fwd", "bwd"))


def test_block_sizes_follow_algorithm_1():
    # M = 196608 B / 2 B = 98304 elements: B_c = ceil(98304 / 256) = 384, B_r = min(384, 64) = 64
    assert block_sizes(A100_SRAM, 64) == (64, 384)
    assert block_sizes(A100_SRAM, 128) == (128, 192)


def test_fa1_forward_restreams_q_and_o_per_kv_block():
    one = AttnShape(pairs=1, n_q=N, n_k=N, head_dim=D, causal=False)
    t_c = 3  # ceil(1024 / 384)
    q = N * D * 2
    want = 2 * q + t_c * (3 * q + 4 * N * 4)  # K, V once; Q, O read and O written per block; l, m in FP32
    assert attention_cost(one, "fa1", "fwd", A100_SRAM).hbm_bytes == want
    causal = AttnShape(pairs=1, n_q=N, n_k=N, head_dim=D, causal=True)
    assert attention_cost(causal, "fa1", "fwd", A100_SRAM).hbm_bytes == 2 * q + (t_c + 1) / 2 * (3 * q + 16 * N)


def test_fa2_hbm_is_compulsory_and_l2_carries_the_kv_rereads():
    one = AttnShape(pairs=1, n_q=N, n_k=N, head_dim=D, causal=False)
    cost = attention_cost(one, "fa2", "fwd", A100_SRAM)
    q = N * D * 2
    assert cost.hbm_bytes == 4 * q + N * 4  # Q, K, V read, O written, LSE
    assert cost.l2_bytes == 2 * q + N * 4 + 16 * 2 * q  # K, V re-read once per 64-row query block


def test_flops_fwd_bwd_and_causal_halving():
    one = AttnShape(pairs=2, n_q=N, n_k=N, head_dim=D, causal=False)
    assert attention_flops(one, "fa2", "fwd") == 4 * N * N * D * 2
    assert attention_flops(one, "fa2", "bwd") == 2.5 * 4 * N * N * D * 2
    assert attention_flops(one, "standard", "bwd") == 2 * 4 * N * N * D * 2
    causal = AttnShape(pairs=2, n_q=N, n_k=N, head_dim=D, causal=True)
    assert attention_flops(causal, "fa1", "fwd") == attention_flops(one, "fa1", "fwd") / 2


def test_standard_attention_grows_quadratically_and_flash_does_not():
    small = AttnShape(pairs=1, n_q=N, n_k=N, head_dim=D)
    big = AttnShape(pairs=1, n_q=4 * N, n_k=4 * N, head_dim=D)
    assert fwd_bwd(big, "standard") / fwd_bwd(small, "standard") == pytest.approx(16, rel=0.05)
    assert fwd_bwd(big, "fa2") / fwd_bwd(small, "fa2") == pytest.approx(4, rel=0.01)


def test_gpt2_medium_attention_hbm_traffic_matches_fig2():
    """FlashAttention paper Fig. 2 (facts section 5): GPT-2 medium attention, N 1024, d 64, 16 heads, batch 64,
    forward + backward: standard 40.3 GB, FlashAttention 4.4 GB. Tolerance 15 %. The figure states no mask,
    so the dense (non-causal) kernel is counted; the ratio must stay near the paper's 9.2x (within 15 %)."""
    shape = AttnShape(pairs=64 * 16, n_q=N, n_k=N, head_dim=D, causal=False)
    standard, flash = fwd_bwd(shape, "standard"), fwd_bwd(shape, "fa1")
    assert standard == pytest.approx(40.3e9, rel=0.15)
    assert flash == pytest.approx(4.4e9, rel=0.15)
    assert standard / flash == pytest.approx(40.3 / 4.4, rel=0.15)


def test_unknown_kernel_and_direction_are_rejected():
    shape = AttnShape(pairs=1, n_q=N, n_k=N, head_dim=D)
    with pytest.raises(ValueError, match="unknown"):
        attention_cost(shape, "fa9", "fwd", A100_SRAM)
    with pytest.raises(ValueError, match="unknown"):
        attention_cost(shape, "fa2", "sideways", A100_SRAM)
