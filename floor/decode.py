"""The per-GPU resource vector of one step (a decode step or a prefill chunk), one part per kernel class.

Counts are compulsory traffic and work per GPU per step: weights read once per step, KV cache read once per
attended token, activations read and written once per class (kernels inside a class assumed fused), and
collectives at their bus-bandwidth volume (NVIDIA/nccl-tests doc/PERFORMANCE.md). A decode step carries
`tokens_per_step` new tokens per request (MTP / speculative decoding: the accepted tokens; rejected drafts are
extra work a lower bound leaves out), with weights and the cached context still read once per step.
Not modelled: the MTP layer's own weights, launch overhead, HBM traffic of communication kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from .collectives import nvls_allreduce_bytes
from .deployment import DeploymentConfig
from .layout import ACT_BYTES, FP4_GEMM_DTYPES, WEIGHT_BYTES, kv_bytes_per_token_layer_gpu, kv_heads_per_gpu
from .moe import expected_distinct_experts
from .moe_a2a import remote_nodes_per_token
from .result import CLASS_NAMES

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


def collective_bytes(kind: str, size_bytes: float, n: int, gpus_per_node: int,
                     top_k: int = 1, groups: tuple[int, int] = (0, 0)) -> tuple[float, float]:
    """Bytes one GPU moves over (scale-up, scale-out) links for one collective of n ranks.

    size_bytes: the buffer for allreduce, the full gathered size for allgather/reducescatter, all this GPU
    dispatches for all-to-all (top_k copies of each token). Within a node: busbw factors 2(n-1)/n and (n-1)/n.
    Across N = n/g nodes, hierarchical: in-node steps move 2S(g-1)/g (AR) or S(g-1)/g, the inter-node step
    2S(N-1)/n or S(N-1)/n. All-to-all under uniform routing sends S(g-1)/n in-node, and off-node each token
    once per distinct remote node holding one of its top_k experts, (N-1)(1 - (1 - 1/N)^k) of its k copies,
    the compulsory traffic (DeepEP's normal kernels forward inside the destination node over NVLink); with
    group-limited routing (groups = (n_group, topk_group)) fewer nodes (moe_a2a.remote_nodes_per_token).
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0, 0.0
    g = gpus_per_node
    if kind == "a2a":
        if n <= g:
            return size_bytes * (n - 1) / n, 0.0
        nodes = n / g
        remote_nodes = remote_nodes_per_token(top_k, nodes, *groups)
        return size_bytes * (g - 1) / n, size_bytes / top_k * remote_nodes
    mult = 2.0 if kind == "allreduce" else 1.0
    if n <= g:
        return mult * size_bytes * (n - 1) / n, 0.0
    nodes = n / g
    return mult * size_bytes * (g - 1) / g, mult * size_bytes * (nodes - 1) / n


def route_collective(kind: str, size_bytes: float, n: int, gpus_per_node: int, nvls_eff: float,
                     top_k: int = 1, groups: tuple[int, int] = (0, 0)) -> tuple[float, float, float]:
    """Bytes one GPU moves for one collective: (scale-up by ring or direct, scale-up through an NVLink SHARP
    switch, scale-out). An in-node all-reduce goes through NVLS where that is faster at `nvls_eff` of the
    link (0: the GPU has none), as NCCL's tuner picks; across nodes the in-node phase of the hierarchical
    all-reduce goes through NVLS the same way (NCCL's NVLSTree), the scale-out phase unchanged."""
    intra, inter = collective_bytes(kind, size_bytes, n, gpus_per_node, top_k, groups)
    nvls = nvls_allreduce_bytes(size_bytes, min(n, gpus_per_node))
    if kind == "allreduce" and intra and nvls_eff and nvls / nvls_eff < intra:
        return 0.0, nvls, inter
    return intra, 0.0, inter


def nvls_efficiency(cfg: DeploymentConfig, achievable: bool) -> float:
    """The share of the scale-up rate an in-node NVLink SHARP all-reduce reaches (0: no NVLS on this GPU):
    the GPU's calibrated efficiency at achievable peaks, the line rate at physical ones."""
    eff = cfg.hardware.nvls_efficiency
    return eff if achievable or not eff else 1.0


@dataclass
class _Step:
    """What every class of one step shares: the config and its per-GPU token counts.

    reqs: requests whose attention this GPU computes; q: new tokens per request (tokens_per_step in decode,
    the prompt in prefill); tok = reqs x q through this GPU's attention and dense layers; out_tok: tokens
    whose logits this GPU computes; tokens_replica: tokens through one model replica's MoE."""

    cfg: DeploymentConfig
    parts: dict[str, RawPart]
    decode: bool
    reqs: float
    q: float
    tok: float
    out_tok: float
    tokens_replica: float
    heads: float
    pairs_gpu: float = 0.0  # (token, expert) pairs this GPU's routed experts compute

    def add(self, name: str, *, weight: float = 0.0, kv: float = 0.0, act: float = 0.0, flops: float = 0.0,
            dtype: str = "bf16", launches: int = 1) -> None:
        """Count HBM bytes (weights, KV, activations) and FLOPs of one class."""
        p = self.parts[name]
        p.weight_bytes += weight
        p.kv_bytes += kv
        p.hbm_bytes += weight + kv + act
        p.flops += flops
        p.flops_dtype = dtype
        p.launches = launches


def _step(cfg: DeploymentConfig) -> _Step:
    lay, decode = cfg.layout, cfg.phase == "decode"
    reqs = lay.requests_per_gpu(cfg.batch)
    q = cfg.tokens_per_step if decode else cfg.context_tokens
    return _Step(cfg=cfg, parts={name: RawPart(name) for name in CLASS_NAMES}, decode=decode, reqs=reqs, q=q,
                 tok=reqs * q, out_tok=reqs * q if decode else reqs,
                 tokens_replica=lay.requests_per_replica(cfg.batch) * q, heads=cfg.model.n_heads / lay.attn_tp)


def resource_vector(cfg: DeploymentConfig, achievable: bool = False) -> list[RawPart]:
    """Per-GPU counts of one step for every class that applies, in CLASS_NAMES order. `achievable` only
    picks the in-node all-reduce algorithm at the calibrated NVLS efficiency instead of the line rate."""
    st = _step(cfg)
    _attention(st)
    if cfg.model.has_indexer:
        _indexer(st)
    return _after_attention(st, achievable)


def _after_attention(st: _Step, achievable: bool) -> list[RawPart]:
    """The classes after attention (feed-forward, head, norms, quantisation, collectives), then every class
    that applies, in CLASS_NAMES order."""
    _feed_forward(st)
    _head_and_norms(st)
    if st.cfg.weight_dtype == "fp8":
        _quant(st)
    _add_communication(st.cfg, st, achievable)
    return [p for p in st.parts.values()
            if p.hbm_bytes or p.flops or p.net_intra_bytes or p.net_nvls_bytes or p.net_inter_bytes]


def _attention(st: _Step) -> None:
    """Attention projections (MLA: down/up projections; GQA: q, k, v, o) and the attention core: KV-cache
    reads (DSA reads the top-k only) and QK/PV FLOPs."""
    cfg, m = st.cfg, st.cfg.model
    a, n_layers, d, ctx = cfg.layout.attn_tp, m.n_layers, m.d_model, cfg.context_tokens
    repl, sharded, kv_sharded = m.attn_params_split()
    p_attn = repl + sharded / a + (kv_sharded * kv_heads_per_gpu(m, a) / m.n_kv_heads if kv_sharded else 0.0)
    st.add("attn_proj", weight=n_layers * p_attn * WEIGHT_BYTES[cfg.weight_dtype],
           flops=n_layers * 2 * st.tok * p_attn, dtype=cfg.weight_dtype,
           act=n_layers * st.tok * (2 * d + st.heads * (m.qk_head_dim + m.out_head_dim)) * ACT_BYTES,
           launches=n_layers)
    kv_bpt = kv_bytes_per_token_layer_gpu(m, cfg.kv_format, a)
    topk = m.index_topk if m.has_indexer else None
    if m.attention == "mla":
        flops_per_pair = 2 * st.heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)  # absorbed (MQA) mode
        prefill_flops_per_pair = 2 * st.heads * (m.qk_head_dim + m.v_head_dim)  # MHA mode, cheaper per pair
    else:
        flops_per_pair = prefill_flops_per_pair = 4 * st.heads * m.head_dim
    reqs = st.reqs
    # an FP8 KV cache can feed FP8 tensor cores (FlashAttention-3 FP8): the bound charges its FLOPs at FP8
    attn_dtype = "fp8" if cfg.kv_format.startswith("fp8") else "bf16"
    if st.decode:
        # every query token attends the cached tokens, read once; sliding-window layers attend
        # min(ctx, window) tokens (m.attention_spans); the step writes its q new tokens
        spans = m.attention_spans(min(ctx, topk) if topk else ctx)
        st.add("attn_core", kv=sum(n * reqs * (att + st.q) * kv_bpt for n, att in spans), dtype=attn_dtype,
               flops=sum(n * reqs * st.q * att * flops_per_pair for n, att in spans), launches=n_layers)
        return
    windows = [(n, min(topk, att) if topk else att) for n, att in m.attention_spans(ctx)]
    st.add("attn_core", kv=n_layers * reqs * ctx * kv_bpt * 2, launches=n_layers, dtype=attn_dtype,
           flops=sum(n * reqs * causal_pairs(ctx, w if w < ctx else None) * prefill_flops_per_pair
                     for n, w in windows))


def _indexer(st: _Step) -> None:
    """DSA indexer: its projections plus a full-context scan of the FP8 index keys."""
    cfg, m = st.cfg, st.cfg.model
    a, ctx, reqs = cfg.layout.attn_tp, cfg.context_tokens, st.reqs
    irepl, isharded = m.indexer_params_split()
    p_idx = irepl + isharded / a
    idx_bpt = m.indexer_bytes_per_token_layer()
    pairs = reqs * st.q * ctx if st.decode else reqs * causal_pairs(ctx)
    scan_bytes = reqs * (ctx + st.q) * idx_bpt if st.decode else reqs * ctx * idx_bpt * 2
    st.add("indexer", weight=m.n_layers * p_idx * WEIGHT_BYTES[cfg.weight_dtype], kv=m.n_layers * scan_bytes,
           dtype="fp8", launches=m.n_layers,
           flops=m.n_layers * (2 * st.tok * p_idx + 2 * (m.index_n_heads / a) * m.index_head_dim * pairs))


def _feed_forward(st: _Step) -> None:
    """Dense MLP layers, the MoE router, the routed experts (expected distinct experts' weights) and the
    shared expert."""
    cfg, m, lay = st.cfg, st.cfg.model, st.cfg.layout
    a, d, ab, wb, tok = lay.attn_tp, m.d_model, ACT_BYTES, WEIGHT_BYTES[cfg.weight_dtype], st.tok
    n_moe, n_dense = m.moe_layers, m.dense_layers
    if n_dense:
        p_mlp = m.dense_mlp_params / a
        st.add("dense_mlp", weight=n_dense * p_mlp * wb, act=n_dense * tok * 2 * d * ab,
               flops=n_dense * 2 * tok * p_mlp, dtype=cfg.weight_dtype, launches=n_dense)
    if not n_moe:
        return
    k, n_exp = m.experts_per_token, m.n_routed_experts
    st.add("moe_router", weight=n_moe * m.router_params * ab, act=n_moe * tok * (d * ab + n_exp * 4),
           flops=n_moe * 2 * tok * m.router_params, launches=n_moe)
    st.pairs_gpu = st.tokens_replica * k / lay.ep
    touched = expected_distinct_experts(n_exp, k, st.tokens_replica, n_exp / lay.ep)
    p_exp = m.expert_params / lay.moe_tp
    exp_dtype = cfg.expert_weight_dtype or cfg.weight_dtype
    st.add("moe_experts", weight=n_moe * touched * p_exp * WEIGHT_BYTES[exp_dtype],
           act=n_moe * st.pairs_gpu * 2 * d * ab, flops=n_moe * 2 * st.pairs_gpu * p_exp,
           dtype=_gemm_dtype(exp_dtype), launches=n_moe)
    if m.n_shared_experts:
        p_sh = m.n_shared_experts * m.expert_params / a
        st.add("shared_expert", weight=n_moe * p_sh * wb, act=n_moe * tok * 2 * d * ab,
               flops=n_moe * 2 * tok * p_sh, dtype=cfg.weight_dtype, launches=n_moe)


def _gemm_dtype(weight_dtype: str) -> str:
    """The tensor-core dtype of a GEMM on weights of this dtype: NVFP4 on FP4 units, FP8 on FP8 units, the rest
    (BF16, weight-only MXFP4 with BF16 activations) at BF16."""
    if weight_dtype in FP4_GEMM_DTYPES:
        return "fp4"
    return "fp8" if weight_dtype == "fp8" else "bf16"


def _head_and_norms(st: _Step) -> None:
    """LM head (vocabulary split over attention TP), embedding, sampling and the fused norms."""
    m, a, ab = st.cfg.model, st.cfg.layout.attn_tp, ACT_BYTES
    d, vocab_gpu = m.d_model, m.vocab / a
    st.add("lm_head", weight=m.embedding_params / a * ab, act=st.out_tok * (d * ab + vocab_gpu * LOGIT_BYTES),
           flops=2 * st.out_tok * vocab_gpu * d, dtype="bf16")
    st.add("embedding", act=st.tok * d * ab * 2)
    st.add("sampling", act=st.out_tok * m.vocab * LOGIT_BYTES)
    n_norms = 2 * m.n_layers + 1  # fused residual-add + RMSNorm: read x and residual, write both
    st.add("norm_elementwise", act=n_norms * st.tok * 4 * d * ab, flops=n_norms * st.tok * d * 5, launches=n_norms)


def _quant(st: _Step) -> None:
    """Activation quantisation in front of FP8 GEMMs: read BF16, write FP8."""
    m, lay, tok = st.cfg.model, st.cfg.layout, st.tok
    a, d = lay.attn_tp, m.d_model
    elems = m.n_layers * tok * (d + st.heads * m.out_head_dim) + m.dense_layers * tok * (d + m.dense_intermediate / a)
    if m.moe_layers:
        elems += m.moe_layers * (tok * d + st.pairs_gpu * m.moe_intermediate / lay.moe_tp)
        elems += m.moe_layers * tok * m.n_shared_experts * m.moe_intermediate / a
    st.add("quant", act=elems * (ACT_BYTES + 1), launches=m.n_layers)


def _add_communication(cfg: DeploymentConfig, st: _Step, achievable: bool) -> None:
    """Collectives per step. Attention TP: all-reduce after attention and after each FFN (MoE output too
    while tokens are replicated). DP-attention: EP all-to-all dispatch/combine, or all-gather +
    reduce-scatter around a TP-sharded MoE. Logits are all-gathered under vocabulary parallelism."""
    m, lay, g, parts = cfg.model, cfg.layout, cfg.hardware.gpus_per_node, st.parts
    tok, tokens_replica = st.tok, st.tokens_replica
    hidden = tok * m.d_model * ACT_BYTES
    nvls_eff = nvls_efficiency(cfg, achievable)

    def coll(name: str, kind: str, size: float, n: int, count: int) -> None:
        intra, nvls, inter = route_collective(kind, size, n, g, nvls_eff, m.experts_per_token or 1,
                                              (m.n_group, m.topk_group))
        if intra or nvls or inter:
            p = parts[name]
            p.net_intra_bytes += intra * count
            p.net_nvls_bytes += nvls * count
            p.net_inter_bytes += inter * count
            p.net_messages += count

    if lay.attn_tp > 1:
        coll("allreduce", "allreduce", hidden, lay.attn_tp, m.n_layers + m.n_layers)  # attention + every FFN
        coll("allgather", "allgather", st.out_tok * m.vocab * LOGIT_BYTES, lay.attn_tp, 1)
    elif m.moe_layers and lay.tp > 1:
        if lay.ep > 1:
            k = m.experts_per_token
            disp = FP8_DISPATCH_BYTES if cfg.weight_dtype == "fp8" else ACT_BYTES
            if cfg.expert_weight_dtype in FP4_GEMM_DTYPES:  # FP4 GEMM inputs can be dispatched as FP4
                disp = WEIGHT_BYTES[cfg.expert_weight_dtype]
            coll("a2a_dispatch", "a2a", tok * k * m.d_model * disp, lay.ep, m.moe_layers)
            coll("a2a_combine", "a2a", tok * k * m.d_model * ACT_BYTES, lay.ep, m.moe_layers)
        else:
            gathered = tokens_replica * m.d_model * ACT_BYTES
            coll("allgather", "allgather", gathered, lay.tp, m.moe_layers)
            coll("reducescatter", "reducescatter", gathered, lay.tp, m.moe_layers)
