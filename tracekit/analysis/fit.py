"""Does a config describe this capture? Its GPU and operating point, checked against what the trace records.

A verdict compares a measured step with the floor of a config, so the config must describe the capture:
- **Hardware.** The capture's GPU as ``tracekit.analysis.gpu`` identifies it from the store's devices (by name,
  else by vendor, SM/CU count, memory and compute capability). Another GPU or vendor than the config's is a
  reason for ``inconclusive``; a trace with no device information gets the note "hardware not checked"; a
  trace whose device information contradicts itself (an NVIDIA name on a HIP trace, an SM count the named
  GPU does not have) gets a caveat.
- **World size.** the capture's recorded world size against the config's ``n_gpus``.
- **Operating point** (``tracekit.analysis.point``): phase, batch and context from the serving engine's step
  annotations or, for training, from autograd/optimizer ops, else attention input shapes. Training against a
  serving config (or the reverse) is a reason. A serving step the engine's annotation states (prefill, decode
  or mixed) in another phase than a serving config's is taken as it is: the floor models the trace's step
  (phase, batch, context, a mixed step's prefill side) on the config's model, hardware and layout, with a
  note. In the config's own phase, batch and context within ``MISMATCH_FACTOR`` of the config's become the
  floor's operating point, with a note; beyond it they are a reason; ``--batch``/``--context`` override the
  trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from tracekit.analysis.gpu import TraceGpu, identify
from tracekit.analysis.point import OperatingPoint, trace_point
from tracekit.floor import gpu_identities

MISMATCH_FACTOR = 2.0  # trace vs config batch or context beyond this ratio: the config is for another point


def world_size(con: duckdb.DuckDBPyConnection) -> int | None:
    """The job's world size as the trace records it (the capture facts' ``world_size``), else the number of ranks
    tracekit itself read when it read several (an nsys export of torchrun's processes)."""
    row = con.execute("SELECT max(world_size) FROM capture").fetchall()[0]
    if row[0] is not None:
        return row[0]
    ranks = con.execute("SELECT count(DISTINCT rank) FROM kernels").fetchall()[0][0]
    return ranks if ranks > 1 else None


@dataclass
class Fit:
    """The checks of a config against the capture: floor overrides taken from the trace, reasons that make
    the verdict inconclusive, notes on what was checked, caveats on contradictory device information."""

    gpu: TraceGpu
    point: OperatingPoint | None
    world_size: int | None
    overrides: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    def section(self) -> dict[str, Any]:
        """The report's ``fit`` section."""
        g, p = self.gpu, self.point
        return {
            "gpu": {"names": list(g.names), "vendor": g.vendor, "sm_count": g.sm_count,
                    "memory_bytes": g.memory_bytes, "compute": g.compute, "identified_as": g.key,
                    "evidence": g.evidence or None},
            "world_size": self.world_size,
            "operating_point": None if p is None else {"phase": p.phase, "batch": p.batch, "context": p.context,
                                                       "source": p.source, "detail": p.detail or None,
                                                       "prefill_requests": p.prefill_requests,
                                                       "prefill_tokens": p.prefill_tokens},
            "overrides": self.overrides, "reasons": self.reasons, "notes": self.notes,
        }


def _hardware(fit: Fit, hardware_key: str) -> None:
    g = fit.gpu
    want = gpu_identities().get(hardware_key, {})
    if g.contradictions:
        fit.caveats += list(g.contradictions)
        fit.notes.append(f"hardware not checked: the capture's device information contradicts itself ({g.describe()})")
    elif not g.names and g.sm_count is None and g.vendor is None:
        fit.notes.append("hardware not checked: the capture records no device name or properties")
    elif g.vendor and want.get("vendor") and g.vendor != want["vendor"]:
        fit.reasons.append(f"the capture ran on {g.describe()}, an {g.vendor.upper()} GPU, but the config describes "
                           f"{hardware_key} ({want['vendor'].upper()}): use a config for that GPU")
    elif g.key == hardware_key:
        fit.notes.append(f"hardware: {g.describe()} is {hardware_key} (by its {g.evidence}), as the config says")
    elif g.names or g.evidence:
        fit.reasons.append(f"the capture ran on {g.describe()} but the config describes {hardware_key}: use a config "
                           "for that GPU or --set hardware=...")
    elif want.get("sm_count") and g.sm_count and want["sm_count"] != g.sm_count:
        fit.reasons.append(f"the capture ran on {g.describe()} but {hardware_key} has {want['sm_count']} "
                           "SMs/CUs: use a config for that GPU")
    else:
        fit.notes.append(f"hardware not checked: {g.describe()} names no model and its properties identify none")


def _compare(fit: Fit, what: str, field_name: str, traced: int | None, configured: int, scale: int,
             user_set: bool) -> None:
    """Trace vs config for batch or context (``scale``: ranks sharing the config's batch, dp_attention)."""
    if traced is None:
        return
    wanted = traced * scale
    if user_set:
        if max(wanted, configured) > MISMATCH_FACTOR * min(wanted, configured):
            fit.notes.append(f"{what} {configured} was given on the command line; the trace says {wanted}")
        return
    if max(wanted, configured) > MISMATCH_FACTOR * min(wanted, configured):
        fit.reasons.append(f"the trace's {what} is {wanted} but the config's is {configured} (more than "
                           f"{MISMATCH_FACTOR:g}x apart): give --{what.split()[0]} {wanted} or a config for this point")
    elif wanted != configured:
        fit.overrides[field_name] = str(wanted)
        fit.notes.append(f"the floor uses the trace's {what} {wanted} (config: {configured})")


def assess(con: duckdb.DuckDBPyConnection, cfg: Any, user_overrides: dict[str, str]) -> Fit:
    """Check the config ``cfg`` (a floor DeploymentConfig with the user's overrides) against the capture."""
    fit = Fit(identify(con), trace_point(con), world_size(con))
    _hardware(fit, cfg.hardware.key)
    if fit.world_size is None:
        fit.notes.append("world size not checked: the trace does not record it")
    elif fit.world_size == cfg.n_gpus:
        fit.notes.append(f"world size {fit.world_size}, as the config says")
    else:
        fit.reasons.append(f"the capture's world size is {fit.world_size} but the config describes {cfg.n_gpus} "
                           f"GPU{'s' if cfg.n_gpus > 1 else ''}: use a config for this deployment")
    p = fit.point
    if p is None or p.phase is None:
        fit.notes.append("operating point not checked: the trace states no phase, batch or context")
        return fit
    fit.notes.append(f"operating point from the trace ({p.source}): {p.phase}"
                     + (f", batch {p.batch}" if p.batch else "") + (f", context {p.context}" if p.context else "")
                     + (f" [{p.detail}]" if p.detail else ""))
    serving = p.phase != "training" and cfg.phase != "training"
    if p.phase != cfg.phase and serving and p.exact and "phase" not in user_overrides:
        _take_step(fit, p, cfg)
        return fit
    if p.phase != cfg.phase:
        fit.reasons.append(f"the trace is a {p.phase} step but the config describes {cfg.phase}: use a {p.phase} "
                           "config (--set phase=... with its batch and context)")
        return fit
    if cfg.phase != "training":
        _compare(fit, "batch", "batch", p.batch, cfg.batch, cfg.dp_attention, "batch" in user_overrides)
        _compare(fit, "context", "context_tokens", p.context, cfg.context_tokens, 1,
                 "context_tokens" in user_overrides)
    return fit


def _take_step(fit: Fit, p: OperatingPoint, cfg: Any) -> None:
    """The floor of the engine's own step: a prefill, decode or mixed step (the last a decode step carrying
    the prefill chunk) on the config's model, hardware and layout (batch scaled by ``dp_attention``)."""
    scale = cfg.dp_attention
    mixed = p.phase == "mixed"
    take = {"phase": "decode" if mixed else p.phase}
    if p.batch:
        take["batch"] = str(p.batch * scale)
    if p.context:
        take["context_tokens"] = str(p.context)
    if mixed and p.prefill_requests and p.prefill_tokens:
        take |= {"prefill_requests": str(p.prefill_requests * scale), "prefill_tokens": str(p.prefill_tokens * scale)}
    if p.phase == "prefill" and cfg.tokens_per_step != 1.0:
        take["tokens_per_step"] = "1"
    fit.overrides.update(take)
    fit.notes.append(f"the trace's step is a {p.phase} step, the config's {cfg.phase}: the floor models the "
                     f"trace's step ({', '.join(f'{k} {v}' for k, v in take.items())}) on the config's model, "
                     "hardware and layout")
