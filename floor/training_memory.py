"""Memory per GPU of a training layout: weights, gradients, optimizer states and activations.

Activations per layer per micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198, section 4.1):
s b h (10 + 24 / t + 5 a s / (h t)) bytes with tensor parallelism t and 16-bit activations with dropout; the
5 a s / (h t) score term disappears with FlashAttention or selective recomputation (only O and the FP32
log-sum-exp stay), and full recomputation keeps only each layer's 2 s b h input. The MLP's 19 s b h share is
scaled by the rows a token sends through the MLP (top-k x capacity factor for MoE) and its width relative to
the 4h GELU MLP the formula assumes. Under 1F1B the first stage holds min(pp, m) micro-batches in flight
(x (1 + (pp - 1) / (pp v)) interleaved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .flash import STAT_BYTES
from .training_config import GRAD_DTYPES

if TYPE_CHECKING:
    from .config import DeploymentConfig
    from .parallel import TrainLayout

WEIGHT_BYTES_16 = 2.0
#: FP32 master weights + Adam first and second moments; SGD keeps master weights and momentum.
OPTIMIZER_STATE_BYTES = {"adam": 12.0, "sgd": 8.0}


@dataclass(frozen=True)
class TrainMemory:
    """Bytes per GPU on the fullest pipeline stage."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    capacity: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations

    @property
    def feasible(self) -> bool:
        return self.total <= self.capacity

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": int(self.weights), "grads_bytes": int(self.grads),
                "optimizer_bytes": int(self.optimizer), "activations_bytes": int(self.activations),
                "total_bytes": int(self.total), "capacity_bytes": int(self.capacity), "feasible": self.feasible}


def params_per_gpu(cfg: DeploymentConfig, lay: TrainLayout) -> tuple[float, float]:
    """(dense, expert) parameters on the fullest GPU: its layers' share over tp, the embedding (a stage at an
    end holds it; tied embeddings are held by both end stages), and its local experts."""
    m = cfg.model
    layers = m.n_layers / lay.pp
    attn = sum(m.attn_params_split())
    dense = (layers * attn + m.dense_layers / lay.pp * m.dense_mlp_params + m.embedding_params) / lay.tp
    if m.is_moe:
        dense += m.moe_layers / lay.pp * m.router_params / lay.tp
    expert = m.moe_layers / lay.pp * m.n_routed_experts / lay.ep * m.expert_params / lay.tp
    return dense, expert


def activation_bytes_per_layer(cfg: DeploymentConfig, lay: TrainLayout) -> float:
    """Saved activations of one layer for one micro-batch on one GPU (see the module docstring)."""
    m = cfg.model
    s, b, h, t = cfg.context_tokens / lay.sp, lay.micro_batch, m.d_model, lay.tp
    if cfg.recompute == "full":
        return 2.0 * s * b * h
    if m.is_moe:
        width = m.experts_per_token * cfg.capacity_factor * m.moe_intermediate * m.mlp_matrices / 2
    else:
        width = m.dense_intermediate * m.mlp_matrices / 2
    mlp_scale = width / (4 * h)
    per_token_h = 10 + (5 + 19 * mlp_scale) / t  # attention 5 s b h / t + the MLP share, both TP-sharded
    if cfg.attention_kernel == "standard" and cfg.recompute == "none":
        scores = 5.0 * m.n_heads * s / (h * t)
    else:
        scores = m.n_heads / t * STAT_BYTES / h  # FP32 log-sum-exp per head and token
    return s * b * h * (per_token_h + scores)


def train_memory(cfg: DeploymentConfig, lay: TrainLayout) -> TrainMemory:
    """Weights, gradients, optimizer states and activations on the fullest GPU (first pipeline stage)."""
    dense, expert = params_per_gpu(cfg, lay)
    grad_b = GRAD_DTYPES[cfg.grad_dtype]
    opt_b = OPTIMIZER_STATE_BYTES[cfg.optimizer]
    shard_dense = lay.dp_attention if cfg.zero else 1
    shard_expert = lay.edp if cfg.zero else 1
    optimizer = opt_b * (dense / shard_dense + expert / shard_expert)
    in_flight = min(lay.pp, lay.micro_batches)
    if lay.pp_interleave > 1:
        in_flight *= 1 + (lay.pp - 1) / (lay.pp * lay.pp_interleave)
    layers = cfg.model.n_layers / lay.pp
    acts = activation_bytes_per_layer(cfg, lay) * layers * in_flight
    if lay.pp == 1:  # the logits of the micro-batch in flight: 16-bit logits and FP32 softmax
        acts += cfg.context_tokens / lay.sp * lay.micro_batch * cfg.model.vocab / lay.tp * 6.0
    return TrainMemory(
        weights=(dense + expert) * WEIGHT_BYTES_16,
        grads=(dense + expert) * grad_b,
        optimizer=optimizer,
        activations=acts,
        capacity=cfg.hardware.hbm_bytes - cfg.reserve_per_gpu_bytes,
    )
