"""The `tracekit reconcile` document: each run placed against the floor, with its discipline checks."""

from __future__ import annotations

from typing import Any

import msgspec

from tracekit.report.document import Document, Table, ms_value
from tracekit.schema.reconcile import Reconcile, typed_reconcile


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def reconcile_document(reconcile: dict[str, Any] | Reconcile) -> Document:
    """The v1 document (its dict, converted once, or the typed document) as tables (runs, discipline, goodput)
    with each run's reasons as notes."""
    import polars as pl

    doc = reconcile if isinstance(reconcile, Reconcile) else typed_reconcile(reconcile)
    runs, rules, notes = [], [], []
    for i, e in enumerate(doc.results, 1):
        src, op, fl = e.source, e.operating_point, e.floor
        p50, p99 = e.tpot.p50, e.tpot.p99
        runs.append({
            "run": i, "tool": src.tool, "label": src.label,
            "concurrency": _r(op.concurrency, 1), "from": op.concurrency_source, "batch": op.batch,
            "context": op.context_tokens, "TPOT p50 ms": ms_value(p50 and p50.measured_ns, 3),
            "t_opt ms": ms_value(fl and fl.t_opt_ns, 3), "t_sum ms": ms_value(fl and fl.t_sum_ns, 3),
            "ratio p50": _r(p50 and p50.residual_ratio), "position p50": _r(p50 and p50.position),
            "TPOT p99 ms": ms_value(p99 and p99.measured_ns, 3), "ratio p99": _r(p99 and p99.residual_ratio),
            "verdict": str(e.verdict), "closest wall": e.closest_wall and e.closest_wall.name,
        })
        rules += [{"run": i, "rule": x.rule, "status": x.status, "detail": x.detail} for x in e.discipline]
        notes += [f"run {i} ({src.label}, {src.path}): {reason}" for reason in e.reasons]
    tables = [
        Table("runs against the floor", pl.DataFrame(runs, infer_schema_length=None),
              note="TPOT against the floor at each run's operating point; ratio = TPOT / t_opt, position 0 at "
                   "t_opt and 1 at t_sum"),
        Table("benchmark discipline", pl.DataFrame(rules, infer_schema_length=None)),
    ]
    sw = doc.sweep
    if sw:
        tables.append(Table("measured goodput against the floor", pl.DataFrame([{
            "label": p.label, "batch": p.batch, "TPOT p50 ms": ms_value(p.tpot_ns_p50, 3),
            "tokens/s/GPU": _r(p.tokens_per_s_per_gpu, 1), "floor t_opt ms": ms_value(p.t_opt_ns, 3),
            "floor tokens/s/GPU": _r(p.floor_tokens_per_s_per_gpu, 1),
            "of floor": _r(p.tokens_per_s_per_gpu / p.floor_tokens_per_s_per_gpu
                           if p.floor_tokens_per_s_per_gpu else None),
        } for p in sw.points], infer_schema_length=None)))
        tables.append(Table(f"floor frontier at {sw.context_tokens} tokens", pl.DataFrame([{
            "batch": p.batch, "t_opt ms": ms_value(p.t_opt_ns, 3), "t_sum ms": ms_value(p.t_sum_ns, 3),
            "tokens/s/GPU": _r(p.tokens_per_s_per_gpu, 1), "binding": p.binding,
        } for p in sw.frontier], infer_schema_length=None)))
    data = reconcile if isinstance(reconcile, dict) else msgspec.to_builtins(reconcile)
    return Document(f"tracekit reconcile: {doc.config.name}", tables, notes, data=data)
