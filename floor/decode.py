"""The per-GPU resource vector of one step (a decode step or a prefill chunk), one part per kernel class.

Counts are compulsory traffic and work per GPU per step: weights read once per step, KV cache read once per
attended token, activations read and written once per class (kernels inside a class assumed fused), and
collectives at their bus-bandwidth volume (NVIDIA/nccl-tests doc/PERFORMANCE.md). Not modelled: the MTP
layer, speculative decoding, launch overhead, HBM traffic of communication kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from .collectives import nvls_allreduce_bytes
from .config import DeploymentConfig
from .layout import ACT_BYTES, WEIGHT_BYTES, kv_bytes_per_token_layer_gpu, kv_heads_per_gpu
from .moe import expected_distinct_experts

#: Kernel classes, shared with tracekit budgets and analyze. The order is the report order.
CLASS_NAMES: tuple[str, ...] = (
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

#: FP32 logits.
LOGIT_BYTES = 4.0
#: DeepEP FP8 dispatch: 1 B per element plus one FP32 scale per 128 (open-infra-index day 6: FP8 dispatch).
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128


@dataclass
class RawPart:
    """Counts for one class before they become times. kernel_flops = FLOPs of one launch (size-dependent
    efficiency); net bytes are split by link: intra-node (scale-up), the part of it that in-node all-reduces
    move through an NVLink SHARP switch (timed at its efficiency), and inter-node (scale-out)."""

    name: str
    hbm_bytes: float = 0.0
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0
    flops: float = 0.0
    flops_dtype: str = "bf16"
    launches: int = 1
    net_intra_bytes: float = 0.0
    net_nvls_bytes: float = 0.0
    net_inter_bytes: float = 0.0
    net_messages: int = 0

    @property
    def kernel_flops(self) -> float:
        return self.flops / max(self.launches, 1)


def causal_pairs(n: int, window: int | None = None) -> float:
    """Query-key pairs of one causal sequence of n tokens; with a top-k window each query sees min(p, k)."""
    if window is None or n <= window:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


def collective_bytes(kind: str, size_bytes: float, n: int, gpus_per_node: int) -> tuple[float, float]:
    """Bytes one GPU moves over (scale-up, scale-out) links for one collective of n ranks.

    size_bytes: the buffer for allreduce, the full gathered size for allgather/reducescatter, all this GPU
    dispatches for all-to-all. Within a node: busbw factors 2(n-1)/n and (n-1)/n. Across N = n/g nodes,
    hierarchical: in-node steps move 2S(g-1)/g (AR) or S(g-1)/g, the inter-node step 2S(N-1)/n or S(N-1)/n;
    all-to-all sends S(g-1)/n in-node and S(n-g)/n off-node under uniform routing.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0, 0.0
    g = gpus_per_node
    if kind == "a2a":
        if n <= g:
            return size_bytes * (n - 1) / n, 0.0
        return size_bytes * (g - 1) / n, size_bytes * (n - g) / n
    mult = 2.0 if kind == "allreduce" else 1.0
    if n <= g:
        return mult * size_bytes * (n - 1) / n, 0.0
    nodes = n / g
    return mult * size_bytes * (g - 1) / g, mult * size_bytes * (nodes - 1) / n


def nvls_efficiency(cfg: DeploymentConfig) -> float:
    """The share of the scale-up rate an in-node NVLink SHARP all-reduce reaches (0: no NVLS on this GPU):
    the GPU's calibrated efficiency at achievable peaks, the line rate at physical ones."""
    eff = cfg.hardware.nvls_efficiency
    return eff if cfg.peaks == "achievable" or not eff else 1.0


def resource_vector(cfg: DeploymentConfig) -> list[RawPart]:
    """Per-GPU counts of one step for every class that applies, in CLASS_NAMES order."""
    m, lay = cfg.model, cfg.layout
    parts = {name: RawPart(name) for name in CLASS_NAMES}
    a, wb, ab, gemm = lay.attn_tp, WEIGHT_BYTES[cfg.weight_dtype], ACT_BYTES, cfg.weight_dtype
    n_layers, d, ctx = m.n_layers, m.d_model, cfg.context_tokens
    decode = cfg.phase == "decode"
    reqs = lay.requests_per_gpu(cfg.batch)  # requests whose attention this GPU computes
    q = 1 if decode else ctx  # new tokens per request in this step
    tok = reqs * q  # tokens through this GPU's attention and dense layers
    tokens_replica = lay.requests_per_replica(cfg.batch) * q
    heads = m.n_heads / a

    def add(
        name: str,
        *,
        weight: float = 0.0,
        kv: float = 0.0,
        act: float = 0.0,
        flops: float = 0.0,
        dtype: str = "bf16",
        launches: int = 1,
    ) -> None:
        p = parts[name]
        p.weight_bytes += weight
        p.kv_bytes += kv
        p.hbm_bytes += weight + kv + act
        p.flops += flops
        p.flops_dtype = dtype
        p.launches = launches

    # attention projections (MLA: down/up projections; GQA: q, k, v, o)
    repl, sharded, kv_sharded = m.attn_params_split()
    p_attn = repl + sharded / a + (kv_sharded * kv_heads_per_gpu(m, a) / m.n_kv_heads if kv_sharded else 0.0)
    add(
        "attn_proj",
        weight=n_layers * p_attn * wb,
        flops=n_layers * 2 * tok * p_attn,
        dtype=gemm,
        act=n_layers * tok * (2 * d + heads * (m.qk_head_dim + m.out_head_dim)) * ab,
        launches=n_layers,
    )

    # attention core: KV-cache reads (DSA reads the top-k only) and QK/PV FLOPs
    kv_bpt = kv_bytes_per_token_layer_gpu(m, cfg.kv_format, a)
    topk = m.index_topk if m.has_indexer else None
    if m.attention == "mla":
        flops_per_pair = 2 * heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)  # absorbed (MQA) mode
        prefill_flops_per_pair = 2 * heads * (m.qk_head_dim + m.v_head_dim)  # MHA mode, cheaper per pair
    else:
        flops_per_pair = prefill_flops_per_pair = 4 * heads * m.head_dim
    if decode:
        # sliding-window layers attend min(ctx, window) tokens (m.attention_spans)
        spans = m.attention_spans(min(ctx, topk) if topk else ctx)
        add(
            "attn_core",
            kv=sum(n * reqs * (att + 1) * kv_bpt for n, att in spans),
            flops=sum(n * reqs * att * flops_per_pair for n, att in spans),
            launches=n_layers,
        )
    else:
        windows = [(n, min(topk, att) if topk else att) for n, att in m.attention_spans(ctx)]
        add(
            "attn_core",
            kv=n_layers * reqs * ctx * kv_bpt * 2,
            flops=sum(
                n * reqs * causal_pairs(ctx, w if w < ctx else None) * prefill_flops_per_pair
                for n, w in windows
            ),
            launches=n_layers,
        )

    # DSA indexer: its projections plus a full-context scan of the FP8 index keys
    if m.has_indexer:
        irepl, isharded = m.indexer_params_split()
        p_idx = irepl + isharded / a
        idx_bpt = m.indexer_bytes_per_token_layer()
        pairs = reqs * ctx if decode else reqs * causal_pairs(ctx)
        scan_bytes = reqs * (ctx + 1) * idx_bpt if decode else reqs * ctx * idx_bpt * 2
        add(
            "indexer",
            weight=n_layers * p_idx * wb,
            kv=n_layers * scan_bytes,
            dtype="fp8",
            launches=n_layers,
            flops=n_layers * (2 * tok * p_idx + 2 * (m.index_n_heads / a) * m.index_head_dim * pairs),
        )

    # feed-forward
    n_moe, n_dense = m.moe_layers, m.dense_layers
    if n_dense:
        p_mlp = m.dense_mlp_params / a
        add(
            "dense_mlp",
            weight=n_dense * p_mlp * wb,
            act=n_dense * tok * 2 * d * ab,
            flops=n_dense * 2 * tok * p_mlp,
            dtype=gemm,
            launches=n_dense,
        )
    pairs_gpu = 0.0
    if n_moe:
        k, n_exp = m.experts_per_token, m.n_routed_experts
        add(
            "moe_router",
            weight=n_moe * m.router_params * ab,
            act=n_moe * tok * (d * ab + n_exp * 4),
            flops=n_moe * 2 * tok * m.router_params,
            launches=n_moe,
        )
        pairs_gpu = tokens_replica * k / lay.ep
        touched = expected_distinct_experts(n_exp, k, tokens_replica, n_exp / lay.ep)
        p_exp = m.expert_params / lay.moe_tp
        exp_dtype = cfg.expert_weight_dtype or cfg.weight_dtype
        add(
            "moe_experts",
            weight=n_moe * touched * p_exp * WEIGHT_BYTES[exp_dtype],
            act=n_moe * pairs_gpu * 2 * d * ab,
            flops=n_moe * 2 * pairs_gpu * p_exp,
            dtype="fp8" if exp_dtype == "fp8" else "bf16",  # MXFP4 here is weight-only: BF16 activations
            launches=n_moe,
        )
        if m.n_shared_experts:
            p_sh = m.n_shared_experts * m.expert_params / a
            add(
                "shared_expert",
                weight=n_moe * p_sh * wb,
                act=n_moe * tok * 2 * d * ab,
                flops=n_moe * 2 * tok * p_sh,
                dtype=gemm,
                launches=n_moe,
            )

    # head, embedding, sampling, norms
    vocab_gpu = m.vocab / a
    add(
        "lm_head",
        weight=m.embedding_params / a * ab,
        act=reqs * (d * ab + vocab_gpu * LOGIT_BYTES),
        flops=2 * reqs * vocab_gpu * d,
        dtype="bf16",
    )
    add("embedding", act=tok * d * ab * 2)
    add("sampling", act=reqs * m.vocab * LOGIT_BYTES)
    n_norms = 2 * n_layers + 1  # fused residual-add + RMSNorm: read x and residual, write both
    add("norm_elementwise", act=n_norms * tok * 4 * d * ab, flops=n_norms * tok * d * 5, launches=n_norms)

    # activation quantisation in front of FP8 GEMMs: read BF16, write FP8
    if cfg.weight_dtype == "fp8":
        elems = n_layers * tok * (d + heads * m.out_head_dim) + n_dense * tok * (d + m.dense_intermediate / a)
        if n_moe:
            elems += n_moe * (tok * d + pairs_gpu * m.moe_intermediate / lay.moe_tp)
            elems += n_moe * tok * m.n_shared_experts * m.moe_intermediate / a
        add("quant", act=elems * (ab + 1), launches=n_layers)

    _add_communication(cfg, parts, tok, tokens_replica, reqs)
    return [p for p in parts.values()
            if p.hbm_bytes or p.flops or p.net_intra_bytes or p.net_nvls_bytes or p.net_inter_bytes]


def _add_communication(
    cfg: DeploymentConfig, parts: dict[str, RawPart], tok: float, tokens_replica: float, reqs: float
) -> None:
    """Collectives per step. Attention TP: all-reduce after attention and after each FFN (MoE output too
    while tokens are replicated). DP-attention: EP all-to-all dispatch/combine, or all-gather +
    reduce-scatter around a TP-sharded MoE. Logits are all-gathered under vocabulary parallelism."""
    m, lay, g = cfg.model, cfg.layout, cfg.hardware.gpus_per_node
    hidden = tok * m.d_model * ACT_BYTES

    nvls_eff = nvls_efficiency(cfg)

    def coll(name: str, kind: str, size: float, n: int, count: int) -> None:
        intra, inter = collective_bytes(kind, size, n, g)
        if intra or inter:
            p = parts[name]
            nvls = nvls_allreduce_bytes(size, n)
            if kind == "allreduce" and not inter and nvls_eff and nvls / nvls_eff < intra:
                p.net_nvls_bytes += nvls * count  # the faster algorithm, as NCCL's tuner picks
            else:
                p.net_intra_bytes += intra * count
            p.net_inter_bytes += inter * count
            p.net_messages += count

    if lay.attn_tp > 1:
        coll("allreduce", "allreduce", hidden, lay.attn_tp, m.n_layers + m.n_layers)  # attention + every FFN
        coll("allgather", "allgather", reqs * m.vocab * LOGIT_BYTES, lay.attn_tp, 1)
    elif m.moe_layers and lay.tp > 1:
        if lay.ep > 1:
            k = m.experts_per_token
            disp = FP8_DISPATCH_BYTES if cfg.weight_dtype == "fp8" else ACT_BYTES
            coll("a2a_dispatch", "a2a", tok * k * m.d_model * disp, lay.ep, m.moe_layers)
            coll("a2a_combine", "a2a", tok * k * m.d_model * ACT_BYTES, lay.ep, m.moe_layers)
        else:
            gathered = tokens_replica * m.d_model * ACT_BYTES
            coll("allgather", "allgather", gathered, lay.tp, m.moe_layers)
            coll("reducescatter", "reducescatter", gathered, lay.tp, m.moe_layers)
