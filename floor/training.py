"""A training step per GPU: an estimate, not a bound.

Each pipeline stage's micro-batch (training_work) is timed kernel by kernel with the hierarchical roofline
(efficiency.kernel_time, at the config's peaks: calibrated `achievable` ones in the named training configs) and
its collectives with the topology model. A collective is on the critical path unless the config hides its kind
(`comm_overlap`): then only what exceeds the compute it overlaps shows. A stage's forward F and backward B
(recomputation, input and weight gradients, exposed collectives) give the micro-batch time; the slowest rank
(under DualPipe the mean of its two stages) sets the pace:

    step = m x (F + B) + bubble(schedule) + exposed gradient collectives + parameter gathers + optimizer,

with m micro-batches per pipeline and the bubbles of parallel.bubble. Gradient all-reduces (reduce-scatters
under ZeRO) overlap the last micro-batch's backward when `grad_overlap`. `training_floor` turns the same counts
into the floor (t_opt: the largest resource total, no bubble, no latency) that `predict` shows beside it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .deployment import DeploymentConfig
from .efficiency import KernelTime, KernelWork
from .parallel import TrainLayout, bubble
from .result import CLASS_NAMES, RESOURCES, ClassPart, FloorResult
from .training_config import GRAD_DTYPES, overlaps, train_layout
from .training_memory import TrainMemory, stage_params, train_memory
from .training_work import ACT, StageWork, group_time, hidden, stage_work, stages, train_kernel_time
from .units import format_ns

#: optimizer HBM bytes per parameter besides the gradient: Adam reads master weights, m, v (12) and writes
#: them (12) plus the 16-bit weights (2); SGD with momentum reads and writes master weights and momentum.
OPTIMIZER_BYTES = {"adam": 26.0, "sgd": 18.0}
GEMM_PARTS = ("attn_proj", "dense_mlp", "moe_router", "moe_experts", "shared_expert", "lm_head")
#: Share of the SMs that overlapped expert all-to-alls take from compute: DeepSeek-V3 section 3.2.2, "only 20 SMs
#: are sufficient to fully utilize the bandwidths of IB and NVLink", of the H800's 132.
EP_COMM_SM_SHARE = 20 / 132


@dataclass(frozen=True)
class StageTime:
    """One micro-batch on one stage: forward F, backward B (with recomputation), its weight-gradient part W,
    the exposed collective time by part (inside F and B) and the kernel times by (part, phase)."""

    f_s: float
    b_s: float
    w_s: float
    exposed_s: dict[str, float]
    kernels: dict[tuple[str, str], list[KernelTime]]
    work: StageWork


def _stage_time(cfg: DeploymentConfig, sw: StageWork) -> StageTime:
    """Kernel times by phase plus the collectives left exposed by `comm_overlap` (module docstring)."""
    kernels = {key: [train_kernel_time(cfg, key[0], w) for w in works] for key, works in sw.work.items()}
    phase_k, gemm, shared = defaultdict(float), defaultdict(float), defaultdict(float)
    for (part, phase), times in kernels.items():
        t = sum(k.time_s for k in times)
        phase_k[phase] += t
        gemm[phase] += t if part in GEMM_PARTS else 0.0
        shared[phase] += t if part == "shared_expert" else 0.0
    comm = defaultdict(float)
    for c in sw.comms:
        comm[(c.kind, c.phase)] += c.time_s * c.count
    ov, exposed, behind = overlaps(cfg), defaultdict(float), 0.0
    for (kind, phase), t in comm.items():
        if kind == "tp" and "tp" in ov:
            exposed[(kind, phase)] = max(0.0, t - gemm[phase])
        elif kind == "ep" and "ep_shared" in ov and "ep" not in ov:
            exposed[(kind, phase)] = max(0.0, t - shared[phase])
        elif hidden(cfg, kind):
            behind += t  # hidden behind the whole micro-batch's compute
        else:
            exposed[(kind, phase)] = t
    compute = sum(phase_k.values())
    # hidden all-to-alls run on SMs taken from compute: that share of their time slows the compute they overlap
    stolen = EP_COMM_SM_SHARE * sum(t for (kind, _), t in comm.items() if kind == "ep" and hidden(cfg, kind))
    compute += stolen
    phase_k["bwd"] += stolen
    overflow = max(0.0, behind - compute)
    f = phase_k["fwd"] + sum(t for (_, ph), t in exposed.items() if ph == "fwd")
    b = phase_k["recompute"] + phase_k["bwd"] + phase_k["wgrad"] + overflow
    b += sum(t for (_, ph), t in exposed.items() if ph != "fwd")
    by_part = defaultdict(float)  # exposed collective time, shared among the parts of each kind and phase
    for c in sw.comms:
        own = c.time_s * c.count
        if (c.kind, c.phase) in exposed:
            by_part[c.part] += exposed[(c.kind, c.phase)] * own / comm[(c.kind, c.phase)]
        elif overflow:
            by_part[c.part] += overflow * own / behind
    return StageTime(f, b, phase_k["wgrad"], dict(by_part), kernels, sw)


@dataclass(frozen=True)
class PartTime:
    """One class over the whole step on the critical rank: counts and time by level; time_ns is the sum of its
    kernels' roofline times (or its collectives' times), exposed_ns the part on the critical path."""

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
    """Step time (an estimate) and its breakdown for one training config."""

    config: DeploymentConfig
    layout: TrainLayout
    memory: TrainMemory
    parts: list[PartTime]
    critical_stage: int
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
            "layout": {"n_gpus": lay.n_gpus, "dp": lay.dp, "tp": lay.tp, "cp": lay.sp, "pp": lay.pp, "ep": lay.ep,
                       "edp": lay.edp, "pp_interleave": lay.pp_interleave, "micro_batches": lay.micro_batches,
                       "stage_layers": lay.stage_layers(), "schedule": lay.schedule},
            "step_ns": self.step_ns, "critical_stage": self.critical_stage, "micro_batch_ns": self.micro_batch_ns,
            "bubble_ns": self.bubble_ns, "grad_comm_ns": self.grad_comm_ns, "grad_exposed_ns": self.grad_exposed_ns,
            "optimizer_ns": self.optimizer_ns, "tokens_per_step": self.tokens_per_step,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_flops_per_s_per_gpu": self.model_flops_per_s_per_gpu, "mfu": self.mfu,
            "memory": self.memory.to_dict(), "parts": [p.__dict__ for p in self.parts],
        }


def _ranks(lay: TrainLayout, times: list[StageTime]) -> list[tuple[int, list[tuple[StageTime, float]]]]:
    """(first stage index, [(stage time, weight)]) per pipeline rank; DualPipe ranks average stages i and
    pp - 1 - i (each direction's micro-batches cross one of them)."""
    if lay.schedule == "dualpipe":
        n = len(times)
        return [(i, [(times[i], 0.5), (times[n - 1 - i], 0.5)]) for i in range(n // 2)]
    return [(i, [(st, 1.0)]) for i, st in enumerate(times)]


def _grad_collectives(cfg: DeploymentConfig, lay: TrainLayout, dense: float, expert: float) -> tuple[float, float]:
    """(gradient reduction s, parameter gather s) once per step: all-reduce (ZeRO 0), reduce-scatter then
    all-gather (ZeRO 1-2); ZeRO 3 moves them into every micro-batch (training_work)."""
    g, t, grad_b = cfg.hardware.gpus_per_node, lay.tp, GRAD_DTYPES[cfg.grad_dtype]
    red = gather = 0.0
    if cfg.zero == 3:
        return red, gather
    for params, n, rpn in ((dense, lay.dp_attention, max(1, g // (t * lay.sp))),
                           (expert, lay.edp, max(1, g // (t * lay.ep)))):
        if n <= 1 or params <= 0:
            continue
        if cfg.zero:
            red += group_time(cfg, "reducescatter", params * grad_b, n, rpn)
            gather += group_time(cfg, "allgather", params * ACT, n, rpn)
        else:
            red += group_time(cfg, "allreduce", params * grad_b, n, rpn)
    return red, gather


def predict_training(cfg: DeploymentConfig) -> TrainingPrediction:
    """Step time of a training config with its per-class breakdown, bubble, overlap and memory."""
    lay = train_layout(cfg)
    sts = stages(cfg, lay)
    params = [stage_params(cfg, st) for st in sts]
    times = [_stage_time(cfg, stage_work(cfg, lay, st, sum(p))) for st, p in zip(sts, params, strict=True)]
    ranks = _ranks(lay, times)

    def rank_t(r: list[tuple[StageTime, float]]) -> float:
        return sum((st.f_s + st.b_s) * w for st, w in r)

    crit_i, crit = max(ranks, key=lambda r: rank_t(r[1]))
    f, b, w = (sum(getattr(st, a) * wt for st, wt in crit) for a in ("f_s", "b_s", "w_s"))
    n_mb, t_mb = lay.micro_batches, f + b
    bub = bubble(lay.schedule, lay.pp, lay.pp_interleave, f, b, w, f + b)
    held = [sts[crit_i]] + ([sts[lay.pp - 1 - crit_i]] if lay.schedule == "dualpipe" else [])
    dense = sum(stage_params(cfg, st)[0] for st in held)
    expert = sum(stage_params(cfg, st)[1] for st in held)
    red, gather = _grad_collectives(cfg, lay, dense, expert)
    grad_exposed = max(0.0, red - b) if cfg.grad_overlap else red
    opt = _optimizer(cfg, lay, dense, expert)
    opt_s = train_kernel_time(cfg, "optimizer", opt).time_s
    step_s = n_mb * t_mb + bub + grad_exposed + gather + opt_s
    parts = _part_times(cfg, crit, n_mb, opt, red, gather, grad_exposed)
    m = cfg.model
    flops = 6 * cfg.context_tokens * m.params_active() + 12 * m.n_layers * m.d_model * cfg.context_tokens ** 2
    return TrainingPrediction(cfg, lay, train_memory(cfg, lay, sts), parts, crit_i, round(t_mb * 1e9),
                              round(bub * 1e9), round((red + gather) * 1e9), round((grad_exposed + gather) * 1e9),
                              round(opt_s * 1e9), round(step_s * 1e9), flops * cfg.batch)


def _optimizer(cfg: DeploymentConfig, lay: TrainLayout, dense: float, expert: float) -> KernelWork:
    """The optimizer step over the parameters this GPU owns (its shard under ZeRO >= 1)."""
    owned = dense / lay.dp_attention + expert / lay.edp if cfg.zero else dense + expert
    return KernelWork(10.0 * owned, owned * (GRAD_DTYPES[cfg.grad_dtype] + OPTIMIZER_BYTES[cfg.optimizer]),
                      launches=max(1, cfg.model.n_layers // lay.pp))


def _part_times(cfg: DeploymentConfig, crit: list[tuple[StageTime, float]], n_mb: int, opt: KernelWork,
                red_s: float, gather_s: float, grad_exposed_s: float) -> list[PartTime]:
    """Per class over the step on the critical rank: micro-batch work x m plus the step-level work."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def kernels(part: str, works: list[KernelWork], times: list[KernelTime], mult: float) -> None:
        r = rows[part]
        for wk, kt in zip(works, times, strict=True):
            for key, val in (("flops", wk.flops), ("hbm_bytes", wk.hbm_bytes), ("l2_bytes", wk.l2_bytes),
                             ("compute", kt.compute_s), ("hbm", kt.hbm_s), ("onchip", max(kt.l2_s, kt.smem_s)),
                             ("time", kt.time_s), ("exposed", kt.time_s)):
                r[key] += val * mult

    for st, wt in crit:
        for (part, phase), times in st.kernels.items():
            kernels(part, st.work.work[(part, phase)], times, n_mb * wt)
        for c in st.work.comms:
            r, mult = rows[c.part], n_mb * wt * c.count
            r["net_bytes"] += c.net_bytes * mult
            r["messages"] += mult
            r["net"] += c.time_s * mult
            r["time"] += c.time_s * mult
        for part, t in st.exposed_s.items():
            rows[part]["exposed"] += t * n_mb * wt
    opt_t = train_kernel_time(cfg, "optimizer", opt)
    kernels("optimizer", [opt], [opt_t], 1)
    grad_part = "reducescatter" if cfg.zero else "allreduce"
    for part, t, exp in ((grad_part, red_s, grad_exposed_s), ("allgather", gather_s, gather_s)):
        if t:
            for key, val in (("net", t), ("time", t), ("exposed", exp), ("messages", 1)):
                rows[part][key] += val
    out = []
    for name, r in rows.items():
        levels = {"compute": r["compute"], "hbm": r["hbm"], "onchip": r["onchip"], "network": r["net"]}
        out.append(PartTime(name, r["flops"], r["hbm_bytes"], r["l2_bytes"], r["net_bytes"], int(r["messages"]),
                            round(r["compute"] * 1e9), round(r["hbm"] * 1e9), round(r["onchip"] * 1e9),
                            round(r["net"] * 1e9), round(r["time"] * 1e9), round(r["exposed"] * 1e9),
                            max(levels, key=lambda k: levels[k])))
    return out


def training_floor(cfg: DeploymentConfig) -> FloorResult:
    """compute_floor for a training config: per-class parts over one optimizer step on the critical GPU."""
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
        f"training step estimate {format_ns(pred.step_ns)} at {cfg.peaks} peaks (micro-batch "
        f"{format_ns(pred.micro_batch_ns)} x {lay.micro_batches}, bubble {format_ns(pred.bubble_ns)}, exposed "
        f"gradient collectives {format_ns(pred.grad_exposed_ns)}, optimizer {format_ns(pred.optimizer_ns)}); "
        "see `tracekit predict`",
        f"memory per GPU: {pred.memory.verdict()}",
        f"peaks: {cfg.peaks}",
    ]
    return FloorResult(
        config=cfg, parts=parts, resource_ns=resource_ns, t_opt_ns=max(resource_ns.values()),
        t_sum_ns=sum(resource_ns.values()), binding=max(RESOURCES, key=lambda r: resource_ns[r]),
        peak_kind=cfg.peaks, kv_capacity_requests=0, requests_per_gpu=cfg.batch / lay.dp_attention,
        tokens_per_step=cfg.batch * cfg.context_tokens, mfu_peak_flops_per_s=hw.peak_flops_per_s("bf16"),
        hbm_peak_bytes_per_s=hw.hbm_bytes_per_s, notes=notes,
    )
