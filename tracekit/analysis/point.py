"""The operating point a capture states: phase, batch and context (and a mixed step's prefill side), from a
serving engine's step annotations, training ops, or attention ops' input shapes.

Engine annotations (``parse_step_name``): vLLM's ``execute_[T_]context_N(...)_generation_M(...)`` (also written
under SGLang) and SGLang's ``step[DECODE bs=N]`` / ``step[EXTEND bs=N toks=T]``. A step with N prefill
requests and M decode requests is a **mixed** step (chunked prefill, the engines' default): batch and context
are its decode side's, ``prefill_requests``/``prefill_tokens`` its prefill side's, and the floor models it as
one step (``tracekit.floor.mixed``). The engine is named by ``steps.engine_names``, not by the annotation's form.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass

import duckdb

from tracekit.analysis.attribution import has_attribution
from tracekit.analysis.model_shape import infer_shape
from tracekit.analysis.steps import ENGINE_STEP_REGEX, engine_names

TRAINING_OPS_REGEX = r"^autograd::engine::evaluate_function|^Optimizer\.step#|Backward[0-9]*$"


@dataclass(frozen=True)
class OperatingPoint:
    """Phase ('decode', 'prefill', 'mixed', 'training'), batch (requests on this rank: a mixed step's decode
    requests) and context (decode and mixed: KV tokens per decode request; prefill: prompt tokens per request)
    as the trace records them, None where it does not say; a mixed step's prefill side in ``prefill_requests``
    and ``prefill_tokens``. ``exact``: stated by the engine that ran the step (its annotation), not inferred."""

    phase: str | None
    batch: int | None
    context: int | None
    source: str
    detail: str = ""
    prefill_requests: int | None = None
    prefill_tokens: int | None = None
    exact: bool = False


_VLLM = re.compile(r"^execute_(?:\d+_)?context_(\d+)\((.*)\)_generation_(\d+)\((.*)\)$")
_SQ_SK = re.compile(r"^sq(\d+)sk(\d+)")  # Σ query tokens, Σ key tokens of the requests on that side
_TOKENS = re.compile(r"^(\d+)(?:_\d+)?$")  # older form: Σ query tokens (and Σ of their squares)
_SGLANG = re.compile(r"^step\[([A-Z_]+)((?: [a-z_]+=\d+)*)\]$")
_SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill"}


def _side(text: str) -> tuple[int | None, int | None]:
    """(Σ query tokens, Σ key tokens) of one side of a vLLM annotation, None where it does not say."""
    if m := _SQ_SK.match(text):
        return int(m.group(1)), int(m.group(2))
    if m := _TOKENS.match(text):
        return int(m.group(1)), None
    return None, None


def _sglang(m: re.Match[str]) -> OperatingPoint | None:
    phase = _SGLANG_PHASE.get(m.group(1))
    fields = dict(f.split("=") for f in m.group(2).split())
    bs, toks = int(fields.get("bs", 0)) or None, int(fields.get("toks", 0)) or None
    if phase is None:
        return OperatingPoint(None, None, None, "SGLang")
    if phase == "prefill" and bs and toks:
        return OperatingPoint(phase, bs, round(toks / bs), "SGLang", f"{bs} prefill requests, {toks} tokens",
                              bs, toks, exact=True)
    return OperatingPoint(phase, bs, None, "SGLang", f"{bs} {phase} requests" if bs else "", exact=True)


def parse_step_name(name: str) -> OperatingPoint | None:
    """The operating point a serving engine's step annotation states (its ``source`` names the annotation's
    form; ``trace_point`` names the engine)."""
    if m := _SGLANG.match(name):
        return _sglang(m)
    if not (m := _VLLM.match(name)):
        return None
    n_ctx, n_gen = int(m.group(1)), int(m.group(3))
    (q_ctx, _), (_, k_gen) = _side(m.group(2)), _side(m.group(4))
    source = "vLLM"
    decode_ctx = round(k_gen / n_gen) if k_gen and n_gen else None
    if n_ctx and n_gen and q_ctx:
        detail = (f"{n_ctx} prefill requests, {q_ctx} tokens; plus {n_gen} decode requests"
                  + (f", {k_gen} KV tokens" if k_gen else ""))
        return OperatingPoint("mixed", n_gen, decode_ctx, source, detail, n_ctx, q_ctx, exact=True)
    if n_ctx:
        detail = f"{n_ctx} prefill requests" + (f", {q_ctx} tokens" if q_ctx else "") + (
            f"; plus {n_gen} decode requests" if n_gen else "")
        return OperatingPoint("prefill", n_ctx, round(q_ctx / n_ctx) if q_ctx else None, source, detail,
                              n_ctx, q_ctx, exact=True)
    if n_gen:
        detail = f"{n_gen} decode requests" + (f", {k_gen} KV tokens" if k_gen else "")
        return OperatingPoint("decode", n_gen, decode_ctx, source, detail, exact=True)
    return None


# Attention ops whose inputs say batch and lengths: (name regex, (batch, query length) axes of q (input 0),
# key-length axis of k (input 1)). SDPA takes [B, H, S, D]; the flash/efficient kernels [B, S, H, D].
ATTENTION_LAYOUTS = ((r"^aten::_?scaled_dot_product", (0, 2), 2),
                     (r"^aten::_(flash|efficient)_attention_forward$|^flash_attn::", (0, 1), 1))


#: the attention with shapes must hold this share of the attention kernels' time to give the operating point
DOMINANT_ATTENTION_SHARE = 0.5


def _dominant_point(con: duckdb.DuckDBPyConnection) -> OperatingPoint | None | bool:
    """The point from the attention with most GPU time (``tracekit.analysis.model_shape``), naming the part of
    the model it ran in; False when the attention that dominates records no shapes (the point is not read
    from a minor part); None when the analysis has not attributed kernels or no attention op ran kernels (then
    the commonest recorded shape is used)."""
    if not has_attribution(con):
        return None
    a = infer_shape(con).attention
    if a is None:  # no attention op ran kernels: the commonest recorded shape
        return None
    share = a.get("share_of_attn_core")
    if share is not None and share < DOMINANT_ATTENTION_SHARE:
        return False
    part = f" in {a['part']}" if a.get("part") else ""
    source = f"attention input shapes ({a['op']}{part}, {share:.0%} of the attention time)" if share is not None \
        else f"attention input shapes ({a['op']}{part})"
    b, sq, sk = a["batch"], a["query_len"], a["key_len"]
    if sq == 1:
        return OperatingPoint("decode", b, sk, source, f"q [batch {b}, 1 token], {sk} keys")
    return OperatingPoint("prefill", b, sq, source, f"q [batch {b}, {sq} tokens], {sk} keys")


def _shape_point(con: duckdb.DuckDBPyConnection) -> OperatingPoint | None:
    """Batch, query and key length from attention ops' input shapes: those of the attention with most GPU time
    (``_dominant_point``), else the commonest: one query token is a decode (context = keys), more a prefill
    (context = queries)."""
    dominant = _dominant_point(con)
    if dominant is not None:
        return dominant or None
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


def _median(values: list[int | None]) -> int | None:
    known = [v for v in values if v]
    return round(statistics.median(known)) if known else None


def trace_point(con: duckdb.DuckDBPyConnection) -> OperatingPoint | None:
    """The capture's operating point: its engine step annotations (the commonest phase; median batch, context
    and prefill side over the annotations that state them), else training when autograd/optimizer ops ran,
    else the input shapes of its attention ops."""
    names = [r[0] for r in con.execute("""
        SELECT name FROM user_ranges WHERE regexp_matches(name, $engine)
    """, {"engine": ENGINE_STEP_REGEX}).fetchall()]
    points = [p for p in map(parse_step_name, names) if p is not None and p.phase]
    if points:
        phase = statistics.mode(p.phase for p in points)
        same = [p for p in points if p.phase == phase]
        detail = next((p.detail for p in same if p.detail), "")
        source = (f"{'/'.join(engine_names(con, names))} step annotation"
                  f" ({len(same)} annotation{'s' if len(same) > 1 else ''})")
        return OperatingPoint(phase, _median([p.batch for p in same]), _median([p.context for p in same]), source,
                              detail, _median([p.prefill_requests for p in same]),
                              _median([p.prefill_tokens for p in same]), exact=True)
    training = con.execute("""
        SELECT count(*) FROM ranges WHERE kind = 'op' AND regexp_matches(name, $re)
    """, {"re": TRAINING_OPS_REGEX}).fetchall()[0][0]
    return OperatingPoint("training", None, None, "autograd/optimizer ops") if training else _shape_point(con)
