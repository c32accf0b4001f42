"""A floor is a lower bound: for every published measurement in floor-facts.md, the floor of that
configuration is not slower than what was measured. Operating points not in the sources are stated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tracekit.budgets.configs import load_config
from tracekit.floor import compute_floor, get_model
from tracekit.floor.walls import frontier


def best_tokens_per_s_per_node(cfg) -> float:
    """Highest floor throughput over every feasible concurrency (8 GPUs per node)."""
    return max(p.tokens_per_s_per_gpu for p in frontier(cfg, points=32)) * 8


@pytest.mark.parametrize("tok_per_s_per_user", [20.0, 22.0])
def test_deepseek_production_decode(tok_per_s_per_user):
    """open-infra-index day 6: ~14.8k output tok/s per H800 node at 20-22 tok/s per user, mean KV 4,989,
    EP144/DP144. At TPOT = 1/speed a node holds 14.8k x TPOT requests; the floor step must not exceed TPOT."""
    tpot_ns = round(1e9 / tok_per_s_per_user)
    per_gpu = round(14_800 / 8 * tpot_ns / 1e9)
    cfg = load_config("dsv3-ep144-h800", {"batch": str(per_gpu * 144), "context_tokens": "4989"})
    r = compute_floor(cfg)
    assert r.t_opt_ns <= tpot_ns
    assert r.tokens_per_s_per_gpu() * 8 >= 14_800


def test_deepseek_production_prefill():
    """open-infra-index day 6: ~73.7k input tok/s per H800 node incl. 56.3 % on-disk cache hits, EP32/DP32.
    Computed tokens: 73.7k x 43.7 %. Prompt length not published: mean KV length 4,989 used."""
    cfg = load_config(
        "dsv3-ep144-h800",
        {
            "n_gpus": "32",
            "tp": "32",
            "dp_attention": "32",
            "ep": "32",
            "phase": "prefill",
            "batch": "32",
            "context_tokens": "4989",
        },
    )
    r = compute_floor(cfg)
    assert r.tokens_per_s_per_gpu() * 8 >= 73_700 * (1 - 0.563)


def test_sglang_96_h100_decode():
    """LMSYS 2025-05-05: 22.3k output tok/s per H100 node at 2000-token inputs, DP-attention + EP.
    Decode GPU count not in the facts: 72 (9 nodes) assumed; floor per node is insensitive to it."""
    cfg = load_config(
        "dsv3-ep144-h800",
        {
            "hardware": "h100",
            "n_gpus": "72",
            "tp": "72",
            "dp_attention": "72",
            "ep": "72",
            "batch": "72",
            "context_tokens": "2000",
        },
    )
    assert best_tokens_per_s_per_node(cfg) >= 22_300


@pytest.mark.parametrize(("n_gpus", "prompt", "measured"), [(32, 2000, 52_300), (32, 4096, 50_302)])
def test_sglang_h100_prefill(n_gpus, prompt, measured):
    """LMSYS 2025-05-05: 52.3k input tok/s per node at 2000-token inputs; 50,302 at 4K prompts on EP32."""
    cfg = load_config(
        "dsv3-ep144-h800",
        {
            "hardware": "h100",
            "n_gpus": str(n_gpus),
            "tp": str(n_gpus),
            "dp_attention": str(n_gpus),
            "ep": str(n_gpus),
            "phase": "prefill",
            "batch": str(n_gpus),
            "context_tokens": str(prompt),
        },
    )
    assert compute_floor(cfg).tokens_per_s_per_gpu() * 8 >= measured


def test_ant_group_h20_decode():
    """LMSYS 2025-09-26: DeepSeek-R1 on H20-96G, EP-16 decode: 5.7k output tok/s/node, 4096-token inputs."""
    cfg = load_config("dsv32-ep16", {"model": "deepseek-v3", "batch": "16"})
    assert best_tokens_per_s_per_node(cfg) >= 5_700


def test_ant_group_h20_prefill():
    """LMSYS 2025-09-26: TP-8 prefill on one H20 node, 16.5k input tok/s per node at 4096-token inputs."""
    cfg = load_config(
        "dsv32-tp16",
        {
            "model": "deepseek-v3",
            "n_gpus": "8",
            "tp": "8",
            "phase": "prefill",
            "batch": "1",
            "context_tokens": "4096",
        },
    )
    assert compute_floor(cfg).tokens_per_s_per_gpu() * 8 >= 16_500


@pytest.mark.parametrize(
    ("model", "ms_per_step"),
    [
        ("gpt2-small", 583),
        ("gpt2-small", 1015),
        ("gpt2-small", 2052),
        ("gpt2-medium", 1490),
        ("gpt2-medium", 2484),
        ("gpt2-medium", 4536),
    ],
)
def test_flashattention_gpt2_training_steps(model, ms_per_step):
    """FlashAttention Table 2 (8x A100, 512 x 1024 tokens per step; ms/step derived in facts 6.1).
    A training step needs at least forward + 2x for backward = 3x the forward compute."""
    cfg = load_config(
        "qwen3-8b-tp1-h100",
        {
            "model": model,
            "hardware": "a100",
            "n_gpus": "8",
            "phase": "prefill",
            "batch": "512",
            "context_tokens": "1024",
            "reserve_per_gpu_bytes": "0",
        },
    )
    r = compute_floor(cfg)
    assert 3 * r.resource_ns["compute"] <= ms_per_step * 1_000_000


def test_flashattention3_kernel_throughput():
    """FA3 (arXiv 2407.08608): up to 740 TFLOP/s FP16 forward on H100. At the FA2 benchmark shape (16k tokens,
    hidden 2048, head dim 128, causal: FLOPs = 4 s^2 d h / 2) the floor's attention core must be no slower."""
    base = load_config(
        "qwen3-8b-tp1-h100",
        {"phase": "prefill", "batch": "1", "context_tokens": "16384", "peaks": "physical"},
    )
    tiny = replace(get_model("qwen3-8b"), n_layers=1, d_model=2048, n_heads=16, n_kv_heads=16, head_dim=128)
    r = compute_floor(replace(base, model=tiny))
    core = next(p for p in r.parts if p.name == "attn_core")
    measured_ns = 4 * 16384**2 * 128 * 16 / 2 / 740e12 * 1e9
    assert core.compute_ns <= measured_ns
