"""The mixed step: P prefill tokens (from R requests) and D decode requests in one forward, as vLLM and SGLang
run by default (chunked prefill), with its own per-GPU resource vector.

Every token of the step goes through the same weights once: the projections, MLPs, experts, norms and
collectives of the step see the P + D x tokens_per_step tokens together (weights read once, experts touched
by all of them, logits for the R prefill requests' last tokens and the D decode tokens). Attention is per
request: the decode side reads its cached context (``context_tokens`` per request), the prefill side attends
its own P / R tokens causally. A prefill chunk's cached prefix is not counted (a lower bound stays one).
With D = 0 this is the prefill step of R requests of P / R tokens, with P = 0 the decode step of D requests,
term by term (``tests/test_floor_mixed.py``), and it never falls as P or D grows.
"""

from __future__ import annotations

from dataclasses import replace

from .decode import RawPart, _after_attention, _attention, _indexer, _Step, _step, resource_vector
from .deployment import DeploymentConfig
from .result import CLASS_NAMES


def _add(into: RawPart, part: RawPart) -> None:
    into.hbm_bytes += part.hbm_bytes
    into.weight_bytes += part.weight_bytes
    into.kv_bytes += part.kv_bytes
    into.flops += part.flops
    into.flops_dtype = part.flops_dtype
    into.launches = max(into.launches, part.launches)


def mixed_resource_vector(cfg: DeploymentConfig, prefill_requests: int, prefill_tokens: float,
                          decode_requests: int, achievable: bool = False) -> list[RawPart]:
    """Per-GPU counts of one step of ``prefill_tokens`` prefill tokens from ``prefill_requests`` requests and
    ``decode_requests`` decode requests (deployment-wide, as ``batch``) at ``cfg.context_tokens`` cached tokens
    each; ``cfg`` gives the model, hardware, layout and precision. Classes in CLASS_NAMES order."""
    sides = [_step(replace(cfg, phase="decode", batch=decode_requests))]
    if prefill_requests > 0:
        sides.append(_step(replace(cfg, phase="prefill", batch=prefill_requests,
                                   context_tokens=prefill_tokens / prefill_requests, tokens_per_step=1.0)))
    d = sides[0]
    st = _Step(cfg=cfg, parts={name: RawPart(name) for name in CLASS_NAMES}, decode=True,
               reqs=sum(s.reqs for s in sides), q=d.q, tok=sum(s.tok for s in sides),
               out_tok=sum(s.out_tok for s in sides), tokens_replica=sum(s.tokens_replica for s in sides),
               heads=d.heads)
    _attention(st)  # the projections of every token; the core is each side's own
    st.parts["attn_core"] = RawPart("attn_core")
    for side in sides:
        _attention(side)
        _add(st.parts["attn_core"], side.parts["attn_core"])
    if cfg.model.has_indexer:  # each side scans its own keys; the indexer's weights are read once
        for side in sides:
            _indexer(side)
            _add(st.parts["indexer"], side.parts["indexer"])
        extra = (len(sides) - 1) * sides[0].parts["indexer"].weight_bytes
        st.parts["indexer"].weight_bytes -= extra
        st.parts["indexer"].hbm_bytes -= extra
    return _after_attention(st, achievable)


def step_vector(cfg: DeploymentConfig, achievable: bool = False) -> list[RawPart]:
    """The resource vector of the config's step: a decode step carrying ``prefill_tokens`` is mixed."""
    if cfg.phase == "decode" and cfg.prefill_tokens > 0:
        return mixed_resource_vector(cfg, cfg.prefill_requests, cfg.prefill_tokens, cfg.batch, achievable)
    return resource_vector(cfg, achievable)
