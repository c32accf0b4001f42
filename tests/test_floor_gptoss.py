"""gpt-oss-20b in the floor catalog: published parameter counts, MXFP4 experts, sliding-window attention."""

from __future__ import annotations

from dataclasses import replace

import pytest

from floor.decode import resource_vector
from floor.layout import WEIGHT_BYTES
from floor.models import get_model
from tracekit.budgets.configs import load_config
from tracekit.floor import ConfigError


def test_gptoss_20b_published_parameter_counts() -> None:
    """Model card (arXiv 2508.10925) table: 20.91B total, 3.61B active, within 0.5 %.

    The card's active count includes the unembedding (LM head) but not the embedding lookup, so the
    embedding table is taken out of ours (which counts both) before comparing.
    """
    m = get_model("gpt-oss-20b")
    assert m.params_total() == pytest.approx(20.91e9, rel=0.005)
    assert m.params_active() - m.embedding_params == pytest.approx(3.61e9, rel=0.005)
    # component rows of the same table: attention 0.64B, embed + unembed 1.16B, MLP 19.12B
    assert 24 * sum(m.attn_params_split()) == pytest.approx(0.64e9, rel=0.01)
    assert 2 * m.embedding_params == pytest.approx(1.16e9, rel=0.01)
    assert m.moe_layers * (32 * m.expert_params + m.router_params) == pytest.approx(19.12e9, rel=0.005)


def test_mxfp4_bytes_per_weight() -> None:
    """OCP MX v1.0: 4-bit E2M1 elements plus one 8-bit shared scale per 32 -> 4.25 bits."""
    assert WEIGHT_BYTES["mxfp4"] * 8 == pytest.approx(4.25)


def test_vllm_config_weights_match_checkpoint() -> None:
    """MXFP4 experts + BF16 rest give ~12.8 GiB resident, the card's checkpoint size (within 3 %)."""
    cfg = load_config("gptoss-20b-vllm-mi300x")
    assert cfg.expert_weight_dtype == "mxfp4"
    assert cfg.weight_bytes_per_gpu == pytest.approx(12.8 * 2**30, rel=0.03)
    bf16 = replace(cfg, expert_weight_dtype="")
    assert bf16.weight_bytes_per_gpu > 3 * cfg.weight_bytes_per_gpu


def test_moe_expert_bytes_follow_expert_dtype() -> None:
    """Only the routed-expert weight reads scale with the expert dtype; attention stays BF16."""
    cfg = load_config("gptoss-20b-vllm-mi300x")
    parts = {p.name: p for p in resource_vector(cfg)}
    bf16 = {p.name: p for p in resource_vector(replace(cfg, expert_weight_dtype=""))}
    assert parts["moe_experts"].weight_bytes == pytest.approx(
        bf16["moe_experts"].weight_bytes * WEIGHT_BYTES["mxfp4"] / 2.0
    )
    assert parts["attn_proj"].weight_bytes == bf16["attn_proj"].weight_bytes
    assert parts["moe_experts"].flops_dtype == "bf16"  # weight-only MXFP4: BF16 activations and MMA


def test_sliding_window_layers_read_only_the_window() -> None:
    """Half the layers attend min(ctx, 128): KV reads = 12 x (ctx + 1) + 12 x (128 + 1) tokens per request."""
    cfg = load_config("gptoss-20b-vllm-mi300x", {"context_tokens": "4096", "batch": "1"})
    attn = next(p for p in resource_vector(cfg) if p.name == "attn_core")
    per_token_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads of 64, BF16
    assert attn.kv_bytes == (12 * 4097 + 12 * 129) * per_token_layer
    assert attn.flops == (12 * 4096 + 12 * 128) * 4 * 64 * 64


def test_expert_dtype_rejected_for_dense_model() -> None:
    """A dense model has no routed experts to store in another dtype."""
    with pytest.raises(ConfigError, match="expert_weight_dtype"):
        load_config("qwen3-8b-tp1-mi300x", {"expert_weight_dtype": "mxfp4"})
