"""Work of serving engines' custom ops (vLLM, SGLang, aiter) from their recorded inputs: lower bounds only.

These ops take their outputs as arguments or return a tensor shaped like one input, and several read only
part of what they are given (a KV cache, a page table). Each model counts what the op must touch at least:

- **in-place and out-argument kernels** (norms, activations, rotary): the inputs read and the outputs written
  once, as the op's argument positions say (``_ARGS``: family, read, written, an output shaped like an input);
- **KV-cache writes**: the new keys and values written at the cache's dtype, never the cache;
- **fused MoE with its expert weights** (``vllm::outplace_fused_experts``, ``inplace_fused_experts``): the
  routed GEMMs' FLOPs (each token through its top-k experts' up and down projections) and the bytes of the
  tokens, the routing, the output and the weights of at least top-k experts (every token picks k distinct
  experts, so at least k experts' weights are read; which others are used the trace does not say);
- **``vllm::moe_forward``**, whose expert weights are not among its inputs: the hidden states and router logits
  read and the output written (a bytes bound, far below what the experts' weights cost);
- **paged decode attention** (SGLang's ``attention_paged_attention_ragged``): the query read and the output
  written (the cached keys and values are not among its inputs: a loose bytes bound, as for vLLM's
  ``unified_attention_with_output``);
- **paged prefill attention** (``aiter::mha_batch_prefill``): causal, each of the b sequences' new tokens sees
  at least the new tokens before it, so with T new tokens the score work is at least b·f(T/b), f(x) = x(x+1)/2
  (f is convex: equal sequences do the least); each new token's key and value are read at least once.
"""

from __future__ import annotations

import math
from typing import Any

#: name -> (family, inputs read, inputs written (in place or as an out argument), input the returned output is
#: shaped like, or None).
_ARGS: dict[str, tuple[str, tuple[int, ...], tuple[int, ...], int | None]] = {
    "_C::rms_norm": ("norm", (1, 2), (0,), None),  # (out, input, weight, eps)
    "_C::fused_add_rms_norm": ("norm", (0, 1, 2), (0, 1), None),  # (input, residual, weight, eps): both updated
    "_C::rotary_embedding": ("elementwise", (0, 1, 2), (1, 2), None),  # (positions, query, key, ...): in place
    "_C::silu_and_mul": ("elementwise", (1,), (0,), None),  # (out, input)
    "_C::gelu_and_mul": ("elementwise", (1,), (0,), None),
    "_C::static_scaled_fp8_quant": ("copy", (1, 2), (0,), None),  # (out, input, scale)
    "_C::dynamic_scaled_fp8_quant": ("copy", (1,), (0,), None),
    "_C::dynamic_per_token_scaled_fp8_quant": ("copy", (1,), (0,), None),
    # (query, key, value, output, ...): the context's keys and values are in the cache, not the inputs, so
    # only q, the new k/v and the output are known: a bytes bound, no FLOP model.
    "vllm::unified_attention_with_output": ("attention", (0, 1, 2), (3,), None),
    "sgl_kernel::silu_and_mul": ("elementwise", (1,), (0,), None),  # (out, input)
    "sgl_kernel::gelu_and_mul": ("elementwise", (1,), (0,), None),
    "sgl_kernel::rotary_embedding": ("elementwise", (0, 1, 2), (1, 2), None),  # (positions, query, key, ...)
    "aiter::rmsnorm": ("norm", (1, 2), (0,), None),  # (out, input, weight, eps)
    "aiter::add_rmsnorm": ("norm", (1, 2, 4), (0, 3), None),  # (out, input, residual_in, residual_out, weight, eps)
    "aiter::rmsnorm2d_fwd_with_add": ("norm", (1, 2, 4), (0, 3), None),
    "aiter::rmsnorm2d_fwd_with_add_ck": ("norm", (1, 2, 4), (0, 3), None),
    "aiter::rms_norm": ("norm", (0, 1), (), 0),  # (input, weight, eps, ...) -> output like input
    "aiter::rmsnorm2d_fwd": ("norm", (0, 1), (), 0),
    "aiter::rmsnorm2d_fwd_ck": ("norm", (0, 1), (), 0),
    "aiter::_groupnorm_run": ("norm", (0, 2, 3), (), 0),  # (input, groups, weight, bias, eps) -> output like input
    # (hidden_states, router_logits, layer name): the experts' weights are module state, not inputs
    "vllm::moe_forward": ("moe", (0, 1), (), 0),
}
#: KV-cache writes: (keys, values, key cache, value cache, slots, ...)
_CACHE_WRITES = frozenset({"_C_cache_ops::reshape_and_cache_flash", "_C_cache_ops::reshape_and_cache",
                           "sglang::store_cache"})
#: fused MoE ops with their weights: (hidden [T, H], w1 [E, N1, H], w2 [E, H, N2], topk_weights [T, k], topk_ids)
_FUSED_MOE = frozenset({"vllm::outplace_fused_experts", "vllm::inplace_fused_experts"})
#: paged prefill attention: (q [Tq, H, d], k [pages, Hkv, d], v, cu_seqlens_q [b + 1], kv_indptr, kv_page_indices,
#: max_seqlen_q, max_seqlen_k, dropout, scale, soft cap, zero_tensors, is_causal, ...)
_PAGED_PREFILL = frozenset({"aiter::mha_batch_prefill"})
#: paged decode attention that SGLang's profiler records as ``sglang_profiler::attention_paged_attention_ragged_N``:
#: (query [B, H, d], workspace, output [B, H, d], key cache, value cache, ...): the cached keys and values it reads
#: are not in its inputs, so the query read and the output written are its bound (a loose bytes bound)
PAGED_DECODE_PREFIX = "sglang_profiler::attention_paged_attention_ragged"
ENGINE_OPS = frozenset(_ARGS) | _CACHE_WRITES | _FUSED_MOE | _PAGED_PREFILL


#: ops whose bound leaves out their main operands (expert weights, the cached context): a floor far below the work,
#: which the op floor's verdict does not rest on (``loose``)
LOOSE_OPS = frozenset({"vllm::moe_forward", "vllm::unified_attention_with_output"})
LOOSE_PREFIXES = (PAGED_DECODE_PREFIX,)


def loose(name: str) -> bool:
    """Whether op ``name``'s floor leaves out its main operands (a bytes bound on what its inputs record)."""
    return name in LOOSE_OPS or name.startswith(LOOSE_PREFIXES)


def is_engine_op(name: str) -> bool:
    """Whether ``engine_work`` has a model of op ``name``."""
    return name in ENGINE_OPS or name.startswith(PAGED_DECODE_PREFIX)


def engine_work(name: str, args: list[Any], work: type, precision: Any) -> Any:
    """The work (a ``work`` instance, ``floor.ops.OpWork``) of engine op ``name`` from its parsed ``args``
    (``floor.ops.Arg``), or None when its inputs are not what the model reads."""
    if name in _CACHE_WRITES:
        if len(args) < 5 or any(a.dims is None for a in args[:5]):
            return None
        k, v, kc, _, slots = args[:5]
        elem = min(k.elem, kc.elem)  # an FP8 cache is written at one byte an element
        return work("copy", None, float(k.nbytes + v.nbytes + slots.nbytes + (k.numel + v.numel) * elem), "bf16",
                    f"{k.dims} into the KV cache")
    if name in _FUSED_MOE:
        return _fused_moe(args, work, precision)
    if name in _PAGED_PREFILL:
        return _paged_prefill(args, work, precision)
    if name.startswith(PAGED_DECODE_PREFIX):
        if len(args) < 3 or args[0].dims is None or len(args[0].dims) != 3 or args[2].dims != args[0].dims:
            return None
        return work("attention", None, float(args[0].nbytes + args[2].numel * args[2].elem), "bf16",
                    f"{args[0].dims} (cached keys and values not recorded)")
    family, reads, writes, like = _ARGS[name]
    used = reads + writes + ((like,) if like is not None else ())
    if max(used) >= len(args) or any(args[i].dims is None for i in used):
        return None
    hbm = sum(args[i].nbytes for i in reads) + sum(args[i].numel * args[i].elem for i in writes)
    if like is not None:
        hbm += args[like].numel * args[like].elem
    shown = args[like if like is not None else reads[-1] if family != "norm" else reads[0]].dims
    return work(family, None, float(hbm), "bf16", f"{shown}" + (" (expert weights not recorded)"
                                                                if family == "moe" else ""))


def _fused_moe(args: list[Any], work: type, precision: Any) -> Any:
    if len(args) < 5 or any(a.dims is None for a in args[:5]):
        return None
    x, w1, w2, topk_w, topk_ids = args[:5]
    if len(x.dims) != 2 or len(w1.dims) != 3 or len(w2.dims) != 3 or len(topk_ids.dims) != 2:
        return None
    t, h = x.dims
    e, n1, k1 = w1.dims
    _, h2, n2 = w2.dims
    k = topk_ids.dims[1]
    if k1 != h or h2 != h or not 1 <= k <= e:
        return None
    flops = 2.0 * t * k * (n1 * h + h * n2)
    per_expert = (w1.nbytes + w2.nbytes) / e
    hbm = x.nbytes + topk_w.nbytes + topk_ids.nbytes + t * h * x.elem + k * per_expert
    return work("moe", flops, float(hbm), precision(x, w1, w2),
                f"T {t} H {h} experts {e} top-{k} N1 {n1} N2 {n2}")


def _paged_prefill(args: list[Any], work: type, precision: Any) -> Any:
    if len(args) < 13 or any(a.dims is None for a in args[:6]):
        return None
    q, k, v, cu_q, _, pages = args[:6]
    if len(q.dims) != 3 or len(k.dims) != 3 or len(cu_q.dims) != 1 or cu_q.dims[0] < 2:
        return None
    tq, h, d = q.dims
    hkv, dv = k.dims[1], v.dims[-1]
    b = cu_q.dims[0] - 1
    causal = args[12].value.strip().lower() in ("true", "1")
    if causal:
        m = tq / b
        attended = b * m * (m + 1) / 2  # each new token sees at least the new tokens before it and itself
        keys = tq  # and its own key and value, which are distinct per new token
    else:
        attended, keys = float(tq), math.ceil(pages.numel / b) if pages.numel else 1
    flops = 2.0 * h * (d + dv) * attended
    hbm = q.nbytes + tq * h * dv * q.elem + keys * hkv * (d * k.elem + dv * v.elem)
    return work("attention", flops, float(hbm), precision(q, k, v),
                f"T {tq} in {b} sequences H {h}/{hkv} d {d}" + (" causal" if causal else ""))
