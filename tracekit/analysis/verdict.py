"""The verdict of an analysis: from the report's computed sections to (verdict, reasons).

The floor's placement (tracekit.floor.place_measured, the stop rule) decides near the floor and below it; above
the floor, the residual goes to the pipeline (host gaps + exposed communication) or to kernel classes over
their budgets. Below the floor is judged against t_opt (physical peaks, the lower bound); near the floor against
the attainable floor (the best measured rates), and the reasons say which floor was used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.analysis.options import AnalyzeOptions
from tracekit.floor import BEATS_CEILING, Placement
from tracekit.schema.verdict import Verdict


@dataclass(frozen=True)
class Evidence:
    """What the verdict reads. blocking: caveats that make any number meaningless (BLOCKING_CAVEATS);
    whole_capture: no step markers were found; floor: the report's floor section (None without --config);
    placement: the step p50 against that floor; fit_reasons: where the config does not describe the capture (another
    GPU, vendor, world size, phase, or batch/context beyond 2x: tracekit.analysis.fit)."""

    blocking: list[str]
    whole_capture: bool
    step_p50: int
    floor: dict[str, Any] | None
    placement: Placement | None
    fit_reasons: list[str]
    host_gaps: dict[str, Any]
    exposed_comm: dict[str, Any]
    classes: list[dict[str, Any]]
    kernel_wait_ns: int = 0  # collective wait for a late rank whose kernels ran long: that rank's kernel time
    wait_reason: str | None = None  # who everyone waited for, and why (tracekit.analysis.crossrank)
    config_name: str | None = None  # the config behind ``floor`` (None: the floor is the op floor, or none)
    no_floor_reason: str | None = None  # why there is no floor without a config (the op floor's coverage)


def _preconditions(ev: Evidence, opts: AnalyzeOptions) -> list[str]:
    """Reasons the capture cannot be judged against the floor (empty when it can)."""
    reasons: list[str] = []
    if ev.whole_capture:
        reasons.append("no step markers (NVTX/annotation regex, ProfilerStep#N, graph launches): the whole capture "
                       "is one window; give --step REGEX")
    if ev.floor is None:
        reasons.append(ev.no_floor_reason or (
            "no --config and no op floor (the trace records no op shapes, or its GPU is not identified): host "
            "gaps and exposed communication are answered, but class budgets and the floor need a config"))
    else:
        reasons += ev.fit_reasons
    return reasons


def ms(ns: int | float) -> str:
    """Nanoseconds for a sentence a person reads: milliseconds with 3 decimals (the JSON keeps the ns)."""
    return f"{ns / 1e6:.3f} ms"


def _floor_name(ev: Evidence) -> str:
    return "op floor" if ev.floor and ev.floor.get("kind") == "op" else "floor"


def decide(ev: Evidence, opts: AnalyzeOptions) -> tuple[Verdict, list[str]]:
    """(verdict, reasons): near-floor, pipeline, kernel or inconclusive, each with the numbers behind it."""
    if ev.blocking:
        return Verdict.INCONCLUSIVE, list(ev.blocking)
    if ev.step_p50 == 0:
        return Verdict.INCONCLUSIVE, ["no GPU operations to analyse"]
    reasons = _preconditions(ev, opts)
    p = ev.placement
    head = "" if p is None or ev.floor is None else (
        f"step p50 {ms(ev.step_p50)} is {p.residual_ratio:.2f}x the {_floor_name(ev)} t_opt {ms(ev.floor['t_opt_ns'])} "
        f"({ev.floor['peak_kind']} peaks)")
    if p is not None and ev.floor is not None and p.floor_used == "attainable":
        head += (f" and {p.attainable_ratio:.2f}x the attainable {_floor_name(ev)} {ms(p.attainable_ns)} "
                 "(best measured rates: the stop rule's floor)")
    if p is not None and p.verdict == "inconclusive":  # below the bound: always a reason, whatever else holds
        cause = (f"the config {ev.config_name} is the likely cause (set --batch, --context, --set weight_dtype=... "
                 "or the hardware to the captured operating point)") if ev.config_name else \
            "an op's recorded shapes overstate its work (docs/op-floor.md)"
        reasons.append(f"{head}: {p.reason}; {cause}")
    if reasons or p is None or ev.floor is None:
        return Verdict.INCONCLUSIVE, reasons or ["no step time to place against the floor"]
    t_opt = ev.floor["t_opt_ns"]
    if p.verdict == "near-floor":
        if _floor_name(ev) == "op floor":
            reasons = [f"{head} (< {opts.threshold}): kernel tuning cannot help these ops; fusion or architecture "
                       "may (see work inflation)"]
        else:
            reasons = [f"{head} (< {opts.threshold}): stop; only architecture changes (sparse attention, "
                       "quantisation, layout) move it"]
        if p.beats_ceiling:
            reasons.append(f"step p50 is under the attainable floor: {BEATS_CEILING}")
        return Verdict.NEAR_FLOOR, reasons
    residual = ev.step_p50 - t_opt
    # Waiting in a collective for a rank whose kernels ran long is that rank's kernel time, not pipeline time.
    pipeline_ns = ev.host_gaps["total_ns"] + ev.exposed_comm["exposed_ns"] - ev.kernel_wait_ns
    reasons = [f"{head}; residual {ms(residual)}",
               f"host gaps {ms(ev.host_gaps['total_ns'])} + exposed communication {ms(ev.exposed_comm['exposed_ns'])} "
               + (f"- wait for slow kernels on the late rank {ms(ev.kernel_wait_ns)} " if ev.kernel_wait_ns else "")
               + f"= {ms(pipeline_ns)} ({pipeline_ns / residual:.0%} of the residual)"]
    if ev.wait_reason:
        reasons.append(ev.wait_reason)
    if pipeline_ns >= opts.pipeline_share * residual:
        return Verdict.PIPELINE, reasons
    over = [c for c in ev.classes if c["over_budget"]]
    if over:
        reasons.append("over budget: " + ", ".join(f"{c['name']} {c['ratio']:.2f}x (+{ms(c['excess_ns'])})"
                                                   for c in over))
        return Verdict.KERNEL, reasons
    reasons.append("no class exceeds its budget by the threshold and the pipeline does not explain the residual")
    return Verdict.INCONCLUSIVE, reasons
