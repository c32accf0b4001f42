"""Resource times and the two-sided floor [t_opt, t_sum] at physical peaks, the binding resource, and the
calibrated estimate expected_ns beside it.

The floor is a lower bound: HBM at spec-sheet bandwidth, compute at the dense tensor peak of the operand
dtype, links at line rate, with no latency terms and no efficiency factors. The calibrated figures (HBM
derate, size-dependent compute efficiency, NCCL busbw, 10 us per collective: data/gpus.toml [derates]) give
`expected_ns`, what tuned kernels usually reach: reported for estimates, never used as the floor.
"""

from __future__ import annotations

from dataclasses import replace

from .config import validate
from .decode import RawPart, nvls_efficiency, resource_vector
from .deployment import DeploymentConfig
from .result import FLOOR_PEAK_KIND, RESOURCES, ClassPart, FloorResult
from .training import training_floor


def class_times(raw: RawPart, cfg: DeploymentConfig, achievable: bool) -> tuple[float, float, float]:
    """(hbm, compute, network) seconds of one class at physical or calibrated (achievable) peaks."""
    hw = cfg.hardware
    hbm_bw = hw.hbm_bytes_per_s * (hw.hbm_efficiency if achievable else 1.0)
    eff = hw.compute_efficiency(raw.kernel_flops) if achievable else 1.0
    compute = raw.flops / (hw.peak_flops_per_s(raw.flops_dtype) * eff) if raw.flops else 0.0
    up = hw.scaleup_achievable_bytes_per_s if achievable else hw.scaleup_bytes_per_s
    nvls = raw.net_nvls_bytes / (up * nvls_efficiency(cfg, achievable)) if raw.net_nvls_bytes else 0.0
    net = max(raw.net_intra_bytes / up + nvls, raw.net_inter_bytes / hw.scaleout_bytes_per_s)
    if achievable:
        net += raw.net_messages * hw.net_latency_ns * 1e-9
    return raw.hbm_bytes / hbm_bw, compute, net


def _resource_ns(times: list[tuple[float, float, float]]) -> dict[str, int]:
    """Each resource's time summed over classes (each class rounded to int ns first, as the parts are)."""
    return {r: sum(round(t[i] * 1e9) for t in times) for i, r in enumerate(RESOURCES)}


def _expected(cfg: DeploymentConfig) -> tuple[int, dict[str, int]]:
    """The calibrated estimate at cfg.peaks: max over resources, and each class's max (by class name)."""
    achievable = cfg.peaks == "achievable"
    raws = resource_vector(cfg, achievable)
    times = [class_times(raw, cfg, achievable) for raw in raws]
    per_class = {raw.name: max(round(t * 1e9) for t in ts) for raw, ts in zip(raws, times, strict=True)}
    return max(_resource_ns(times).values()), per_class


def compute_floor(cfg: DeploymentConfig) -> FloorResult:
    """Resource vector -> per-class times at physical peaks -> t_opt (max over resources) and t_sum (sum),
    with the calibrated estimate expected_ns."""
    validate(cfg)
    if cfg.phase == "training":
        return _training(cfg)
    parts: list[ClassPart] = []
    expected_ns, expected_by_class = _expected(cfg)
    for raw in resource_vector(cfg):
        hbm_s, comp_s, net_s = class_times(raw, cfg, achievable=False)
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
                expected_ns=expected_by_class.get(raw.name, 0),
            )
        )
    resource_ns = {
        "hbm": sum(p.hbm_ns for p in parts),
        "compute": sum(p.compute_ns for p in parts),
        "network": sum(p.net_ns for p in parts),
    }
    hw, lay = cfg.hardware, cfg.layout
    decode = cfg.phase == "decode"
    q = cfg.tokens_per_step if decode else cfg.context_tokens
    return FloorResult(
        config=cfg,
        parts=parts,
        resource_ns=resource_ns,
        t_opt_ns=max(resource_ns.values()),
        t_sum_ns=sum(resource_ns.values()),
        binding=max(RESOURCES, key=lambda r: resource_ns[r]),
        peak_kind=FLOOR_PEAK_KIND,
        kv_capacity_requests=cfg.kv_capacity_requests,
        requests_per_gpu=lay.requests_per_gpu(cfg.batch),
        tokens_per_step=cfg.batch * q,
        mfu_peak_flops_per_s=hw.peak_flops_per_s(cfg.weight_dtype),
        hbm_peak_bytes_per_s=hw.hbm_bytes_per_s,
        expected_ns=expected_ns,
        expected_peak_kind=cfg.peaks,
        tokens_per_request_step=cfg.tokens_per_step if decode else 1.0,
        notes=_notes(cfg),
    )


def _notes(cfg: DeploymentConfig) -> list[str]:
    hw = cfg.hardware
    notes = ["peaks: physical (spec-sheet HBM bandwidth, dense tensor FLOP/s at the operand dtype, link line "
             "rate; no latency terms, no efficiency factors): t_opt, t_sum and class budgets are lower bounds"]
    if cfg.peaks == "achievable":
        notes.append(f"expected_ns: calibrated peaks (HBM x{hw.hbm_efficiency}, size-dependent compute "
                     f"efficiency, NCCL busbw, {hw.net_latency_ns / 1000:g} us per collective), what tuned "
                     "kernels usually reach; an estimate, not a bound")
    if cfg.phase == "decode" and cfg.tokens_per_step != 1.0:
        notes.append(f"tokens_per_step {cfg.tokens_per_step:g}: each request gains that many tokens per step "
                     "(MTP / speculative decoding); TPOT = step time / tokens_per_step")
    return notes


def _training(cfg: DeploymentConfig) -> FloorResult:
    """A training step: the floor at physical peaks, the calibrated step beside it as expected_ns."""
    floor = training_floor(replace(cfg, peaks=FLOOR_PEAK_KIND))
    estimate = training_floor(cfg)
    by_class = {p.name: p.floor_ns for p in estimate.parts}
    return replace(floor, config=cfg, peak_kind=FLOOR_PEAK_KIND, expected_ns=estimate.t_opt_ns,
                   expected_peak_kind=cfg.peaks,
                   parts=[replace(p, expected_ns=by_class.get(p.name, 0)) for p in floor.parts])
