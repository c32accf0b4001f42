"""The stop rule: where a measured step (or TPOT) falls against the floor, and what that means.

The one placement `tracekit floor --measured`, `tracekit analyze` and `tracekit reconcile` all use. t_opt is a
lower bound at physical peaks, so a measurement under it (beyond BELOW_FLOOR_TOLERANCE) is not fast: it is
impossible, and the config or the capture is wrong (verdict `inconclusive`). Under NEAR_FLOOR_THRESHOLD x
t_opt the verdict is `near-floor`: stop tuning kernels. Above it, `above-floor`: the residual is worth
explaining (the analysis then says whether the pipeline or a kernel class holds it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _reason(verdict: str, residual: float, position: float, threshold: float, binding: str) -> str:
    if verdict == "inconclusive":
        return (f"{residual:.2f}x t_opt: faster than the physical lower bound, so the config (batch, context, "
                "precision, layout, hardware) or the capture does not describe the run; fix it before concluding")
    if verdict == "near-floor":
        return (f"within {threshold:g}x of t_opt: stop kernel tuning; further gains need an architecture change "
                "(sparse attention, quantization, layout)")
    if position <= 1:
        return f"between t_opt and t_sum: overlap of {binding} with the other resources (scheduling) is the gap"
    return ("above t_sum: time goes to costs the floor does not model (host gaps, launch overhead, stragglers); "
            "profile the gaps first")


def place_measured(result: FloorResult, measured_ns: int, threshold: float = NEAR_FLOOR_THRESHOLD,
                   per_token: bool = False) -> Placement:
    """Place a measured step time in [t_opt, t_sum] and apply the stop rule. per_token: `measured_ns` is a
    time per output token (TPOT), placed against the floor per token (step / tokens_per_step)."""
    if measured_ns <= 0:
        raise ValueError(f"measured time must be > 0 ns, got {measured_ns}")
    t_opt, t_sum = result.t_opt_ns, result.t_sum_ns
    if per_token:
        t_opt, t_sum = result.per_token_ns(t_opt), result.per_token_ns(t_sum)
    step_ns = measured_ns * result.tokens_per_request_step if per_token else measured_ns
    position = (measured_ns - t_opt) / max(t_sum - t_opt, 1)
    residual = measured_ns / t_opt
    if residual < BELOW_FLOOR_TOLERANCE:
        verdict = "inconclusive"
    else:
        verdict = "near-floor" if residual < threshold else "above-floor"
    return Placement(
        measured_ns=measured_ns,
        t_opt_ns=t_opt,
        t_sum_ns=t_sum,
        position=position,
        residual_ratio=residual,
        threshold=threshold,
        verdict=verdict,
        reason=_reason(verdict, residual, position, threshold, result.binding),
        mfu=result.mfu(round(step_ns)),
        mbu=result.mbu(round(step_ns)),
    )
