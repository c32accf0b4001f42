"""Resource times, the two-sided floor [t_opt, t_sum], the binding resource, MFU/MBU and placement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .config import DeploymentConfig, validate
from .decode import RawPart, nvls_efficiency, resource_vector

RESOURCES = ("hbm", "compute", "network")


@dataclass(frozen=True)
class ClassPart:
    """One kernel class per GPU per step: counts, and times (int ns) at the peaks in use."""

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

    @property
    def floor_ns(self) -> int:
        """This class alone: max of its resource times."""
        return max(self.hbm_ns, self.compute_ns, self.net_ns)

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
        }


@dataclass(frozen=True)
class FloorResult:
    """The floor of one config. t_opt = max over resources (perfect overlap); t_sum = their sum (none)."""

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
    notes: list[str] = field(default_factory=list)

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


def _times(raw: RawPart, cfg: DeploymentConfig) -> tuple[float, float, float]:
    """(hbm, compute, network) seconds of one class at the configured peaks."""
    hw = cfg.hardware
    achievable = cfg.peaks == "achievable"
    hbm_bw = hw.hbm_bytes_per_s * (hw.hbm_efficiency if achievable else 1.0)
    eff = hw.compute_efficiency(raw.kernel_flops) if achievable else 1.0
    compute = raw.flops / (hw.peak_flops_per_s(raw.flops_dtype) * eff) if raw.flops else 0.0
    up = hw.scaleup_achievable_bytes_per_s if achievable else hw.scaleup_bytes_per_s
    intra = raw.net_intra_bytes / up + (raw.net_nvls_bytes / (up * nvls_efficiency(cfg)) if raw.net_nvls_bytes else 0.0)
    net = max(intra, raw.net_inter_bytes / hw.scaleout_bytes_per_s)
    if achievable:
        net += raw.net_messages * hw.net_latency_ns * 1e-9
    return raw.hbm_bytes / hbm_bw, compute, net


def compute_floor(cfg: DeploymentConfig) -> FloorResult:
    """Resource vector -> per-class times -> t_opt (max over resources) and t_sum (sum)."""
    validate(cfg)
    if cfg.phase == "training":
        from .training import training_floor

        return training_floor(cfg)
    parts: list[ClassPart] = []
    for raw in resource_vector(cfg):
        hbm_s, comp_s, net_s = _times(raw, cfg)
        parts.append(
            ClassPart(
                name=raw.name,
                hbm_bytes=round(raw.hbm_bytes),
                weight_bytes=round(raw.weight_bytes),
                kv_bytes=round(raw.kv_bytes),
                flops=round(raw.flops),
                flops_dtype=raw.flops_dtype,
                net_bytes=round(raw.net_intra_bytes + raw.net_nvls_bytes + raw.net_inter_bytes),
                net_messages=raw.net_messages,
                hbm_ns=round(hbm_s * 1e9),
                compute_ns=round(comp_s * 1e9),
                net_ns=round(net_s * 1e9),
            )
        )
    resource_ns = {
        "hbm": sum(p.hbm_ns for p in parts),
        "compute": sum(p.compute_ns for p in parts),
        "network": sum(p.net_ns for p in parts),
    }
    binding = max(RESOURCES, key=lambda r: resource_ns[r])
    hw, lay = cfg.hardware, cfg.layout
    q = 1 if cfg.phase == "decode" else cfg.context_tokens
    notes = [
        f"peaks: {cfg.peaks}"
        + (
            f" (HBM x{hw.hbm_efficiency}, size-dependent compute efficiency, NCCL busbw, "
            f"{hw.net_latency_ns / 1000:g} us per collective)"
            if cfg.peaks == "achievable"
            else " (spec-sheet peaks, no latency terms)"
        )
    ]
    return FloorResult(
        config=cfg,
        parts=parts,
        resource_ns=resource_ns,
        t_opt_ns=max(resource_ns.values()),
        t_sum_ns=sum(resource_ns.values()),
        binding=binding,
        peak_kind=cfg.peaks,
        kv_capacity_requests=cfg.kv_capacity_requests,
        requests_per_gpu=lay.requests_per_gpu(cfg.batch),
        tokens_per_step=cfg.batch * q,
        mfu_peak_flops_per_s=hw.peak_flops_per_s(cfg.weight_dtype),
        hbm_peak_bytes_per_s=hw.hbm_bytes_per_s,
        notes=notes,
    )


@dataclass(frozen=True)
class Placement:
    """Where a measured step time falls: position 0 at t_opt, 1 at t_sum, > 1 above."""

    measured_ns: int
    t_opt_ns: int
    t_sum_ns: int
    position: float
    residual_ratio: float
    threshold: float
    verdict: str
    reason: str
    mfu: float
    mbu: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def place_measured(result: FloorResult, measured_ns: int, threshold: float = 1.3) -> Placement:
    """Place a measured step time in [t_opt, t_sum] and say whether kernel tuning can still pay."""
    if measured_ns <= 0:
        raise ValueError(f"measured step time must be > 0 ns, got {measured_ns}")
    t_opt, t_sum = result.t_opt_ns, result.t_sum_ns
    position = (measured_ns - t_opt) / max(t_sum - t_opt, 1)
    residual = measured_ns / t_opt
    verdict = "near-floor" if residual < threshold else "above-floor"
    if measured_ns < t_opt:
        reason = (
            "faster than the floor: config (batch, context, precision, layout) or peaks do not match the run"
        )
    elif verdict == "near-floor":
        reason = (
            f"within {threshold:g}x of t_opt: stop kernel tuning; further gains need an architecture change "
            "(sparse attention, quantization, layout)"
        )
    elif position <= 1:
        reason = (
            f"between t_opt and t_sum: overlap of {result.binding} with the other resources "
            "(scheduling) is the gap"
        )
    else:
        reason = (
            "above t_sum: time goes to costs the floor does not model (host gaps, launch overhead, "
            "stragglers); profile the gaps first"
        )
    return Placement(
        measured_ns=measured_ns,
        t_opt_ns=t_opt,
        t_sum_ns=t_sum,
        position=position,
        residual_ratio=residual,
        threshold=threshold,
        verdict=verdict,
        reason=reason,
        mfu=result.mfu(measured_ns),
        mbu=result.mbu(measured_ns),
    )
