"""Kernel work and collectives of one micro-batch on one pipeline stage of a training step.

Phases: `fwd` (one forward pass), `recompute` (forward passes repeated in backward: full recomputation repeats
the layer, selective the norms and, with standard attention, the attention core), `bwd` (input gradients:
dgrad GEMMs, attention and elementwise backward) and `wgrad` (weight-gradient GEMMs). Collectives carry a
kind that says what can hide them: `tp` (Megatron tensor parallelism: all-reduce per block, or all-gather +
reduce-scatter under sequence parallelism), `cp` (context parallelism: K/V all-gathered in forward, their
gradients reduce-scattered in backward, as Llama 3 does), `ep` (expert all-to-all), `pp` (pipeline sends) and
`fsdp` (ZeRO-3 weight gathers and gradient scatters).
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from .ceilings import ceiling as gemm_ceiling
from .collectives import Topology, bus_factor, node_collective_time
from .efficiency import KernelTime, KernelWork, hierarchy, kernel_time
from .flash import AttnShape, attention_cost
from .hardware import GpuSpec
from .layout import kv_heads_per_gpu
from .moe import expected_distinct_experts
from .moe_a2a import expert_gemm_flops
from .parallel import TrainLayout
from .training_config import GRAD_DTYPES, overlaps

if TYPE_CHECKING:
    from .config import DeploymentConfig

ACT = 2.0  # 16-bit activations
#: d-wide tensor passes per layer forward outside GEMMs and attention: LN1 read + write (2), residual add reads
#: 2 and writes 1 (3), LN2 (2), second residual add (3); dropout adds a 1-byte mask to each add (+0.5 each).
ELEM_D_PASSES = 10.0
DROPOUT_D_PASSES = 1.0
ELEM_FWD_LAUNCHES = 6
#: FP8 activations for dispatch: 1 byte per element plus one FP32 scale per 128 (DeepSeek-V3 section 3.3.2).
FP8_ROW_BYTES = 1.0 + 4.0 / 128


@dataclass(frozen=True)
class Comm:
    """One collective repeated `count` times per micro-batch (or per step)."""

    part: str
    phase: str
    kind: str
    time_s: float
    net_bytes: float
    count: int


@dataclass
class StageWork:
    """Kernel work by (part, phase) and collectives of one micro-batch on one stage."""

    work: dict[tuple[str, str], list[KernelWork]] = field(default_factory=lambda: defaultdict(list))
    comms: list[Comm] = field(default_factory=list)

    def add(self, part: str, phase: str, work: KernelWork) -> None:
        if work.flops or work.hbm_bytes:
            self.work[(part, phase)].append(work)

    def coll(self, part: str, phase: str, kind: str, time_s: float, net_bytes: float, count: float) -> None:
        if count > 0 and time_s > 0:
            self.comms.append(Comm(part, phase, kind, time_s, net_bytes, round(count)))


@dataclass(frozen=True)
class Stage:
    """What one pipeline stage runs per micro-batch."""

    index: int
    dense_layers: int
    moe_layers: int
    embedding: bool
    lm_heads: int

    @property
    def layers(self) -> int:
        return self.dense_layers + self.moe_layers


def stages(cfg: DeploymentConfig, lay: TrainLayout) -> list[Stage]:
    """Stages first to last: leading dense layers first, the MTP modules (one block each) and their LM heads
    on the last stage."""
    m, out, start = cfg.model, [], 0
    n_dense = m.dense_layers
    per_stage = lay.stage_layers()
    for i, n in enumerate(per_stage):
        dense = max(0, min(start + n, n_dense) - start)
        moe, last = n - dense, i == len(per_stage) - 1
        extra = cfg.mtp_depth if last else 0
        out.append(Stage(i, dense + (extra if not m.is_moe else 0), moe + (extra if m.is_moe else 0), i == 0,
                         (1 + cfg.mtp_depth) if last else 0))
        start += n
    return out


@cache
def _ceilings() -> dict:
    """data/matmul.toml: the sustained-clock factor and the attention kernels' utilisation per GPU."""
    return tomllib.loads((resources.files(__package__) / "data" / "matmul.toml").read_text(encoding="utf-8"))


@cache
def _capped(gpu: GpuSpec, cap: float) -> GpuSpec:
    return replace(gpu, compute_efficiency_gflop=tuple((t, min(e, cap)) for t, e in gpu.compute_efficiency_gflop))


def ceiling(cfg: DeploymentConfig, part: str, dtype: str) -> tuple[float | None, bool]:
    """(ceiling, whole kernel) of a kernel class on the config's GPU, at the sustained (power-saturated) clock
    where measured: the attention kernel's reported utilisation for `attn_core` (a whole-kernel figure), else
    the best matmul of its dtype (data/ceilings.toml, the stop rule's ceilings too; None where neither file
    has one)."""
    gpu = cfg.hardware.key
    row = _ceilings().get(gpu, {})
    whole = _ceilings().get("attention", {}).get(gpu, {}).get(cfg.attention_kernel) if part == "attn_core" else None
    gemm = gemm_ceiling(cfg.hardware, "gemm", dtype)  # the best measured matmul: data/ceilings.toml, one source
    burst = whole or (gemm.fraction_of_peak if gemm.measured else None)
    return (burst * row.get("sustained", 1.0) if burst else None), bool(whole)


def train_kernel_time(cfg: DeploymentConfig, part: str, work: KernelWork) -> KernelTime:
    """kernel_time at the config's peaks; at achievable peaks the size-efficiency table is capped at the
    kernel's measured ceiling, since no kernel of a step beats its GPU's best (data/matmul.toml)."""
    ach, gpu = cfg.peaks == "achievable", cfg.hardware
    cap, whole = ceiling(cfg, part, work.dtype) if ach and work.flops else (None, False)
    if not cap:
        return kernel_time(gpu, work, ach)
    gpu = _capped(gpu, cap)
    if whole:  # a measured attention utilisation already includes the kernel's memory stalls: max, not a sum
        gpu, work = replace(gpu, compute_memory_overlap=True), replace(work, serial=False)
    return kernel_time(gpu, work, ach)


def group_time(cfg: DeploymentConfig, op: str, size: float, n: int, ranks_per_node: int) -> float:
    """One collective among n ranks, ranks_per_node of them sharing a node (NVSwitch inside, NIC across)."""
    if n <= 1 or size <= 0:
        return 0.0
    hw, ach = cfg.hardware, cfg.peaks == "achievable"
    up = hw.scaleup_achievable_bytes_per_s if ach else hw.scaleup_bytes_per_s
    rpn = max(1, min(ranks_per_node, n))
    if rpn >= n:
        topo = Topology("switch", n, up)
    else:
        topo = Topology("hierarchical", n, up, gpus_per_node=rpn, inter_bytes_per_s=hw.scaleout_bytes_per_s)
    return node_collective_time(op, size, topo, hw.nvls_efficiency).time_s + (hw.net_latency_ns * 1e-9 if ach else 0.0)


def _gemm(sw: StageWork, cfg: DeploymentConfig, part: str, flops: float, weights: float, act: float,
          launches: int, recompute: int) -> None:
    """Forward (and `recompute` repeats), dgrad (weights and activations read, input gradient written) and
    wgrad (activations and output gradient read, main gradient read-modify-written) of one GEMM group."""
    dtype, grad_b = cfg.weight_dtype, GRAD_DTYPES[cfg.grad_dtype]
    sw.add(part, "fwd", KernelWork(flops, weights + act, launches=launches, dtype=dtype))
    if recompute:
        sw.add(part, "recompute", KernelWork(flops * recompute, (weights + act) * recompute,
                                             launches=launches * recompute, dtype=dtype))
    sw.add(part, "bwd", KernelWork(flops, weights + act, launches=launches, dtype=dtype))
    sw.add(part, "wgrad", KernelWork(flops, act + weights / ACT * 2 * grad_b, launches=launches, dtype=dtype))


def _attention(sw: StageWork, cfg: DeploymentConfig, lay: TrainLayout, layers: int, tok_mb: int) -> None:
    """Projections and the attention core of `layers` layers (MLA: head width (qk + v) / 2, exact FLOPs)."""
    m, t = cfg.model, lay.tp
    d, s_loc = m.d_model, cfg.context_tokens // lay.sp
    full = cfg.recompute == "full"
    repl, sharded, kv_sharded = m.attn_params_split()
    kvh = kv_heads_per_gpu(m, t) if kv_sharded else 0
    p_attn = repl + sharded / t + (kv_sharded * kvh / m.n_kv_heads if kv_sharded else 0.0)
    heads, hd = m.n_heads // t, (m.qk_head_dim + m.out_head_dim) / 2
    qkv_w = heads * (m.qk_head_dim * 2 + m.out_head_dim) if m.attention == "mla" else (heads + 2 * kvh) * hd
    _gemm(sw, cfg, "attn_proj", layers * 2 * tok_mb * p_attn, layers * p_attn * ACT,
          layers * tok_mb * (2 * d + qkv_w + heads * m.out_head_dim) * ACT, 2 * layers, int(full))
    shape = AttnShape(pairs=lay.micro_batch * heads, n_q=s_loc, n_k=cfg.context_tokens, head_dim=round(hd),
                      causal=True, dropout=cfg.dropout)
    sram = hierarchy(cfg.hardware).smem_per_sm_bytes or 100e3  # facts section 5: "M ~ 100 KB" where none given
    kernel, serial = cfg.attention_kernel, cfg.attention_kernel != "standard"
    again = int(full) + int(cfg.recompute == "selective" and kernel == "standard")
    for phase, direction, k in (("fwd", "fwd", 1), ("recompute", "fwd", again), ("bwd", "bwd", 1)):
        if k:
            c = attention_cost(shape, kernel, direction, sram).scaled(layers * k)
            sw.add("attn_core", phase, KernelWork(c.flops, c.hbm_bytes, c.l2_bytes, c.l2_bytes,
                                                  launches=c.launches, serial=serial))


def _mlp(sw: StageWork, cfg: DeploymentConfig, lay: TrainLayout, st: Stage, tok_mb: int) -> float:
    """Dense and MoE MLPs; returns the MLP intermediate elements per token for the elementwise pass."""
    m, t, full = cfg.model, lay.tp, int(cfg.recompute == "full")
    d, mm = m.d_model, m.mlp_matrices
    inter = 0.0
    if st.dense_layers:
        p = mm * d * m.dense_intermediate / t
        n = st.dense_layers
        _gemm(sw, cfg, "dense_mlp", n * 2 * tok_mb * p, n * p * ACT, n * tok_mb * (2 * d + mm * m.dense_intermediate
                                                                                  / t) * ACT, 2 * n, full)
        inter += n * mm * m.dense_intermediate / t
    if not st.moe_layers:
        return inter
    n, k, ffe = st.moe_layers, m.experts_per_token, m.moe_intermediate
    rows = tok_mb * k * cfg.capacity_factor
    _gemm(sw, cfg, "moe_router", n * 2 * tok_mb * d * m.n_routed_experts, n * d * m.n_routed_experts * ACT,
          n * tok_mb * (d + m.n_routed_experts) * ACT, n, full)
    local = m.n_routed_experts / lay.ep * m.expert_params / t
    _gemm(sw, cfg, "moe_experts", n * expert_gemm_flops(rows, m.expert_params, t), n * local * ACT,
          n * rows * (2 * d + mm * ffe / t) * ACT, 2 * n, full)
    if m.n_shared_experts:
        p = m.n_shared_experts * m.expert_params / t
        _gemm(sw, cfg, "shared_expert", n * 2 * tok_mb * p, n * p * ACT,
              n * tok_mb * (2 * d + mm * m.n_shared_experts * ffe / t) * ACT, 2 * n, full)
    _a2a(sw, cfg, lay, n, tok_mb, full)
    return inter + n * (k * cfg.capacity_factor + m.n_shared_experts) * mm * ffe / t


def route_copies(top_k: int, groups: int, limit: int) -> float:
    """Copies of a token leaving its group: one per routed expert, or with DeepSeek's node/device-limited
    routing (limit M) one per destination group, min(M, expected distinct groups of its top-k)."""
    if limit <= 0:
        return float(top_k)
    return min(float(limit), expected_distinct_experts(groups, 1, top_k))


def _a2a(sw: StageWork, cfg: DeploymentConfig, lay: TrainLayout, layers: int, tok_mb: int, full: int) -> None:
    """Dispatch (FP8 rows when GEMMs are FP8) and combine (16-bit) of `layers` MoE layers: forward, backward
    and recomputed forward. EP across nodes: inter-node copies per token over the NIC while all routed rows fan
    out over NVLink at once (DeepSeek-V3 section 3.2.2); inside a node: copies over NVLink."""
    m, hw, ep = cfg.model, cfg.hardware, lay.ep
    if ep <= 1:
        return
    ach = cfg.peaks == "achievable"
    up = hw.scaleup_achievable_bytes_per_s if ach else hw.scaleup_bytes_per_s
    per_node = max(1, min(ep, hw.gpus_per_node // lay.tp))
    nodes = ep // per_node
    rows = tok_mb * m.experts_per_token * cfg.capacity_factor
    lat = hw.net_latency_ns * 1e-9 if ach else 0.0
    for part, elem_b in (("a2a_dispatch", FP8_ROW_BYTES if cfg.weight_dtype == "fp8" else ACT),
                         ("a2a_combine", ACT)):
        row_b = m.d_model * elem_b
        if cfg.moe_route_limit <= 0:
            size = rows * row_b
            time_s = group_time(cfg, "alltoall", size, ep, per_node)
            sent = size * bus_factor("alltoall", ep)
        elif nodes > 1:
            inter = tok_mb * row_b * route_copies(m.experts_per_token, nodes, cfg.moe_route_limit) * (nodes - 1) / nodes
            intra = rows * row_b * (per_node - 1) / per_node
            time_s, sent = max(inter / hw.scaleout_bytes_per_s, intra / up) + lat, inter + intra
        else:
            sent = tok_mb * row_b * route_copies(m.experts_per_token, ep, cfg.moe_route_limit) * (ep - 1) / ep
            time_s = sent / up + lat
        for phase, count in (("fwd", layers), ("recompute", layers * full), ("bwd", layers)):
            sw.coll(part, phase, "ep", time_s, sent, count)


def _tp_cp_pp(sw: StageWork, cfg: DeploymentConfig, lay: TrainLayout, st: Stage, tok_mb: int) -> None:
    """Tensor-parallel collectives (two per block per pass), context-parallel K/V exchange, pipeline sends."""
    m, hw, t = cfg.model, cfg.hardware, lay.tp
    g, passes = hw.gpus_per_node, {"fwd": 1, "recompute": int(cfg.recompute == "full"), "bwd": 1}
    size = tok_mb * m.d_model * ACT
    blocks = 2 * st.layers + (1 if st.lm_heads and cfg.sequence_parallel else 0)
    if t > 1:
        if cfg.sequence_parallel:  # each all-reduce becomes an all-gather and a reduce-scatter of the same bytes
            for op in ("allgather", "reducescatter"):
                time_s = group_time(cfg, op, size, t, g)
                for phase, k in passes.items():
                    sw.coll(op, phase, "tp", time_s, size * bus_factor(op, t), blocks * k)
        else:
            time_s = group_time(cfg, "allreduce", size, t, g)
            for phase, k in passes.items():
                sw.coll("allreduce", phase, "tp", time_s, size * bus_factor("allreduce", t), blocks * k)
    if lay.sp > 1 and st.layers:
        kv_tok = m.kv_bytes_per_token_layer("bf16") * (1.0 if m.attention == "mla" else
                                                       kv_heads_per_gpu(m, t) / max(m.n_kv_heads, 1))
        gathered = kv_tok * tok_mb * lay.sp  # nccl-tests S: the whole gathered K and V
        rpn = max(1, g // t)
        for op, phase, k in (("allgather", "fwd", 1), ("allgather", "recompute", passes["recompute"]),
                             ("reducescatter", "bwd", 1)):
            sw.coll(op, phase, "cp", group_time(cfg, op, gathered, lay.sp, rpn), gathered * bus_factor(op, lay.sp),
                    st.layers * k)
    if lay.pp > 1:  # activations forward, their gradients backward, per virtual stage; split over TP ranks
        stride = lay.n_gpus // lay.pp
        ach = cfg.peaks == "achievable"
        bw = (hw.scaleup_achievable_bytes_per_s if ach else hw.scaleup_bytes_per_s) if stride < g else \
            hw.scaleout_bytes_per_s
        per_rank = size / t
        time_s = per_rank / bw + (hw.net_latency_ns * 1e-9 if ach else 0.0)
        for phase in ("fwd", "bwd"):
            sw.coll("sendrecv", phase, "pp", time_s, per_rank, lay.pp_interleave)


def stage_work(cfg: DeploymentConfig, lay: TrainLayout, st: Stage, stage_params: float) -> StageWork:
    """All kernels and collectives of one micro-batch on stage `st` (stage_params: its weights per GPU, for
    the ZeRO-3 gathers)."""
    m, t, sw = cfg.model, lay.tp, StageWork()
    tok_mb = lay.micro_batch * cfg.context_tokens // lay.sp
    full = int(cfg.recompute == "full")
    if st.layers:
        _attention(sw, cfg, lay, st.layers, tok_mb)
    inter = _mlp(sw, cfg, lay, st, tok_mb)
    d_passes = (ELEM_D_PASSES + (DROPOUT_D_PASSES if cfg.dropout else 0)) / (t if cfg.sequence_parallel else 1)
    elem = tok_mb * (st.layers * d_passes * m.d_model + inter) * ACT
    norm_again = full or int(cfg.recompute == "selective")
    launches = ELEM_FWD_LAUNCHES * st.layers
    sw.add("norm_elementwise", "fwd", KernelWork(0.0, elem, launches=launches))
    if norm_again:
        sw.add("norm_elementwise", "recompute", KernelWork(0.0, elem, launches=launches))
    sw.add("norm_elementwise", "bwd", KernelWork(0.0, 2 * elem, launches=2 * launches))
    if st.lm_heads:  # LM head(s) and cross-entropy: logits written and read by the loss; MTP projections
        v_gpu, n = m.vocab / t, st.lm_heads
        _gemm(sw, cfg, "lm_head", n * 2 * tok_mb * v_gpu * m.d_model, n * v_gpu * m.d_model * ACT,
              n * tok_mb * (m.d_model + 2 * v_gpu) * ACT, n, 0)
        if cfg.mtp_depth:
            p = 2 * m.d_model * m.d_model / t
            _gemm(sw, cfg, "attn_proj", cfg.mtp_depth * 2 * tok_mb * p, cfg.mtp_depth * p * ACT,
                  cfg.mtp_depth * tok_mb * 3 * m.d_model * ACT, cfg.mtp_depth, full)
    _tp_cp_pp(sw, cfg, lay, st, tok_mb)
    if cfg.zero == 3 and lay.dp_attention > 1:  # FSDP: gather weights for forward and backward, scatter grads
        rpn = max(1, cfg.hardware.gpus_per_node // (t * lay.sp))  # DP ranks sit next to TP x CP (Megatron order)
        for op, phase, b in (("allgather", "fwd", ACT), ("allgather", "bwd", ACT),
                             ("reducescatter", "bwd", GRAD_DTYPES[cfg.grad_dtype])):
            size = stage_params * b
            sw.coll(op, phase, "fsdp", group_time(cfg, op, size, lay.dp_attention, rpn),
                    size * bus_factor(op, lay.dp_attention), 1)
    return sw


def hidden(cfg: DeploymentConfig, kind: str) -> bool:
    """Whether collectives of `kind` overlap compute under this config."""
    ov = overlaps(cfg)
    return kind in ov or (kind == "pp" and cfg.pipeline_schedule == "dualpipe") or kind == "fsdp"
