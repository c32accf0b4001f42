"""Memory per GPU of a training layout, stage by stage and tensor by tensor.

Saved activations per layer and micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198, section 4),
tensor by tensor instead of the closed form s b h (34 + 5 a s / h):
- norm inputs and the GEMM inputs they feed (LN outputs), and 1-byte dropout masks when the run uses dropout:
  replicated across tensor parallelism, or sharded over it under Megatron sequence parallelism (section 4.2.2);
- attention: Q, K (GQA: the KV heads), V, O and the FP32 log-sum-exp for FlashAttention, or the score side of
  standard attention (softmax output, dropout mask and output: 5 a s^2 b); MLA keeps its latents, and selective
  recomputation drops Q, K and V (recomputed up-projections, DeepSeek-V3 section 3.2.3);
- the MLP intermediates (2 bytes x matrices x width), per routed row for experts plus the routed copy of the
  token, sharded over tensor parallelism;
- FP8 training (weight_dtype = "fp8") caches GEMM inputs in FP8 and recomputes the MLP activation's output
  from its cached FP8 inputs (DeepSeek-V3 section 3.3.3);
- selective recomputation drops the scores and the norm outputs; full recomputation keeps each layer's input.
Context parallelism divides every term by its degree. A stage holds the micro-batches in flight of its schedule
(parallel.in_flight); the last stage adds the logits of one micro-batch (16-bit logits and FP32 softmax).
Weights are 16-bit, gradients `grad_dtype`, Adam keeps FP32 master weights and two moments. ZeRO shards the
optimizer states (stage 1), the gradients too (2), and the weights (3, FSDP full sharding: two layers' weights
gathered at a time, the one in use and the prefetched next) over the data-parallel ranks of each parameter.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .flash import STAT_BYTES
from .layout import kv_heads_per_gpu
from .parallel import in_flight
from .training_config import GRAD_DTYPES

if TYPE_CHECKING:
    from .config import DeploymentConfig
    from .parallel import TrainLayout
    from .training_work import Stage

WEIGHT_BYTES_16 = 2.0
#: FP32 master weights + Adam first and second moments; SGD keeps master weights and momentum.
OPTIMIZER_STATE_BYTES = {"adam": 12.0, "sgd": 8.0}
LOGIT_BYTES = 2.0 + 4.0  # 16-bit logits and their FP32 softmax


@dataclass(frozen=True)
class TrainMemory:
    """Bytes per GPU on the fullest pipeline stage, with its named tensors (`items`)."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    capacity: float
    stage: int = 0
    items: tuple[tuple[str, float], ...] = ()

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations

    @property
    def feasible(self) -> bool:
        return self.total <= self.capacity

    @property
    def largest(self) -> tuple[str, float]:
        """The largest named tensor group on this stage."""
        return max(self.items, key=lambda kv: kv[1]) if self.items else ("", 0.0)

    def verdict(self) -> str:
        """One line: fits with headroom, or which tensor overflows and by how much."""
        name, size = self.largest
        gb = 1e9
        if self.feasible:
            return (f"fits: {self.total / gb:.1f} GB per GPU on stage {self.stage} of {self.capacity / gb:.1f} GB "
                    f"({(self.capacity - self.total) / gb:.1f} GB free)")
        return (f"does not fit: stage {self.stage} needs {self.total / gb:.1f} GB of {self.capacity / gb:.1f} GB, "
                f"{(self.total - self.capacity) / gb:.1f} GB over; the largest tensor group is {name} "
                f"({size / gb:.1f} GB)")

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "weights_bytes": int(self.weights), "grads_bytes": int(self.grads),
                "optimizer_bytes": int(self.optimizer), "activations_bytes": int(self.activations),
                "total_bytes": int(self.total), "capacity_bytes": int(self.capacity), "feasible": self.feasible,
                "items": {k: int(v) for k, v in self.items}, "verdict": self.verdict()}


def layer_params(cfg: DeploymentConfig, moe: bool) -> tuple[float, float]:
    """(dense, expert) parameters of one transformer layer on one GPU (TP-sharded; experts over EP too)."""
    m, t, ep = cfg.model, cfg.tp, cfg.ep
    dense = sum(m.attn_params_split())
    if not moe:
        return (dense + m.dense_mlp_params) / t, 0.0
    dense += m.router_params + m.n_shared_experts * m.expert_params
    return dense / t, m.n_routed_experts / ep * m.expert_params / t


def stage_params(cfg: DeploymentConfig, st: Stage) -> tuple[float, float]:
    """(dense, expert) parameters a stage holds per GPU: its layers, the embedding on the first stage, the LM
    head on the last (a second copy of tied embeddings), and the MTP projections there."""
    m, t = cfg.model, cfg.tp
    dd, _ = layer_params(cfg, False)
    md, me = layer_params(cfg, True) if m.is_moe else (0.0, 0.0)
    dense = st.dense_layers * dd + st.moe_layers * md + (m.embedding_params / t if st.embedding else 0.0)
    if st.lm_heads:
        dense += (0.0 if st.embedding and m.tied_embeddings else m.embedding_params / t)
        dense += cfg.mtp_depth * 2 * m.d_model * m.d_model / t
    return dense, st.moe_layers * me


def activation_items(cfg: DeploymentConfig, lay: TrainLayout, moe: bool) -> dict[str, float]:
    """Saved activations of one layer for one micro-batch on one GPU, by tensor group (module docstring)."""
    m = cfg.model
    s, b, h, t = cfg.context_tokens / lay.sp, lay.micro_batch, m.d_model, lay.tp
    seq_div = t if cfg.sequence_parallel else 1
    tok = s * b
    if cfg.recompute == "full":
        return {"layer inputs": 2.0 * tok * h / seq_div}
    selective = cfg.recompute == "selective"
    gemm_in = 1.0 if cfg.weight_dtype == "fp8" else 2.0  # FP8 training caches GEMM inputs in FP8
    norm_b = 4.0 + (0.0 if selective else 2.0 * gemm_in) + (2.0 if cfg.dropout else 0.0)  # inputs, outputs, masks
    items = {"norms and GEMM inputs": tok * h * norm_b / seq_div}
    heads = m.n_heads / t
    if m.attention == "mla":
        latents = gemm_in * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) / seq_div
        qkv = 0.0 if selective else 2.0 * heads * (2 * m.qk_head_dim + m.out_head_dim)
        per_tok = latents + qkv + gemm_in * heads * m.out_head_dim
    else:
        kvh = kv_heads_per_gpu(m, t)
        per_tok = 2.0 * heads * m.head_dim + gemm_in * heads * m.head_dim + 4.0 * kvh * m.head_dim
    if cfg.attention_kernel == "standard":
        if not selective:
            items["attention scores"] = (2.0 + (3.0 if cfg.dropout else 0.0)) * heads * s * cfg.context_tokens * b
    else:
        per_tok += STAT_BYTES * heads
    items["attention"] = tok * per_tok
    mm = m.mlp_matrices
    # per row: the first GEMM's outputs (activation input) and the activation's output (second GEMM input); FP8
    # runs cache the activation input in FP8 and recompute its output (DeepSeek-V3 section 3.3.3)
    mlp_b = (gemm_in * (mm - 1) + (0.0 if cfg.weight_dtype == "fp8" else 2.0))
    if moe:
        rows = m.experts_per_token * cfg.capacity_factor
        items["expert intermediates"] = tok * rows * (gemm_in * h + mlp_b * m.moe_intermediate / t)
        items["mlp intermediates"] = tok * m.n_shared_experts * mlp_b * m.moe_intermediate / t
    else:
        items["mlp intermediates"] = tok * mlp_b * m.dense_intermediate / t
    return {k: v for k, v in items.items() if v}


def _stage_memory(cfg: DeploymentConfig, lay: TrainLayout, held: list[Stage]) -> TrainMemory:
    """Memory of one GPU that holds the stages `held` (two under DualPipe)."""
    dense = expert = 0.0
    acts: dict[str, float] = defaultdict(float)
    shard_d, shard_e = lay.dp_attention, lay.edp
    grad_b, opt_b = GRAD_DTYPES[cfg.grad_dtype], OPTIMIZER_STATE_BYTES[cfg.optimizer]
    for st in held:
        d, e = stage_params(cfg, st)
        dense, expert = dense + d, expert + e
        flight = in_flight(lay.schedule, lay.pp, lay.pp_interleave, lay.micro_batches, st.index)
        for moe, n in ((False, st.dense_layers), (True, st.moe_layers)):
            for name, size in (activation_items(cfg, lay, moe).items() if n else ()):
                acts[f"activations: {name}"] += size * n * flight
        if st.lm_heads:
            acts["activations: logits"] += (cfg.context_tokens / lay.sp * lay.micro_batch * cfg.model.vocab / lay.tp
                                            * LOGIT_BYTES)
    zero = cfg.zero
    params = dense + expert
    sharded = dense / shard_d + expert / shard_e
    weights = (sharded + 2 * sum(layer_params(cfg, cfg.model.is_moe))) if zero >= 3 else params
    items = dict(acts)
    items["weights"] = weights * WEIGHT_BYTES_16
    items["gradients"] = (sharded if zero >= 2 else params) * grad_b
    items["optimizer states"] = (sharded if zero >= 1 else params) * opt_b
    return TrainMemory(weights=items["weights"], grads=items["gradients"], optimizer=items["optimizer states"],
                       activations=sum(acts.values()), capacity=cfg.hardware.hbm_bytes - cfg.reserve_per_gpu_bytes,
                       stage=held[0].index, items=tuple(sorted(items.items(), key=lambda kv: -kv[1])))


def train_memory(cfg: DeploymentConfig, lay: TrainLayout, stages: list[Stage]) -> TrainMemory:
    """Memory on the fullest GPU: every stage (every DualPipe pair of stages i and pp - 1 - i) is checked."""
    if lay.schedule == "dualpipe":
        groups = [[stages[i], stages[len(stages) - 1 - i]] for i in range(len(stages) // 2)]
    else:
        groups = [[st] for st in stages]
    return max((_stage_memory(cfg, lay, g) for g in groups), key=lambda mem: mem.total)
