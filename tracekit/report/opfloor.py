"""The op floor, work inflation, per-layer and model-shape parts of the analysis report as tables."""

from __future__ import annotations

import polars as pl

from tracekit.report.document import Table, ms_value, pct_value
from tracekit.schema.report import Layers, ModelShape, Report


def _ratio(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def op_floor_tables(report: Report) -> tuple[list[Table], list[str]]:
    """Tables and notes of the ``op_floor``, ``work_inflation``, ``layers`` and ``model_shape`` sections."""
    tables: list[Table] = []
    notes: list[str] = []
    shape = report.model_shape
    if shape and any(v is not None for v in (shape.hidden, shape.heads, shape.layers)):
        notes.append("model shape from the trace: " + shape_text(shape))
    op = report.op_floor
    if not op:
        return tables, notes
    rows = [("op floor t_opt (largest of the three below)", ms_value(op.t_opt_ns)),
            ("busiest stream: sum of its ops' floors", ms_value(op.stream_ns)),
            ("all FLOPs at the tensor peak", ms_value(op.compute_ns)),
            ("all bytes at the HBM bandwidth", ms_value(op.memory_ns)),
            ("measured step p50", ms_value(report.steps.step_ns_p50))]
    ratio = f"residual ratio {op.residual_ratio:.2f}; " if op.residual_ratio is not None else ""
    unmodelled = ", ".join(f"{u.op} {ms_value(u.measured_ns, 3)} ms" for u in op.unmodelled)
    tables.append(Table("op floor (the kernels that ran, from their ops' shapes)", pl.DataFrame(
        {"quantity": [r[0] for r in rows], "ms": [r[1] for r in rows]}, schema={"quantity": pl.String,
                                                                              "ms": pl.Float64}),
        note=f"{op.hardware} {op.peak_kind} peaks; binding: {op.binding}; {ratio}"
             f"{pct_value(op.covered_fraction)}% of the GPU time has an op floor"
             + (f"; without one: {unmodelled}" if unmodelled else "")))
    tables.append(Table("op floor per class (per step)", pl.DataFrame([{
        "class": c, "measured ms": ms_value(v.measured_ns), "op floor ms": ms_value(v.t_opt_ns),
        "ratio": _ratio(v.ratio)} for c, v in op.classes.items()],
        schema={"class": pl.String, "measured ms": pl.Float64, "op floor ms": pl.Float64, "ratio": pl.Float64})))
    tables.append(Table("ops with most GPU time (per step)", pl.DataFrame([{
        "op": o.op, "shapes": o.shapes, "class": o.cls, "per step": round(o.instances_per_step, 2),
        "measured ms": ms_value(o.measured_ns), "op floor ms": ms_value(o.t_opt_ns), "ratio": _ratio(o.ratio),
        "floor from": o.floor_model or "no model"} for o in op.ops],
        schema={"op": pl.String, "shapes": pl.String, "class": pl.String, "per step": pl.Float64,
                "measured ms": pl.Float64, "op floor ms": pl.Float64, "ratio": pl.Float64, "floor from": pl.String})))
    wi = report.work_inflation
    if wi and wi.ratio is not None:
        notes.append(f"work inflation: the op floor is {wi.ratio:.2f}x the model floor "
                     f"({ms_value(wi.op_t_opt_ns, 3)} ms against {ms_value(wi.model_t_opt_ns, 3)} ms)")
    notes += [f"work inflation: {f.text}" for f in (wi.findings if wi else [])]
    if wi and wi.by_class:
        tables.append(Table("work inflation per class: op floor against the model's budget", pl.DataFrame([{
            "class": c, "op floor ms": ms_value(v.op_floor_ns), "model budget ms": ms_value(v.model_budget_ns),
            "ratio": _ratio(v.ratio)} for c, v in wi.by_class.items()],
            schema={"class": pl.String, "op floor ms": pl.Float64, "model budget ms": pl.Float64,
                    "ratio": pl.Float64})))
    tables += layer_tables(report.layers)
    notes += [f"layers: {o}" for o in (report.layers.outliers if report.layers else [])]
    return tables, notes


def layer_tables(layers: Layers | None) -> list[Table]:
    """One row per layer of the repeated block, and one per module type inside it."""
    if not layers:
        return []
    return [
        Table(f"per layer: {layers.count} x {layers.block} (per step)", pl.DataFrame([{
            "layer": r.layer, "measured ms": ms_value(r.measured_ns), "op floor ms": ms_value(r.t_opt_ns),
            "ratio": _ratio(r.ratio), "vs siblings": _ratio(r.vs_siblings)} for r in layers.layers],
            schema={"layer": pl.Int64, "measured ms": pl.Float64, "op floor ms": pl.Float64, "ratio": pl.Float64,
                    "vs siblings": pl.Float64}),
            note="; ".join(layers.outliers) or "no layer is over 1.25x the median of its siblings"),
        Table(f"module types inside {layers.block} (per step)", pl.DataFrame([{
            "module": m.module, "instances": m.instances_per_step, "measured ms": ms_value(m.measured_ns),
            "op floor ms": ms_value(m.t_opt_ns), "ratio": _ratio(m.ratio)} for m in layers.module_types],
            schema={"module": pl.String, "instances": pl.Float64, "measured ms": pl.Float64,
                    "op floor ms": pl.Float64, "ratio": pl.Float64})),
    ]


def shape_text(shape: ModelShape) -> str:
    """One line: the inferred fields and where the attention was read."""
    fields = [(k.replace("_", " "), v) for k, v in (
        ("hidden", shape.hidden), ("intermediate", shape.intermediate), ("heads", shape.heads),
        ("kv_heads", shape.kv_heads), ("head_dim", shape.head_dim), ("vocab", shape.vocab),
        ("experts", shape.experts), ("layers", shape.layers), ("dtype", shape.dtype))]
    text = ", ".join(f"{k} {v}" for k, v in fields if v is not None) or "nothing"
    a = shape.attention
    if a:
        text += f" (attention read from {a.op}" + (f" in {a.part}" if a.part else "") + ")"
    return text
