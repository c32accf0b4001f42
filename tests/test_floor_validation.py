"""Validation against public numbers (shared/facts/floor-facts.md); each test states its tolerance."""

from __future__ import annotations

import pytest

from tracekit.floor import get_gpu, get_model


@pytest.mark.parametrize(
    ("gpu", "bf16_ridge", "fp8_ridge"),
    [
        ("h20", 37, 74),
        ("h100", 295, 591),
        ("h200", 206, 412),
        ("b200", 281, 562),
        ("a100", 153, 153),
        ("mi300x", 247, 493),
        ("h800", 295, 590),
    ],
)
def test_spec_sheet_ridge_points(gpu, bf16_ridge, fp8_ridge):
    """Ridge = dense peak / HBM bandwidth (facts section 3, rounded to integers there): within 0.5 FLOP/B.
    A100 has no FP8 unit, so its FP8 ridge falls back to BF16."""
    g = get_gpu(gpu)
    assert g.ridge_bf16_flops_per_byte == pytest.approx(bf16_ridge, abs=0.5)
    assert g.ridge_fp8_flops_per_byte == pytest.approx(fp8_ridge, abs=0.5)


def test_deepseek_v3_parameter_counts():
    m = get_model("deepseek-v3")
    # published 671B total (README): within 0.5 %; our count is 671.03B (facts: derived 671.03B)
    assert m.params_total() == pytest.approx(671e9, rel=0.005)
    assert m.params_total() == pytest.approx(671.03e9, rel=5e-4)
    # published "37B activated" (README_WEIGHTS 36.7B): within 3 % (we count both embedding matrices: 37.55B)
    assert m.params_active() == pytest.approx(37e9, rel=0.03)
    assert m.params_active() == pytest.approx(37.55e9, rel=5e-4)
    # facts: MLA 187.1M per layer, one routed expert 44.04M
    assert sum(m.attn_params_split()) == pytest.approx(187.1e6, rel=5e-4)
    assert m.expert_params == pytest.approx(44.04e6, rel=5e-4)


def test_deepseek_v32_adds_the_indexer():
    v3, v32 = get_model("deepseek-v3"), get_model("deepseek-v3.2")
    # facts: +13.96M per layer (0.85B total) -> 671.9B
    assert sum(v32.indexer_params_split()) == pytest.approx(13.96e6, rel=5e-4)
    assert v32.params_total() - v3.params_total() == 61 * sum(v32.indexer_params_split())
    assert v32.params_total() == pytest.approx(671.9e9, rel=5e-4)


@pytest.mark.parametrize(
    ("key", "total", "active", "rel"),
    [
        ("qwen3-235b-a22b", 235e9, 22e9, 0.01),  # slime qwen3-235B-A22B.sh; name says 235B / 22B: 1 %
        ("mixtral-8x7b", 46.7e9, 12.9e9, 0.005),  # keras-hub Mixtral README 46.7B / 12.9B: 0.5 %
        ("llama3-70b", 70.55e9, 70.55e9, 0.001),  # facts (D) 70.55B: 0.1 %
        ("gpt3-175b", 175e9, 175e9, 0.005),  # Brown et al. Table 2.1 (174.6B counted): 0.5 %
        ("gpt2-small", 124e6, 124e6, 0.01),  # 124M incl. 0.8M position embeddings we do not count: 1 %
        ("gpt2-medium", 355e6, 355e6, 0.01),
        ("nemotron-4-340b", 341e9, 341e9, 0.002),  # technical report s2.1: 9.4B embedding + 331.6B non-embedding
    ],
)
def test_published_parameter_counts(key, total, active, rel):
    m = get_model(key)
    assert m.params_total() == pytest.approx(total, rel=rel)
    assert m.params_active() == pytest.approx(active, rel=rel)


@pytest.mark.parametrize(
    ("fmt", "per_layer", "all_layers"),
    [
        ("bf16", 1152, 70_272),  # MLA latent BF16 (512 + 64) x 2
        ("fp8_ds_mla", 656, 40_016),  # FlashMLA FP8 with scale
        ("fp8", 576, 35_136),  # generic per-tensor FP8 latent
    ],
)
def test_mla_kv_bytes_per_token(fmt, per_layer, all_layers):
    m = get_model("deepseek-v3.2")
    assert m.kv_bytes_per_token_layer(fmt) == per_layer
    assert m.kv_bytes_per_token_layer(fmt) * 61 == all_layers


def test_dsa_indexer_key_bytes():
    m = get_model("deepseek-v3.2")
    assert m.indexer_bytes_per_token_layer() == 132
    assert m.indexer_bytes_per_token_layer() * 61 == 8_052
    assert (m.kv_bytes_per_token_layer("fp8_ds_mla") + m.indexer_bytes_per_token_layer()) * 61 == 48_068
    assert get_model("deepseek-v3").indexer_bytes_per_token_layer() == 0


@pytest.mark.parametrize(
    ("key", "bf16_bytes"),
    [
        ("llama3-70b", 4096),
        ("gpt3-175b", 49152),
        ("gpt2-small", 3072),
        ("gpt2-medium", 4096),
        ("mixtral-8x7b", 4096),
        ("qwen3-235b-a22b", 2048),
    ],
)
def test_gqa_kv_bytes_per_token_layer(key, bf16_bytes):
    m = get_model(key)
    assert m.kv_bytes_per_token_layer("bf16") == bf16_bytes
    assert m.kv_bytes_per_token_layer("fp8") == bf16_bytes // 2
