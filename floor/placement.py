"""The stop rule: where a measured step (or TPOT) falls against the floor, and what that means.

The one placement `tracekit floor --measured`, `tracekit analyze` and `tracekit reconcile` all use. t_opt is a
lower bound at physical peaks, so a measurement under it (beyond BELOW_FLOOR_TOLERANCE) is not fast: it is
impossible, and the config or the capture is wrong (verdict `inconclusive`). The stop rule itself compares the
measurement with the attainable floor (FloorResult.attainable_ns: the same counts at the best measured rates,
floor/ceilings.py), since no kernel reaches spec-sheet peaks: under NEAR_FLOOR_THRESHOLD x the attainable
floor the verdict is `near-floor` (stop tuning kernels; a measurement under the attainable floor beats the
best known rate, and the ceiling should be raised). Above it, `above-floor`: the residual is worth explaining
(the analysis then says whether the pipeline or a kernel class holds it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .ceilings import attainable_s
from .hardware import GpuSpec
from .result import FloorResult

#: residual ratio (measured / t_opt) under which a step is near the floor; also the over-budget ratio.
NEAR_FLOOR_THRESHOLD = 1.3
#: a measurement under this fraction of t_opt is faster than physically possible: the config (batch, context,
#: precision, layout, hardware) or the capture does not describe the run. The slack absorbs spec-sheet
#: rounding (H20 FP8 296 vs 294 TFLOP/s) and clock variation.
BELOW_FLOOR_TOLERANCE = 0.95


@dataclass(frozen=True)
class Placement:
    """Where a measured time falls: position 0 at t_opt, 1 at t_sum, > 1 above (per output token when
    placed per_token)."""

    measured_ns: int
    t_opt_ns: int
    t_sum_ns: int
    position: float
    residual_ratio: float
    threshold: float
    verdict: str  # near-floor, above-floor, or inconclusive (below the floor)
    reason: str
    mfu: float
    mbu: float
    attainable_ns: int = 0  # the attainable floor (per token when placed per_token)
    attainable_ratio: float = 0.0  # measured / attainable_ns: what the threshold is applied to
    floor_used: str = "physical"  # the floor the stop rule compared with: attainable or physical
    beats_ceiling: bool = False  # faster than the attainable floor (but not below t_opt): update the ceiling

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: what a measurement under the attainable floor is told (it still reads near-floor)
BEATS_CEILING = "faster than the best known rate: update the ceiling (floor/data/ceilings.toml)"


def _reason(verdict: str, residual: float, position: float, threshold: float, binding: str, floor_used: str,
            beats: bool) -> str:
    if verdict == "inconclusive":
        return (f"{residual:.2f}x t_opt: faster than the physical lower bound, so the config (batch, context, "
                "precision, layout, hardware) or the capture does not describe the run; fix it before concluding")
    if verdict == "near-floor":
        floor = "the attainable floor (best measured rates)" if floor_used == "attainable" else "t_opt"
        return (BEATS_CEILING + "; " if beats else "") + (
            f"within {threshold:g}x of {floor}: stop kernel tuning; further gains need an architecture change "
            "(sparse attention, quantization, layout)")
    if position <= 1:
        return f"between t_opt and t_sum: overlap of {binding} with the other resources (scheduling) is the gap"
    return ("above t_sum: time goes to costs the floor does not model (host gaps, launch overhead, stragglers); "
            "profile the gaps first")


def _place(measured_ns: int, t_opt: int, t_sum: int, attainable: int, threshold: float, binding: str,
           mfu: float, mbu: float) -> Placement:
    """The stop rule on given floors: below 0.95 t_opt inconclusive; under threshold x the attainable floor
    near-floor (a measurement under the attainable floor beats the best known rate); else above-floor."""
    if measured_ns <= 0:
        raise ValueError(f"measured time must be > 0 ns, got {measured_ns}")
    position = (measured_ns - t_opt) / max(t_sum - t_opt, 1)
    residual = measured_ns / t_opt
    attainable_ratio = measured_ns / max(attainable, 1)
    floor_used = "attainable" if attainable > t_opt else "physical"
    beats = False
    if residual < BELOW_FLOOR_TOLERANCE:
        verdict = "inconclusive"
    else:
        verdict = "near-floor" if attainable_ratio < threshold else "above-floor"
        beats = measured_ns < attainable
    return Placement(
        measured_ns=measured_ns, t_opt_ns=t_opt, t_sum_ns=t_sum, position=position, residual_ratio=residual,
        threshold=threshold, verdict=verdict,
        reason=_reason(verdict, residual, position, threshold, binding, floor_used, beats),
        mfu=mfu, mbu=mbu, attainable_ns=attainable, attainable_ratio=attainable_ratio, floor_used=floor_used,
        beats_ceiling=beats)


def place_measured(result: FloorResult, measured_ns: int, threshold: float = NEAR_FLOOR_THRESHOLD,
                   per_token: bool = False) -> Placement:
    """Place a measured step time in [t_opt, t_sum] and apply the stop rule. per_token: `measured_ns` is a
    time per output token (TPOT), placed against the floor per token (step / tokens_per_step)."""
    if measured_ns <= 0:
        raise ValueError(f"measured time must be > 0 ns, got {measured_ns}")
    t_opt, t_sum, attainable = result.t_opt_ns, result.t_sum_ns, result.attainable_ns
    if per_token:
        t_opt, t_sum, attainable = (result.per_token_ns(t) for t in (t_opt, t_sum, attainable))
    step_ns = round(measured_ns * result.tokens_per_request_step if per_token else measured_ns)
    return _place(measured_ns, t_opt, t_sum, attainable, threshold, result.binding, result.mfu(step_ns),
                  result.mbu(step_ns))


def place_kernel(gpu: GpuSpec, measured_ns: int, *, flops: float, hbm_bytes: float, flops_dtype: str = "bf16",
                 compute: str = "gemm", shape: str = "", threshold: float = NEAR_FLOOR_THRESHOLD) -> Placement:
    """The stop rule for one kernel (a GEMM, an attention kernel, a copy) of known FLOPs and HBM bytes: its
    roofline at physical peaks (t_opt, t_sum) and at the attainable ceilings, as per-op floors from trace
    shapes need it. mfu / mbu are against the physical peaks."""
    peak, bw = gpu.peak_flops_per_s(flops_dtype), gpu.hbm_bytes_per_s
    comp_ns, hbm_ns = round(flops / peak * 1e9), round(hbm_bytes / bw * 1e9)
    att = attainable_s(gpu, hbm_bytes=hbm_bytes, flops=flops, flops_dtype=flops_dtype, compute=compute,
                       shape=shape)
    t_opt = max(comp_ns, hbm_ns, 1)
    attainable = max(t_opt, max(round(t * 1e9) for t in att))
    binding = "compute" if comp_ns >= hbm_ns else "hbm"
    t = measured_ns * 1e-9
    return _place(measured_ns, t_opt, comp_ns + hbm_ns, attainable, threshold, binding, flops / (t * peak),
                  hbm_bytes / (t * bw))


def place_bound(measured_ns: int, t_opt_ns: int, t_sum_ns: int, threshold: float = NEAR_FLOOR_THRESHOLD,
                binding: str = "", attainable_ns: int = 0) -> Placement:
    """The stop rule for any lower bound ``t_opt_ns`` at physical peaks with its attainable counterpart (the op
    floor of the kernels that ran, ``t_sum_ns`` the sum of its parts): the same rule as ``place_measured``; MFU and
    MBU are not defined (nan)."""
    if t_opt_ns <= 0:
        raise ValueError(f"the bound must be > 0 ns, got {t_opt_ns}")
    return _place(measured_ns, t_opt_ns, t_sum_ns, max(attainable_ns, t_opt_ns), threshold, binding, float("nan"),
                  float("nan"))
