"""Resource times and the two-sided floor [t_opt, t_sum] at physical peaks, the binding resource, and the
calibrated estimate expected_ns beside it.

The floor is a lower bound: HBM at spec-sheet bandwidth, compute at the dense tensor peak of the operand
dtype, links at line rate and one link hop per collective (the latency chain), no efficiency factors. The
calibrated figures (HBM derate, size-dependent compute efficiency, NCCL busbw, 10 us per collective added on
the critical path: data/gpus.toml [derates]) give `expected_ns`, what tuned kernels usually reach: reported for
estimates, never used as the floor.
"""

from __future__ import annotations

from dataclasses import replace

from .ceilings import attainable_s, ceilings_used, compute_resource, scale_to_ceilings
from .config import validate
from .decode import RawPart, nvls_efficiency
from .deployment import DeploymentConfig
from .mixed import step_vector
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
    return raw.hbm_bytes / hbm_bw, compute, net


def chain_ns(raw: RawPart, cfg: DeploymentConfig) -> int:
    """One class's share of the latency chain: each of its collectives is one hop of the slowest link it
    crosses (the NIC once it leaves the NVLink domain), at physical link latency, no software overhead."""
    hw = cfg.hardware
    return round(raw.net_messages * (hw.net_hop_ns if raw.net_inter_bytes else hw.nvlink_hop_ns))


def attainable_times(raw: RawPart, cfg: DeploymentConfig) -> tuple[float, float, float]:
    """(hbm, compute, network) seconds of one class at the attainable ceilings (data/ceilings.toml): the best
    measured rates, what the stop rule compares a step with. Never below the physical times."""
    return attainable_s(cfg.hardware, hbm_bytes=raw.hbm_bytes, flops=raw.flops, flops_dtype=raw.flops_dtype,
                        compute=compute_resource(raw.name), scaleup_bytes=raw.net_intra_bytes,
                        nvls_bytes=raw.net_nvls_bytes, scaleout_bytes=raw.net_inter_bytes)


def _resource_ns(times: list[tuple[float, float, float]]) -> dict[str, int]:
    """Each resource's time summed over classes (each class rounded to int ns first, as the parts are)."""
    return {r: sum(round(t[i] * 1e9) for t in times) for i, r in enumerate(RESOURCES)}


def _expected(cfg: DeploymentConfig) -> tuple[int, dict[str, int]]:
    """The calibrated estimate at cfg.peaks: max over resources, and each class's max (by class name)."""
    achievable = cfg.peaks == "achievable"
    raws = step_vector(cfg, achievable)
    times = [class_times(raw, cfg, achievable) for raw in raws]
    # collective latency is on the critical path (each collective waits on the kernel before it and the next
    # waits on it): added to the step, not overlapped with HBM time; calibrated per collective at achievable
    # peaks, the physical hop at physical ones
    lat = [raw.net_messages * cfg.hardware.net_latency_ns if achievable else chain_ns(raw, cfg) for raw in raws]
    per_class = {raw.name: max(round(t * 1e9) for t in ts) + round(ln)
                 for raw, ts, ln in zip(raws, times, lat, strict=True)}
    return max(_resource_ns(times).values()) + round(sum(lat)), per_class


def compute_floor(cfg: DeploymentConfig) -> FloorResult:
    """Resource vector -> per-class times at physical peaks -> t_opt (max over resources) and t_sum (sum),
    with the calibrated estimate expected_ns."""
    validate(cfg)
    if cfg.phase == "training":
        return _training(cfg)
    parts: list[ClassPart] = []
    expected_ns, expected_by_class = _expected(cfg)
    raws = step_vector(cfg)
    attainable = [attainable_times(raw, cfg) for raw in raws]
    for raw, att in zip(raws, attainable, strict=True):
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
                attainable_ns=max(max(round(t * 1e9) for t in att), chain_ns(raw, cfg)),
                latency_ns=chain_ns(raw, cfg),
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
    chain = sum(p.latency_ns for p in parts)
    return FloorResult(
        config=cfg,
        parts=parts,
        resource_ns=resource_ns,
        t_opt_ns=max(*resource_ns.values(), chain),
        t_sum_ns=sum(resource_ns.values()) + chain,
        binding="latency" if chain > max(resource_ns.values()) else max(RESOURCES, key=lambda r: resource_ns[r]),
        latency_chain_ns=chain,
        peak_kind=FLOOR_PEAK_KIND,
        kv_capacity_requests=cfg.kv_capacity_requests,
        requests_per_gpu=lay.requests_per_gpu(cfg.batch),
        tokens_per_step=cfg.batch * q,
        mfu_peak_flops_per_s=hw.peak_flops_per_s(cfg.weight_dtype),
        hbm_peak_bytes_per_s=hw.hbm_bytes_per_s,
        expected_ns=expected_ns,
        expected_peak_kind=cfg.peaks,
        attainable_resource_ns=_resource_ns(attainable),
        attainable_ceilings=ceilings_used(hw, [use for raw in raws for use in _uses(raw)]),
        tokens_per_request_step=cfg.tokens_per_step if decode else 1.0,
        notes=_notes(cfg),
    )


def _uses(raw: RawPart) -> list[tuple[str, str]]:
    """The (resource, dtype) ceilings one class is timed against."""
    out = [("hbm", "")] if raw.hbm_bytes else []
    if raw.flops:
        out.append((compute_resource(raw.name), raw.flops_dtype))
    if raw.net_intra_bytes:
        out.append(("scaleup", ""))
    if raw.net_nvls_bytes:
        out.append(("nvls", ""))
    if raw.net_inter_bytes:
        out.append(("scaleout", ""))
    return out


def _notes(cfg: DeploymentConfig) -> list[str]:
    hw = cfg.hardware
    notes = ["peaks: physical (spec-sheet HBM bandwidth, dense tensor FLOP/s at the operand dtype, link line "
             "rate, one link hop of latency per collective in the latency chain; no efficiency factors): t_opt, "
             "t_sum and class budgets are lower bounds"]
    if cfg.peaks == "achievable":
        notes.append(f"expected_ns: calibrated peaks (HBM x{hw.hbm_efficiency}, size-dependent compute "
                     f"efficiency, NCCL busbw, {hw.net_latency_ns / 1000:g} us per collective added on the critical "
                     "path), what tuned "
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
    hw, parts, scaled = cfg.hardware, [], {r: 0 for r in RESOURCES}
    for p in floor.parts:
        hbm_ns, compute_ns = scale_to_ceilings(hw, p.name, p.hbm_ns, p.compute_ns, p.flops_dtype)
        scaled["hbm"] += hbm_ns
        scaled["compute"] += compute_ns
        scaled["network"] += p.net_ns  # training collectives stay at line rate (no per-link split here)
        parts.append(replace(p, expected_ns=by_class.get(p.name, 0),
                             attainable_ns=max(hbm_ns, compute_ns, p.net_ns, p.floor_ns)))
    uses = [("hbm", "")] + [("attention" if p.name == "attn_core" else "gemm", p.flops_dtype)
                            for p in floor.parts if p.compute_ns]
    return replace(floor, config=cfg, peak_kind=FLOOR_PEAK_KIND, expected_ns=estimate.t_opt_ns,
                   expected_peak_kind=cfg.peaks, parts=parts, attainable_resource_ns=scaled,
                   attainable_ceilings=ceilings_used(hw, uses))
