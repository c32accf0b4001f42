"""The floor's result types: one kernel class's counts and times, and the floor of one config.

A leaf module: the decode/prefill floor (roofline.py) and the training step (training.py) both build these,
so neither has to import the other's module to return them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .deployment import DeploymentConfig

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
RESOURCES = ("hbm", "compute", "network")
#: The peaks t_opt, t_sum and every class budget use: spec-sheet HBM bandwidth, dense tensor FLOP/s at the
#: operand dtype, link line rate and one physical link hop per collective, with no efficiency factors.
FLOOR_PEAK_KIND = "physical"


@dataclass(frozen=True)
class ClassPart:
    """One kernel class per GPU per step: counts, times (int ns) at physical peaks, and expected_ns, the
    class's time at the calibrated (achievable) peaks: what tuned kernels usually reach, never a bound."""

    name: str
    hbm_bytes: int
    weight_bytes: int
    kv_bytes: int
    flops: int
    flops_dtype: str
    net_bytes: int
    net_messages: int
    hbm_ns: int
    compute_ns: int
    net_ns: int
    expected_ns: int = 0
    attainable_ns: int = 0  # this class at the attainable ceilings (data/ceilings.toml); >= floor_ns
    latency_ns: int = 0  # its collectives' share of the latency chain: one link hop each, physical

    @property
    def floor_ns(self) -> int:
        """This class alone: max of its resource times and its collectives' link latency (its lower bound, the
        class budget)."""
        return max(self.hbm_ns, self.compute_ns, self.net_ns, self.latency_ns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "hbm_bytes": self.hbm_bytes,
            "weight_bytes": self.weight_bytes,
            "kv_bytes": self.kv_bytes,
            "flops": self.flops,
            "flops_dtype": self.flops_dtype,
            "net_bytes": self.net_bytes,
            "net_messages": self.net_messages,
            "hbm_ns": self.hbm_ns,
            "compute_ns": self.compute_ns,
            "net_ns": self.net_ns,
            "floor_ns": self.floor_ns,
            "expected_ns": self.expected_ns,
            "attainable_ns": self.attainable_ns,
            "latency_ns": self.latency_ns,
        }


@dataclass(frozen=True)
class FloorResult:
    """The floor of one config. t_opt = max over resources and the latency chain (perfect overlap); t_sum =
    their sum (none); both at physical peaks; binding = the resource (or `latency`) that sets t_opt.
    expected_ns: the calibrated estimate at `expected_peak_kind` peaks (not a bound)."""

    config: DeploymentConfig
    parts: list[ClassPart]
    resource_ns: dict[str, int]
    t_opt_ns: int
    t_sum_ns: int
    binding: str
    peak_kind: str
    kv_capacity_requests: int
    requests_per_gpu: float
    tokens_per_step: float
    mfu_peak_flops_per_s: float
    hbm_peak_bytes_per_s: float
    expected_ns: int = 0
    expected_peak_kind: str = ""
    tokens_per_request_step: float = 1.0
    notes: list[str] = field(default_factory=list)
    #: the chain of dependent collectives at physical link latency (one hop each): t_opt >= it
    latency_chain_ns: int = 0
    #: each resource's time at the attainable ceilings (best measured rates, data/ceilings.toml)
    attainable_resource_ns: dict[str, int] = field(default_factory=dict)
    #: the measured ceilings those times used (floor.ceilings.Ceiling.to_dict), for the report
    attainable_ceilings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def attainable_ns(self) -> int:
        """The attainable floor: the step at the best measured rates, never below t_opt. The stop rule
        compares a measurement with it; t_opt stays the lower bound."""
        return max(self.t_opt_ns, *self.attainable_resource_ns.values()) if self.attainable_resource_ns \
            else self.t_opt_ns

    @property
    def floor_used(self) -> str:
        """Which floor the stop rule uses: `attainable` where a measured ceiling raises it above t_opt,
        `physical` where no ceiling is measured for what binds (the attainable floor is t_opt)."""
        return "attainable" if self.attainable_ns > self.t_opt_ns else "physical"

    def total(self, attr: str) -> int:
        """Sum of one ClassPart field over classes (e.g. 'hbm_bytes')."""
        return sum(getattr(p, attr) for p in self.parts)

    @property
    def i_work_flops_per_byte(self) -> float:
        """Arithmetic intensity of the step: FLOPs / HBM bytes."""
        return self.total("flops") / max(self.total("hbm_bytes"), 1)

    @property
    def i_ridge_flops_per_byte(self) -> float:
        """Ridge point of the physical peaks used for MFU/MBU."""
        return self.mfu_peak_flops_per_s / self.hbm_peak_bytes_per_s

    def mfu(self, t_ns: int | None = None) -> float:
        """Model FLOPs utilisation at step time t (default t_opt), against the physical peak."""
        t = t_ns or self.t_opt_ns
        return self.total("flops") / (t * 1e-9 * self.mfu_peak_flops_per_s)

    def mbu(self, t_ns: int | None = None) -> float:
        """Memory bandwidth utilisation at step time t (default t_opt), against physical HBM bandwidth.
        MFU / MBU = I_work / I_ridge for any t."""
        t = t_ns or self.t_opt_ns
        return self.total("hbm_bytes") / (t * 1e-9 * self.hbm_peak_bytes_per_s)

    def tokens_per_s_per_gpu(self, t_ns: int | None = None) -> float:
        """Output (decode) or prompt (prefill) tokens per second per GPU at step time t (default t_opt)."""
        t = t_ns or self.t_opt_ns
        return self.tokens_per_step / (t * 1e-9) / self.config.n_gpus

    def per_token_ns(self, step_ns: int) -> int:
        """A step time as the time per output token of one request (TPOT): step / tokens per request-step
        (1 without MTP or speculative decoding)."""
        return round(step_ns / self.tokens_per_request_step)

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "config": {"name": cfg.name, **cfg.settings()},
            "peak_kind": self.peak_kind,
            "requests_per_gpu": self.requests_per_gpu,
            "tokens_per_step": self.tokens_per_step,
            "kv_capacity_requests": self.kv_capacity_requests,
            # training configs: per-stage weights are in `tracekit predict`'s memory table (no inference layout)
            "weight_bytes_per_gpu": int(cfg.weight_bytes_per_gpu) if cfg.phase != "training" else None,
            "parts": [p.to_dict() for p in self.parts],
            "resource_ns": dict(self.resource_ns),
            "t_opt_ns": self.t_opt_ns,
            "t_sum_ns": self.t_sum_ns,
            "binding": self.binding,
            "latency_chain_ns": self.latency_chain_ns,
            "expected_ns": self.expected_ns,
            "expected_peak_kind": self.expected_peak_kind,
            "attainable_ns": self.attainable_ns,
            "attainable_resource_ns": dict(self.attainable_resource_ns),
            "attainable_ceilings": list(self.attainable_ceilings),
            "stop_rule_floor": self.floor_used,
            "hbm_bytes": self.total("hbm_bytes"),
            "flops": self.total("flops"),
            "net_bytes": self.total("net_bytes"),
            "mfu_at_t_opt": self.mfu(),
            "mbu_at_t_opt": self.mbu(),
            "mfu_peak_flops_per_s": self.mfu_peak_flops_per_s,
            "hbm_peak_bytes_per_s": self.hbm_peak_bytes_per_s,
            "i_work_flops_per_byte": self.i_work_flops_per_byte,
            "i_ridge_flops_per_byte": self.i_ridge_flops_per_byte,
            "tokens_per_s_per_gpu_at_t_opt": self.tokens_per_s_per_gpu(),
            "notes": list(self.notes),
        }
