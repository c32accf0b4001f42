"""How a parallel layout places weights, requests and the KV cache on each GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .hardware import GpuSpec
from .models import ModelSpec

#: bytes per weight element for the supported weight dtypes (FP8 block scales, 4 B per 128x128, ignored).
#: MXFP4 (OCP Microscaling spec v1.0): 4-bit E2M1 values plus one 8-bit E8M0 scale per block of 32.
#: NVFP4 (NVIDIA Blackwell): 4-bit E2M1 values plus one FP8 E4M3 scale per block of 16 (the per-tensor FP32 scale
#: is negligible).
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 0.5 + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}
#: expert weight dtypes whose GEMMs run on FP4 tensor cores (activations quantised to the same format); MXFP4
#: here is weight-only (BF16 activations, as vLLM's gpt-oss MoE kernels run it)
FP4_GEMM_DTYPES = ("nvfp4",)
#: activations, embedding table and LM head stay BF16 in every supported configuration.
ACT_BYTES = 2.0


@dataclass(frozen=True)
class Layout:
    """Derived per-GPU placement.

    tp: GPUs in one model replica; dp_attention: attention data-parallel groups inside it (1 = plain TP,
    tp = one request shard per GPU); attn_tp = tp // dp_attention shards the heads; ep: expert-parallel
    degree (1 or tp), the rest of tp (moe_tp = tp // ep) shards each expert; replicas = n_gpus // tp.
    """

    n_gpus: int
    tp: int
    dp_attention: int
    ep: int

    @property
    def replicas(self) -> int:
        return self.n_gpus // self.tp

    @property
    def attn_tp(self) -> int:
        return self.tp // self.dp_attention

    @property
    def moe_tp(self) -> int:
        return self.tp // self.ep

    @property
    def attention_groups(self) -> int:
        """Groups holding distinct requests in the whole deployment."""
        return self.replicas * self.dp_attention

    def requests_per_gpu(self, batch: float) -> float:
        """Requests whose attention (and KV cache) each GPU handles: batch / (replicas x DP)."""
        return batch / self.attention_groups

    def requests_per_replica(self, batch: float) -> float:
        return batch / self.replicas


def kv_heads_per_gpu(model: ModelSpec, attn_tp: int) -> int:
    """GQA KV heads a GPU stores: sharded while n_kv >= attn_tp, replicated beyond."""
    return math.ceil(model.n_kv_heads / attn_tp)


def kv_bytes_per_token_layer_gpu(model: ModelSpec, kv_format: str, attn_tp: int) -> float:
    """Attention-cache bytes one GPU stores per token per layer.

    MLA: the latent is shared by all heads, so tensor parallelism replicates it on every rank.
    GQA: each rank keeps its KV heads only.
    """
    full = model.kv_bytes_per_token_layer(kv_format)
    if model.attention == "mla":
        return full
    return full * kv_heads_per_gpu(model, attn_tp) / model.n_kv_heads


def cache_bytes_per_token_gpu(model: ModelSpec, kv_format: str, attn_tp: int) -> float:
    """All layers: attention cache plus the DSA indexer key cache (also replicated under TP)."""
    per_layer = (
        kv_bytes_per_token_layer_gpu(model, kv_format, attn_tp) + model.indexer_bytes_per_token_layer()
    )
    return per_layer * model.n_layers


def weight_bytes_per_gpu(
    model: ModelSpec, lay: Layout, weight_dtype: str, expert_weight_dtype: str = ""
) -> float:
    """Resident weight bytes on one GPU (embedding, LM head and router in BF16; routed experts in
    expert_weight_dtype, or weight_dtype when it is empty)."""
    wb = WEIGHT_BYTES[weight_dtype]
    wb_exp = WEIGHT_BYTES[expert_weight_dtype or weight_dtype]
    a = lay.attn_tp
    repl, sharded, kv_sharded = model.attn_params_split()
    attn = repl + sharded / a
    if kv_sharded:
        attn += kv_sharded * kv_heads_per_gpu(model, a) / model.n_kv_heads
    irepl, isharded = model.indexer_params_split()
    attn += irepl + isharded / a
    total = model.n_layers * attn * wb
    total += model.dense_layers * model.dense_mlp_params / a * wb
    if model.is_moe:
        routed = model.n_routed_experts / lay.ep * model.expert_params / lay.moe_tp
        shared = model.n_shared_experts * model.expert_params / a
        total += model.moe_layers * (routed * wb_exp + shared * wb + model.router_params * ACT_BYTES)
    heads = 1 if model.tied_embeddings else 2
    total += heads * model.embedding_params / a * ACT_BYTES
    return total


def kv_capacity_requests(
    model: ModelSpec,
    gpu: GpuSpec,
    lay: Layout,
    weight_dtype: str,
    kv_format: str,
    context_tokens: int,
    reserve_per_gpu_bytes: float,
    expert_weight_dtype: str = "",
) -> int:
    """Concurrent requests of `context_tokens` that fit in the whole deployment beside weights and reserve.

    Every layer is assumed to cache the whole context, sliding-window layers too (conservative).
    """
    free = (
        gpu.hbm_bytes
        - weight_bytes_per_gpu(model, lay, weight_dtype, expert_weight_dtype)
        - reserve_per_gpu_bytes
    )
    per_request = context_tokens * cache_bytes_per_token_gpu(model, kv_format, lay.attn_tp)
    if free <= 0 or per_request <= 0:
        return 0
    return int(free // per_request) * lay.attention_groups
