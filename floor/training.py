"""A training step per GPU: forward + backward per micro-batch, pipeline bubble, gradient collectives overlapped
with the last backward where the framework does, the optimizer, and memory feasibility.

Counts are for the slowest pipeline stage (the last: its layers plus the LM head). Every kernel group is timed
with the hierarchical roofline (efficiency.kernel_time), collectives with the topology model (collectives).
A micro-batch runs forward (twice under full recomputation), backward (dgrad + wgrad GEMMs, 2x forward), and
its tensor-parallel all-reduces, expert all-to-alls and pipeline sends unoverlapped (Megatron-style).
Step = (m + (pp - 1) / v) x micro-batch time + exposed gradient collectives + optimizer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .collectives import Topology, bus_factor, node_collective_time
from .deployment import DeploymentConfig
from .efficiency import KernelTime, KernelWork, hierarchy, kernel_time
from .flash import AttnCost, AttnShape, attention_cost
from .layout import kv_heads_per_gpu
from .moe_a2a import a2a_volume, expert_gemm_flops
from .parallel import TrainLayout
from .result import CLASS_NAMES, RESOURCES, ClassPart, FloorResult
from .training_config import GRAD_DTYPES, train_layout
from .training_memory import TrainMemory, params_per_gpu, train_memory

ACT = 2.0  # 16-bit activations
#: d-wide tensor passes per layer forward outside GEMMs and attention: LN1 read+write (2), bias-dropout-add
#: reads 2, writes 1, writes a 1-byte mask (3.5), LN2 (2), second bias-dropout-add (3.5).
ELEM_D_PASSES = 11.0
ELEM_FWD_LAUNCHES = 6
#: optimizer HBM bytes per parameter besides the gradient: Adam reads master weights, m, v (12) and writes
#: them (12) plus the 16-bit weights (2); SGD with momentum reads and writes master weights and momentum.
OPTIMIZER_BYTES = {"adam": 26.0, "sgd": 18.0}


@dataclass
class _Acc:
    """Kernel work (per micro-batch or per step) and collectives of one class, by phase."""

    work: dict[tuple[str, str], list[KernelWork]] = field(default_factory=lambda: defaultdict(list))
    comm: dict[tuple[str, str], list[tuple[float, float, int]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, part: str, phase: str, work: KernelWork) -> None:
        self.work[(part, phase)].append(work)

    def coll(self, part: str, phase: str, time_s: float, net_bytes: float, count: int) -> None:
        self.comm[(part, phase)].append((time_s, net_bytes, count))


def _gemm(acc: _Acc, part: str, flops: float, weights: float, act: float, launches: int, fwd_passes: int,
          grad_b: float) -> None:
    """Forward (fwd_passes times) and backward (dgrad + wgrad: 2x FLOPs, weights read, main gradient
    read-modify-written, activations twice) of one GEMM group."""
    acc.add(part, "fwd", KernelWork(flops * fwd_passes, (weights + act) * fwd_passes, launches=launches * fwd_passes))
    acc.add(part, "bwd", KernelWork(2 * flops, weights + weights / ACT * 2 * grad_b + 2 * act, launches=2 * launches))


def _attn(acc: _Acc, cost_fwd: AttnCost, cost_bwd: AttnCost, fwd_passes: int, cfg_kernel: str) -> None:
    """Attention forward (fwd_passes times) and backward; FlashAttention tiles load, compute and store in turn."""
    for phase, cost, k in (("fwd", cost_fwd, fwd_passes), ("bwd", cost_bwd, 1)):
        acc.add("attn_core", phase, KernelWork(cost.flops * k, cost.hbm_bytes * k, cost.l2_bytes * k,
                                               cost.l2_bytes * k, launches=cost.launches * k,
                                               serial=cfg_kernel != "standard"))


def _group_s(cfg: DeploymentConfig, op: str, size: float, n: int, ranks_per_node: int) -> float:
    """One collective among n ranks, ranks_per_node of them sharing a node (NVSwitch inside, NIC across)."""
    if n <= 1 or size <= 0:
        return 0.0
    hw, ach = cfg.hardware, cfg.peaks == "achievable"
    up = hw.scaleup_achievable_bytes_per_s if ach else hw.scaleup_bytes_per_s
    if ranks_per_node >= n:
        topo = Topology("switch", n, up)
    else:
        topo = Topology("hierarchical", n, up, gpus_per_node=ranks_per_node, inter_bytes_per_s=hw.scaleout_bytes_per_s)
    return node_collective_time(op, size, topo, hw.nvls_efficiency).time_s + (hw.net_latency_ns * 1e-9 if ach else 0.0)


def _micro_batch(cfg: DeploymentConfig, lay: TrainLayout, acc: _Acc) -> None:
    """Kernels and collectives of one micro-batch on the last pipeline stage."""
    m, hw = cfg.model, cfg.hardware
    t, g = lay.tp, hw.gpus_per_node
    seq, s = cfg.context_tokens, cfg.context_tokens // lay.sp
    tok = lay.micro_batch * s
    d, hd = m.d_model, m.head_dim or m.qk_head_dim
    layers = m.n_layers // lay.pp
    grad_b = GRAD_DTYPES[cfg.grad_dtype]
    nf = 2 if cfg.recompute == "full" else 1

    repl, sharded, kv_sharded = m.attn_params_split()
    kvh = kv_heads_per_gpu(m, t) if kv_sharded else 0
    p_attn = repl + sharded / t + (kv_sharded * kvh / m.n_kv_heads if kv_sharded else 0.0)
    heads = m.n_heads // t
    qkv_w = (heads + 2 * kvh) * hd
    _gemm(acc, "attn_proj", layers * 2 * tok * p_attn, layers * p_attn * ACT,
          layers * tok * (2 * d + qkv_w + heads * hd) * ACT, 2 * layers, nf, grad_b)

    shape = AttnShape(pairs=lay.micro_batch * heads, n_q=s, n_k=seq, head_dim=hd, causal=True)
    sram = hierarchy(hw).smem_per_sm_bytes or 100e3  # facts section 5: "M ~ 100 KB" where the catalog has none
    f, b = (attention_cost(shape, cfg.attention_kernel, x, sram).scaled(layers) for x in ("fwd", "bwd"))
    recompute_attn = nf + (1 if cfg.recompute == "selective" and cfg.attention_kernel == "standard" else 0)
    _attn(acc, f, b, recompute_attn, cfg.attention_kernel)

    moe_layers = m.moe_layers // lay.pp if m.is_moe else 0
    dense_layers = layers - moe_layers
    ff, mm = m.dense_intermediate, m.mlp_matrices
    if dense_layers:
        p_mlp = mm * d * ff / t
        _gemm(acc, "dense_mlp", dense_layers * 2 * tok * p_mlp, dense_layers * p_mlp * ACT,
              dense_layers * tok * (2 * d + mm * ff / t) * ACT, 2 * dense_layers, nf, grad_b)
    rows_per_token = 1.0
    if moe_layers:
        k, n_exp, ffe = m.experts_per_token, m.n_routed_experts, m.moe_intermediate
        vol = a2a_volume(tok, k, d, cfg.capacity_factor, lay.ep)
        rows_per_token, ff = vol.expert_rows / tok, ffe
        _gemm(acc, "moe_router", moe_layers * 2 * tok * d * n_exp, moe_layers * d * n_exp * ACT,
              moe_layers * tok * (d + n_exp) * ACT, moe_layers, nf, grad_b)
        local = n_exp / lay.ep * m.expert_params / t
        _gemm(acc, "moe_experts", moe_layers * expert_gemm_flops(vol.expert_rows, m.expert_params, t),
              moe_layers * local * ACT, moe_layers * vol.expert_rows * (2 * d + mm * ffe / t) * ACT,
              2 * moe_layers, nf, grad_b)
        size = vol.expert_rows * d * ACT  # nccl-tests S: all this rank sends, itself included
        a2a_s = _group_s(cfg, "alltoall", size, lay.ep, max(1, g // t))
        for part in ("a2a_dispatch", "a2a_combine"):
            acc.coll(part, "mb", a2a_s, size * bus_factor("alltoall", lay.ep), moe_layers * (nf + 1))

    elem = tok * (ELEM_D_PASSES * d + rows_per_token * mm * ff / t) * ACT * layers
    acc.add("norm_elementwise", "fwd", KernelWork(0.0, elem * nf, launches=ELEM_FWD_LAUNCHES * layers * nf))
    acc.add("norm_elementwise", "bwd", KernelWork(0.0, 2 * elem, launches=2 * ELEM_FWD_LAUNCHES * layers))

    v_gpu = m.vocab / t  # LM head and cross-entropy on the last stage: logits written, read by the loss;
    _gemm(acc, "lm_head", 2 * tok * v_gpu * d, v_gpu * d * ACT, tok * (d + 2 * v_gpu) * ACT, 1, 1, grad_b)

    if t > 1:  # Megatron TP: two all-reduces per layer forward (each pass) and two in backward
        ar = _group_s(cfg, "allreduce", tok * d * ACT, t, g)
        acc.coll("allreduce", "mb", ar, tok * d * ACT * bus_factor("allreduce", t), layers * 2 * (nf + 1))
    if lay.pp > 1:  # activations forward, their gradients backward, per virtual stage
        stride = lay.n_gpus // lay.pp
        bw = cfg.hardware.scaleup_achievable_bytes_per_s if stride < g else cfg.hardware.scaleout_bytes_per_s
        p2p = tok * d * ACT / bw + (cfg.hardware.net_latency_ns * 1e-9 if cfg.peaks == "achievable" else 0.0)
        acc.coll("sendrecv", "mb", p2p, tok * d * ACT, 2 * lay.pp_interleave)


def _step_level(cfg: DeploymentConfig, lay: TrainLayout, acc: _Acc) -> None:
    """Optimizer and gradient collectives, once per step."""
    g, t = cfg.hardware.gpus_per_node, lay.tp
    dense, expert = params_per_gpu(cfg, lay)
    grad_b = GRAD_DTYPES[cfg.grad_dtype]
    shard_d = lay.dp_attention if cfg.zero else 1
    shard_e = lay.edp if cfg.zero else 1
    owned = dense / shard_d + expert / shard_e
    acc.add("optimizer", "step", KernelWork(10.0 * owned, owned * (grad_b + OPTIMIZER_BYTES[cfg.optimizer]),
                                            launches=max(1, cfg.model.n_layers // lay.pp)))
    for params, n, rpn in ((dense, lay.dp_attention, max(1, g // t)), (expert, lay.edp, max(1, g // (t * lay.ep)))):
        if n <= 1 or params <= 0:
            continue
        if cfg.zero:
            rs = _group_s(cfg, "reducescatter", params * grad_b, n, rpn)
            ag = _group_s(cfg, "allgather", params * ACT, n, rpn)
            acc.coll("reducescatter", "grad", rs, params * grad_b * bus_factor("reducescatter", n), 1)
            acc.coll("allgather", "param", ag, params * ACT * bus_factor("allgather", n), 1)
        else:
            ar = _group_s(cfg, "allreduce", params * grad_b, n, rpn)
            acc.coll("allreduce", "grad", ar, params * grad_b * bus_factor("allreduce", n), 1)


@dataclass(frozen=True)
class PartTime:
    """One class over the whole step: counts and time by level; time_ns is the sum of its kernels' roofline
    times (or its collectives' times), exposed_ns the part on the critical path."""

    name: str
    flops: float
    hbm_bytes: float
    l2_bytes: float
    net_bytes: float
    messages: int
    compute_ns: int
    hbm_ns: int
    onchip_ns: int
    net_ns: int
    time_ns: int
    exposed_ns: int
    bound: str


@dataclass(frozen=True)
class TrainingPrediction:
    """Step time and its breakdown for one training config."""

    config: DeploymentConfig
    layout: TrainLayout
    memory: TrainMemory
    parts: list[PartTime]
    micro_batch_ns: int
    bubble_ns: int
    grad_comm_ns: int
    grad_exposed_ns: int
    optimizer_ns: int
    step_ns: int
    model_flops_per_step: float

    @property
    def tokens_per_step(self) -> int:
        return self.config.batch * self.config.context_tokens

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / (self.step_ns * 1e-9) / self.config.n_gpus

    @property
    def model_flops_per_s_per_gpu(self) -> float:
        return self.model_flops_per_step / (self.step_ns * 1e-9) / self.config.n_gpus

    @property
    def mfu(self) -> float:
        return self.model_flops_per_s_per_gpu / self.config.hardware.peak_flops_per_s("bf16")

    def to_dict(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "config": {"name": self.config.name, **self.config.settings()},
            "layout": {"n_gpus": lay.n_gpus, "dp": lay.dp, "tp": lay.tp, "sp": lay.sp, "pp": lay.pp, "ep": lay.ep,
                       "edp": lay.edp, "pp_interleave": lay.pp_interleave, "micro_batches": lay.micro_batches},
            "step_ns": self.step_ns, "micro_batch_ns": self.micro_batch_ns, "bubble_ns": self.bubble_ns,
            "grad_comm_ns": self.grad_comm_ns, "grad_exposed_ns": self.grad_exposed_ns,
            "optimizer_ns": self.optimizer_ns, "tokens_per_step": self.tokens_per_step,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_flops_per_s_per_gpu": self.model_flops_per_s_per_gpu, "mfu": self.mfu,
            "memory": self.memory.to_dict(), "parts": [p.__dict__ for p in self.parts],
        }


def _times(cfg: DeploymentConfig, works: list[KernelWork]) -> list[KernelTime]:
    return [kernel_time(cfg.hardware, w, cfg.peaks == "achievable") for w in works]


def predict_training(cfg: DeploymentConfig) -> TrainingPrediction:
    """Step time of a training config with its per-class breakdown, bubble, overlap and memory."""
    lay = train_layout(cfg)
    mb, st = _Acc(), _Acc()
    _micro_batch(cfg, lay, mb)
    _step_level(cfg, lay, st)
    n_mb = lay.micro_batches
    phase_s = defaultdict(float)
    for (_, phase), works in mb.work.items():
        phase_s[phase] += sum(k.time_s for k in _times(cfg, works))
    mb_comm_s = sum(t * c for items in mb.comm.values() for t, _, c in items)
    t_mb = phase_s["fwd"] + phase_s["bwd"] + mb_comm_s
    bubble = (lay.pp - 1) / lay.pp_interleave * t_mb
    grad_s = sum(t * c for items in st.comm.values() for t, _, c in items)
    overlappable = sum(t * c for (_, ph), items in st.comm.items() if ph == "grad" for t, _, c in items)
    grad_exposed = max(0.0, overlappable - phase_s["bwd"]) if cfg.grad_overlap else overlappable
    exposed = grad_exposed + (grad_s - overlappable)  # parameter all-gathers (ZeRO-1) wait for the optimizer
    opt_s = sum(k.time_s for k in _times(cfg, st.work[("optimizer", "step")]))
    step_s = n_mb * t_mb + bubble + exposed + opt_s
    parts = _part_times(cfg, mb, st, n_mb, grad_exposed)
    m = cfg.model
    flops = (6 * cfg.context_tokens * m.params_active() + 12 * m.n_layers * m.d_model * cfg.context_tokens ** 2)
    return TrainingPrediction(cfg, lay, train_memory(cfg, lay), parts, round(t_mb * 1e9), round(bubble * 1e9),
                              round(grad_s * 1e9), round(exposed * 1e9), round(opt_s * 1e9), round(step_s * 1e9),
                              flops * cfg.batch)


def _part_times(cfg: DeploymentConfig, mb: _Acc, st: _Acc, n_mb: int, grad_exposed_s: float) -> list[PartTime]:
    """Per class over the step: micro-batch work x m plus step-level work."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for acc, mult in ((mb, n_mb), (st, 1)):
        for (part, _), works in acc.work.items():
            r = rows[part]
            for w, kt in zip(works, _times(cfg, works), strict=True):
                r["flops"] += w.flops * mult
                r["hbm_bytes"] += w.hbm_bytes * mult
                r["l2_bytes"] += w.l2_bytes * mult
                r["compute"] += kt.compute_s * mult
                r["hbm"] += kt.hbm_s * mult
                r["onchip"] += max(kt.l2_s, kt.smem_s) * mult
                r["time"] += kt.time_s * mult
                r["exposed"] += kt.time_s * mult
        for (part, phase), items in acc.comm.items():
            r = rows[part]
            for t, nbytes, count in items:
                r["net_bytes"] += nbytes * count * mult
                r["messages"] += count * mult
                r["net"] += t * count * mult
                r["time"] += t * count * mult
                r["exposed"] += t * count * mult if phase != "grad" else 0.0
    if "allreduce" in rows or "reducescatter" in rows:
        rows["allreduce" if not cfg.zero else "reducescatter"]["exposed"] += grad_exposed_s
    out = []
    for name, r in rows.items():
        levels = {"compute": r["compute"], "hbm": r["hbm"], "onchip": r["onchip"], "network": r["net"]}
        out.append(PartTime(name, r["flops"], r["hbm_bytes"], r["l2_bytes"], r["net_bytes"], int(r["messages"]),
                            round(r["compute"] * 1e9), round(r["hbm"] * 1e9), round(r["onchip"] * 1e9),
                            round(r["net"] * 1e9), round(r["time"] * 1e9), round(r["exposed"] * 1e9),
                            max(levels, key=lambda k: levels[k])))
    return out


def training_floor(cfg: DeploymentConfig) -> FloorResult:
    """compute_floor for a training config: per-class parts over one optimizer step on one GPU."""
    pred = predict_training(cfg)
    order = {n: i for i, n in enumerate(CLASS_NAMES)}
    parts = [
        ClassPart(name=p.name, hbm_bytes=round(p.hbm_bytes), weight_bytes=0, kv_bytes=0, flops=round(p.flops),
                  flops_dtype="bf16", net_bytes=round(p.net_bytes), net_messages=p.messages,
                  hbm_ns=max(p.hbm_ns, p.onchip_ns), compute_ns=p.compute_ns, net_ns=p.net_ns)
        for p in sorted(pred.parts, key=lambda p: order.get(p.name, len(order)))
    ]
    resource_ns = {"hbm": sum(p.hbm_ns for p in parts), "compute": sum(p.compute_ns for p in parts),
                   "network": sum(p.net_ns for p in parts)}
    hw, lay = cfg.hardware, pred.layout
    notes = [
        f"training step: predicted {pred.step_ns} ns (micro-batch {pred.micro_batch_ns} ns x {lay.micro_batches}, "
        f"bubble {pred.bubble_ns} ns, exposed gradient collectives {pred.grad_exposed_ns} ns, optimizer "
        f"{pred.optimizer_ns} ns); see `tracekit predict`",
        f"memory per GPU {pred.memory.total / 1e9:.1f} GB of {pred.memory.capacity / 1e9:.0f} GB"
        + ("" if pred.memory.feasible else " (does not fit)"),
        f"peaks: {cfg.peaks}",
    ]
    return FloorResult(
        config=cfg, parts=parts, resource_ns=resource_ns, t_opt_ns=max(resource_ns.values()),
        t_sum_ns=sum(resource_ns.values()), binding=max(RESOURCES, key=lambda r: resource_ns[r]),
        peak_kind=cfg.peaks, kv_capacity_requests=0, requests_per_gpu=cfg.batch / lay.dp_attention,
        tokens_per_step=cfg.batch * cfg.context_tokens, mfu_peak_flops_per_s=hw.peak_flops_per_s("bf16"),
        hbm_peak_bytes_per_s=hw.hbm_bytes_per_s, notes=notes,
    )
