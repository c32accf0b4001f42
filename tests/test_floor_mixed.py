"""The mixed prefill+decode step (floor/mixed.py): equal to the pure prefill and decode steps at its two edges,
term by term, and never lower as prefill tokens or decode requests grow."""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.budgets.configs import load_config
from tracekit.floor import DeploymentConfig, compute_floor
from tracekit.floor.decode import resource_vector
from tracekit.floor.mixed import mixed_resource_vector
from tracekit.floor.roofline import class_times

# A dense GQA model, an MoE with TP attention, a DSA/MLA MoE with DP attention and FP8 (indexer, quant, a2a).
CONFIGS = ("qwen3-8b-sglang-mi300x", "gptoss-20b-vllm-mi300x", "dsv32-ep16")


@cache
def base(name: str) -> DeploymentConfig:
    return load_config(name)


def t_opt(cfg: DeploymentConfig, raws: list) -> int:
    """The max over resources of the summed per-class times at physical peaks (as compute_floor sums them)."""
    times = [class_times(r, cfg, achievable=False) for r in raws]
    return max(sum(round(t[i] * 1e9) for t in times) for i in range(3))


def totals(cfg: DeploymentConfig, raws: list) -> tuple[float, ...]:
    times = [class_times(r, cfg, achievable=False) for r in raws]
    return tuple(sum(t[i] for t in times) for i in range(3))


@pytest.mark.parametrize("name", CONFIGS)
def test_the_edges_are_the_pure_steps(name: str) -> None:
    cfg = base(name)
    decode = resource_vector(cfg)
    assert [asdict(p) for p in mixed_resource_vector(cfg, 0, 0, cfg.batch)] == [asdict(p) for p in decode]
    requests, tokens = 3, 3 * 512
    prefill = resource_vector(replace(cfg, phase="prefill", batch=requests, context_tokens=512, tokens_per_step=1.0))
    assert [asdict(p) for p in mixed_resource_vector(cfg, requests, tokens, 0)] == [asdict(p) for p in prefill]


@pytest.mark.parametrize("name", CONFIGS)
@settings(max_examples=40, deadline=None)
@given(requests=st.integers(1, 16), tokens=st.integers(1, 8192), more_tokens=st.integers(0, 8192),
       decode=st.integers(0, 16), more_decode=st.integers(0, 16))
def test_never_lower_as_prefill_tokens_or_decode_requests_grow(name: str, requests: int, tokens: int,
                                                               more_tokens: int, decode: int,
                                                               more_decode: int) -> None:
    cfg = base(name)
    tokens = max(tokens, requests)
    step = totals(cfg, mixed_resource_vector(cfg, requests, tokens, decode))
    more_p = totals(cfg, mixed_resource_vector(cfg, requests, tokens + more_tokens, decode))
    more_d = totals(cfg, mixed_resource_vector(cfg, requests, tokens, decode + more_decode))
    for bigger in (more_p, more_d):
        assert all(b >= s * (1 - 1e-12) for b, s in zip(bigger, step, strict=True)), (step, bigger)
    assert t_opt(cfg, mixed_resource_vector(cfg, requests, tokens + more_tokens, decode + more_decode)) >= \
        t_opt(cfg, mixed_resource_vector(cfg, requests, tokens, decode)) - 3  # per-class rounding


def test_a_decode_config_carrying_prefill_tokens_is_the_mixed_step() -> None:
    cfg = load_config("qwen3-8b-sglang-mi300x", {"prefill_tokens": "2048", "prefill_requests": "2"})
    pure = compute_floor(base("qwen3-8b-sglang-mi300x"))
    mixed = compute_floor(cfg)
    assert mixed.t_opt_ns > pure.t_opt_ns
    assert mixed.resource_ns == dict(zip(("hbm", "compute", "network"),
                                         (sum(round(t * 1e9) for t in col) for col in zip(
                                             *[class_times(r, cfg, False) for r in
                                               mixed_resource_vector(cfg, 2, 2048, cfg.batch)], strict=True)),
                                         strict=True))


def test_a_mixed_step_outside_decode_or_without_requests_is_a_config_error() -> None:
    from tracekit.floor import ConfigError
    with pytest.raises(ConfigError, match="prefill_requests"):
        compute_floor(load_config("qwen3-8b-sglang-mi300x", {"prefill_tokens": "100"}))
    with pytest.raises(ConfigError, match="applies to decode"):
        compute_floor(load_config("qwen3-8b-sglang-mi300x", {"phase": "prefill", "prefill_tokens": "100",
                                                             "prefill_requests": "1"}))
