"""Does a config describe this capture? Its GPU and operating point, checked against what the trace records.

A verdict compares a measured step with the floor of a config, so the config must describe the capture:
- **Hardware.** The capture's GPU as ``tracekit.analysis.gpu`` identifies it from the store's devices (by name,
  else by vendor, SM/CU count, memory and compute capability). Another GPU or vendor than the config's is a
  reason for ``inconclusive``; a trace with no device information gets the note "hardware not checked"; a
  trace whose device information contradicts itself (an NVIDIA name on a HIP trace, an SM count the named
  GPU does not have) gets a caveat.
- **World size.** the capture's recorded world size against the config's ``n_gpus``.
- **Operating point.** Phase, batch and context from the serving engine's step annotations (vLLM's
  ``execute_[T_]context_N(...)_generation_M(...)``, SGLang's ``step[DECODE bs=N]``; see ``parse_step_name``)
  or, for training, from autograd/optimizer ops. Another phase is a reason. Batch and context within
  ``MISMATCH_FACTOR`` of the config's become the floor's operating point, with a note; beyond it they are a
  reason; ``--batch``/``--context`` override the trace.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import duckdb

from tracekit.analysis.gpu import TraceGpu, identify
from tracekit.analysis.steps import ENGINE_STEP_REGEX
from tracekit.floor import gpu_identities

MISMATCH_FACTOR = 2.0  # trace vs config batch or context beyond this ratio: the config is for another point
TRAINING_OPS_REGEX = r"^autograd::engine::evaluate_function|^Optimizer\.step#|Backward[0-9]*$"


@dataclass(frozen=True)
class OperatingPoint:
    """Phase, batch (requests on this rank) and context (decode: KV tokens per request; prefill: prompt
    tokens per request) as the trace records them; None where it does not say."""

    phase: str | None
    batch: int | None
    context: int | None
    source: str
    detail: str = ""


_VLLM = re.compile(r"^execute_(?:\d+_)?context_(\d+)\((.*)\)_generation_(\d+)\((.*)\)$")
_SQ_SK = re.compile(r"^sq(\d+)sk(\d+)")  # Σ query tokens, Σ key tokens of the requests on that side
_TOKENS = re.compile(r"^(\d+)(?:_\d+)?$")  # older form: Σ query tokens (and Σ of their squares)
_SGLANG = re.compile(r"^step\[([A-Z_]+)(?: bs=(\d+))?\]$")
_SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill"}


def _side(text: str) -> tuple[int | None, int | None]:
    """(Σ query tokens, Σ key tokens) of one side of a vLLM annotation, None where it does not say."""
    if m := _SQ_SK.match(text):
        return int(m.group(1)), int(m.group(2))
    if m := _TOKENS.match(text):
        return int(m.group(1)), None
    return None, None


def parse_step_name(name: str) -> OperatingPoint | None:
    """The operating point a serving engine's step annotation states. A mixed vLLM step is judged by the
    side with more query tokens (a prefill chunk plus a few decodes is a prefill), and says so."""
    if m := _SGLANG.match(name):
        phase = _SGLANG_PHASE.get(m.group(1))
        return OperatingPoint(phase, int(m.group(2)) if m.group(2) and phase else None, None, "SGLang step annotation")
    if not (m := _VLLM.match(name)):
        return None
    n_ctx, n_gen = int(m.group(1)), int(m.group(3))
    (q_ctx, _), (q_gen, k_gen) = _side(m.group(2)), _side(m.group(4))
    prefill_tokens, decode_tokens = q_ctx or 0, q_gen if q_gen is not None else n_gen
    source = "vLLM step annotation"
    if n_ctx and prefill_tokens >= decode_tokens:
        detail = f"{n_ctx} prefill requests, {q_ctx} tokens" + (f"; plus {n_gen} decode requests" if n_gen else "")
        return OperatingPoint("prefill", n_ctx, round(q_ctx / n_ctx) if q_ctx else None, source, detail)
    if n_gen:
        detail = f"{n_gen} decode requests" + (f", {k_gen} KV tokens" if k_gen else "") + (
            f"; plus {n_ctx} prefill requests" if n_ctx else "")
        return OperatingPoint("decode", n_gen, round(k_gen / n_gen) if k_gen else None, source, detail)
    return None


# Attention ops whose inputs say batch and lengths: (name regex, (batch, query length) axes of q (input 0),
# key-length axis of k (input 1)). SDPA takes [B, H, S, D]; the flash/efficient kernels [B, S, H, D].
ATTENTION_LAYOUTS = ((r"^aten::_?scaled_dot_product", (0, 2), 2),
                     (r"^aten::_(flash|efficient)_attention_forward$|^flash_attn::", (0, 1), 1))


def _shape_point(con: duckdb.DuckDBPyConnection) -> OperatingPoint | None:
    """Batch, query and key length from attention ops' input shapes (the commonest of them): one query
    token is a decode (context = keys), more a prefill (context = queries)."""
    seen: Counter[tuple[int, int, int]] = Counter()
    names: dict[tuple[int, int, int], str] = {}
    for name, dims in con.execute("SELECT name, input_dims FROM op_shapes WHERE input_dims IS NOT NULL").fetchall():
        layout = next(((qa, ka) for regex, qa, ka in ATTENTION_LAYOUTS if re.search(regex, name)), None)
        try:
            q, k = json.loads(dims)[:2]
        except (ValueError, TypeError):
            continue
        if layout is None or len(q) != 4 or len(k) != 4:
            continue
        key = (q[layout[0][0]], q[layout[0][1]], k[layout[1]])
        seen[key] += 1
        names.setdefault(key, name)
    if not seen:
        return None
    (batch, sq, sk), _ = seen.most_common(1)[0]
    source = f"attention input shapes ({names[(batch, sq, sk)]})"
    if sq == 1:
        return OperatingPoint("decode", batch, sk, source, f"q [batch {batch}, 1 token], {sk} keys")
    return OperatingPoint("prefill", batch, sq, source, f"q [batch {batch}, {sq} tokens], {sk} keys")


def trace_point(con: duckdb.DuckDBPyConnection) -> OperatingPoint | None:
    """The capture's operating point: its engine step annotations (the commonest phase; median batch and
    context over the steps that state them), else training when autograd/optimizer ops ran, else the input
    shapes of its attention ops."""
    names = [r[0] for r in con.execute("""
        SELECT name FROM user_ranges WHERE regexp_matches(name, $engine)
    """, {"engine": ENGINE_STEP_REGEX}).fetchall()]
    points = [p for p in map(parse_step_name, names) if p is not None and p.phase]
    if points:
        phase = statistics.mode(p.phase for p in points)
        same = [p for p in points if p.phase == phase]
        batches = [p.batch for p in same if p.batch]
        contexts = [p.context for p in same if p.context]
        detail = next((p.detail for p in same if p.detail), "")
        return OperatingPoint(phase, round(statistics.median(batches)) if batches else None,
                              round(statistics.median(contexts)) if contexts else None,
                              " and ".join(sorted({p.source for p in same}))
                              + f" ({len(same)} annotation{'s' if len(same) > 1 else ''})", detail)
    training = con.execute("""
        SELECT count(*) FROM ranges WHERE kind = 'op' AND regexp_matches(name, $re)
    """, {"re": TRAINING_OPS_REGEX}).fetchall()[0][0]
    return OperatingPoint("training", None, None, "autograd/optimizer ops") if training else _shape_point(con)


def world_size(con: duckdb.DuckDBPyConnection) -> int | None:
    """The job's world size as the trace records it (the capture facts' ``world_size``)."""
    row = con.execute("SELECT max(world_size) FROM capture").fetchall()[0]
    return row[0]


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
                                                       "source": p.source, "detail": p.detail or None},
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
    if p.phase != cfg.phase:
        fit.reasons.append(f"the trace is a {p.phase} step but the config describes {cfg.phase}: use a {p.phase} "
                           "config (--set phase=... with its batch and context)")
        return fit
    if cfg.phase != "training":
        _compare(fit, "batch", "batch", p.batch, cfg.batch, cfg.dp_attention, "batch" in user_overrides)
        _compare(fit, "context", "context_tokens", p.context, cfg.context_tokens, 1,
                 "context_tokens" in user_overrides)
    return fit
