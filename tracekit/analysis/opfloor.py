"""The op floor: what the kernels that actually ran must cost, from each op's own recorded shapes.

Each GPU operation belongs to an op unit (``tracekit.analysis.attribution``); a unit's floor is the larger of
its FLOPs at the GPU's physical tensor peak (FP8 for FP8/INT8 inputs, else BF16) and its minimum HBM bytes at
the physical bandwidth (``tracekit.floor.ops``). A step's op floor stays a lower bound when streams overlap:
it is the largest of (a) the sum of the unit floors on its busiest stream (one stream's ops run one after
another), (b) all its FLOPs at peak and (c) all its bytes at the bandwidth (docs/op-floor.md). Reported per
op, per class and per step; without a config the verdict places the step against it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import polars as pl

from tracekit.analysis.accounting import StepAccount
from tracekit.analysis.op_units import UNIT_SCHEMA, unit_rows
from tracekit.floor import NEAR_FLOOR_THRESHOLD, Placement, place_bound
from tracekit.floor.ceilings import ceiling
from tracekit.floor.hardware import GpuSpec
from tracekit.floor.ops_engine import LOOSE_OPS, LOOSE_PREFIXES, loose

TOP_OPS = 25  # rows of the per-op table
#: without a config the op floor decides the verdict only when it speaks for this share of the GPU time
MIN_VERDICT_COVERAGE = 0.8


@dataclass
class OpFloor:
    """The op floor of the analysed steps: the report section and what the verdict reads."""

    section: dict[str, Any]
    t_opt_ns: int  # the median step's op floor
    class_budgets: dict[str, int] = field(default_factory=dict)  # per class, median over steps of its units' floors
    placement: Placement | None = None
    units: pl.DataFrame | None = None  # one row per (step, unit): for layers and work inflation


def unit_frame(con: duckdb.DuckDBPyConnection, steps: list[StepAccount], gpu: GpuSpec) -> pl.DataFrame:
    """One row per (step, unit) of the analysed steps (``op_units.unit_rows``: measured GPU time, first stream,
    start and module, class with most time), with the unit's op and work (``op_nodes``) and its floor at the GPU's
    peaks (FP8 peak for FP8 inputs, else BF16) and at the attainable ceilings (floor/ceilings.py: best measured
    rates), in (step, start, unit) order and one chunk: float sums over it add in row order."""
    units = unit_rows(con, steps)
    work = con.sql("SELECT node, name AS op, family, detail, flops, hbm_bytes, precision FROM op_nodes").pl()
    # each unit's op by position (a gather, not a join): row i of ``work`` is node ``node[i]``; -1 the null row
    node = work["node"].to_numpy()
    row = np.full(int(node.max()) + 1 if len(node) else 0, len(node), dtype=np.int64)
    row[node] = np.arange(len(node))
    unit = units["unit"].to_numpy()
    at = np.full(len(unit), len(node), dtype=np.int64)
    known = (unit >= 0) & (unit < len(row))
    at[known] = row[unit[known]]
    units = pl.concat([units, pl.concat([work.drop("node"), work.drop("node").clear(1)]).select(
        pl.all().gather(at))], how="horizontal")
    # the floors in numpy, each as (work / rate) * 1e9 like the SQL it replaces: polars' optimiser may fold the
    # two constants into one and round differently in the last bit
    fp8 = (units["precision"] == "fp8").fill_null(False).to_numpy()
    attention = (units["family"] == "attention").fill_null(False).to_numpy()
    flops, hbm = units["flops"].fill_null(0.0).to_numpy(), units["hbm_bytes"].fill_null(0.0).to_numpy()
    peak = np.where(fp8, gpu.peak_flops_per_s("fp8"), gpu.peak_flops_per_s("bf16"))
    rate = np.where(attention, np.where(fp8, ceiling(gpu, "attention", "fp8").rate_per_s,
                                        ceiling(gpu, "attention", "bf16").rate_per_s),
                    np.where(fp8, ceiling(gpu, "gemm", "fp8").rate_per_s, ceiling(gpu, "gemm", "bf16").rate_per_s))
    compute, memory = flops / peak * 1e9, hbm / gpu.hbm_bytes_per_s * 1e9
    attainable = np.maximum(flops / rate * 1e9, hbm / ceiling(gpu, "hbm").rate_per_s * 1e9)
    return units.select(*UNIT_SCHEMA, "op", "family", "detail", "flops", "hbm_bytes").with_columns(
        pl.Series("compute_ns", compute), pl.Series("memory_ns", memory),
        pl.Series("t_opt_ns", np.maximum(compute, memory)), pl.Series("attainable_ns", attainable),
        pl.col("family").is_not_null().alias("has_floor")).sort("step", "start_ns", "unit").rechunk()


def step_floor(units: pl.DataFrame, gpu: GpuSpec) -> pl.DataFrame:
    """Per step: its op floor (the largest of busiest stream, all FLOPs, all bytes), and its parts."""
    by_stream = units.group_by("step", "stream_id").agg(pl.col("t_opt_ns").sum().alias("s"),
                                                        pl.col("attainable_ns").sum().alias("a"))
    busiest = by_stream.group_by("step").agg(pl.col("s").max().alias("stream_ns"),
                                             pl.col("a").max().alias("attainable_stream_ns"))
    totals = units.group_by("step").agg(
        pl.col("compute_ns").sum(), (pl.col("hbm_bytes").fill_null(0).sum() / gpu.hbm_bytes_per_s * 1e9)
        .alias("memory_ns"), pl.col("t_opt_ns").sum().alias("sum_ns"),
        (pl.col("compute_ns") + pl.col("memory_ns")).sum().alias("t_sum_ns"),
        pl.col("measured_ns").sum().alias("gpu_ns"),
        pl.col("measured_ns").filter(pl.col("has_floor")).sum().alias("covered_ns"))
    out = totals.join(busiest, on="step").with_columns(
        pl.max_horizontal("stream_ns", "compute_ns", "memory_ns").alias("t_opt_ns"),
        pl.max_horizontal("attainable_stream_ns", "stream_ns", "compute_ns", "memory_ns").alias("attainable_ns"))
    return out.sort("step")


def _median_row(frame: pl.DataFrame, column: str) -> dict[str, Any]:
    ordered = frame.sort([column, "step"])
    return ordered.row((len(ordered) - 1) // 2, named=True)


def op_table(units: pl.DataFrame, n_steps: int, limit: int = TOP_OPS) -> list[dict[str, Any]]:
    """Per op (name and shapes): instances, measured and floor per step, their ratio and the smallest instance
    ratio; the ops with most time first."""
    grouped = (units.group_by("op", "family", "detail", "class")
               .agg(pl.len().alias("instances"), pl.col("measured_ns").sum(), pl.col("t_opt_ns").sum(),
                    (pl.col("measured_ns") / pl.col("t_opt_ns")).filter(pl.col("t_opt_ns") > 0).min()
                    .alias("min_ratio"), pl.col("flops").sum(), pl.col("hbm_bytes").sum())
               .sort(["measured_ns", "op", "detail", "class"], descending=[True, False, False, False],
                     nulls_last=True))
    rows = []
    for r in grouped.head(limit).iter_rows(named=True):
        floor_ns = r["t_opt_ns"] if r["family"] else None
        rows.append({
            "op": r["op"], "family": r["family"], "shapes": r["detail"], "class": r["class"],
            "instances_per_step": r["instances"] / n_steps, "measured_ns": int(r["measured_ns"] / n_steps),
            "t_opt_ns": None if floor_ns is None else int(round(floor_ns / n_steps)),
            "ratio": r["measured_ns"] / floor_ns if floor_ns else None, "min_instance_ratio": r["min_ratio"],
            "flops": r["flops"] / n_steps if r["family"] else None,
            "hbm_bytes": r["hbm_bytes"] / n_steps if r["family"] else None,
            "floor_model": None if not r["family"] else "flops and bytes" if r["flops"] else "bytes only",
        })
    return rows


def class_table(units: pl.DataFrame, n_steps: int) -> dict[str, dict[str, int | float | None]]:
    """Per class: measured time, op floor and ratio, per step (mean over the analysed steps)."""
    out = {}
    for r in (units.group_by("class").agg(pl.col("measured_ns").sum(), pl.col("t_opt_ns").sum())
              .sort(["measured_ns", "class"], descending=[True, False]).iter_rows(named=True)):
        out[r["class"]] = {"measured_ns": int(r["measured_ns"] / n_steps), "t_opt_ns": int(r["t_opt_ns"] / n_steps),
                           "ratio": r["measured_ns"] / r["t_opt_ns"] if r["t_opt_ns"] else None}
    return out


def compute_op_floor(con: duckdb.DuckDBPyConnection, steps: list[StepAccount], gpu: GpuSpec, gpu_key: str,
                     step_p50: int, threshold: float = NEAR_FLOOR_THRESHOLD,
                     communication: frozenset[str] = frozenset()) -> OpFloor | None:
    """The op floor of the analysed ``steps`` on ``gpu`` (physical peaks); None when no op has a floor. Its
    coverage is over the GPU time of everything but ``communication`` classes (the op floor models none)."""
    if not con.execute("SELECT count(*) FROM op_nodes WHERE family IS NOT NULL").fetchall()[0][0]:
        return None  # no op has a work model (a trace without recorded shapes): no unit can have a floor
    units = unit_frame(con, steps, gpu)
    if units.is_empty() or not units["has_floor"].any():
        return None
    per_step = step_floor(units, gpu)
    med = _median_row(per_step, "t_opt_ns")
    n = len(steps)
    t_opt = int(round(med["t_opt_ns"]))
    budgets: dict[str, list[float]] = defaultdict(list)
    by_step_class = units.group_by("step", "class").agg(pl.col("t_opt_ns").sum())
    for r in by_step_class.iter_rows(named=True):
        budgets[r["class"]].append(r["t_opt_ns"])
    # Memory copies and sets keep their floor in the tables but get no class budget: a host copy is bound by
    # the host link, not HBM, and no kernel profiler nominates it.
    class_budgets = {c: int(round(float(np.median(v + [0.0] * (n - len(v)))))) for c, v in budgets.items()
                     if c not in ("memcpy", "memset")}
    attainable = int(round(med["attainable_ns"]))
    placement = place_bound(step_p50, t_opt, int(round(med["t_sum_ns"])), threshold, binding=_binding(med),
                            attainable_ns=attainable) if step_p50 > 0 and t_opt > 0 else None
    compute_units = units.filter(~pl.col("class").is_in(list(communication)))
    gpu_ns = float(compute_units["measured_ns"].sum())
    covered = float(compute_units.filter(pl.col("has_floor"))["measured_ns"].sum())
    launched = float(compute_units.filter(pl.col("unit") >= 0)["measured_ns"].sum())
    loose_ns = float(compute_units.filter(pl.col("has_floor") & (pl.col("op").is_in(list(LOOSE_OPS))
                                                                 | pl.col("op").str.starts_with(LOOSE_PREFIXES[0])))
                     ["measured_ns"].sum())
    section = {
        "hardware": gpu_key, "peak_kind": "physical",
        "t_opt_ns": t_opt, "binding": _binding(med),
        "attainable_ns": attainable,  # the busiest stream's ops at the attainable ceilings: the stop rule's floor
        "attainable_ratio": placement.attainable_ratio if placement else None,
        "stop_rule_floor": placement.floor_used if placement else None,
        "stream_ns": int(round(med["stream_ns"])), "compute_ns": int(round(med["compute_ns"])),
        "memory_ns": int(round(med["memory_ns"])), "sum_ns": int(round(med["sum_ns"])),
        "t_sum_ns": int(round(med["t_sum_ns"])),
        "residual_ratio": placement.residual_ratio if placement else None,
        "position": placement.position if placement else None,
        "covered_fraction": covered / gpu_ns if gpu_ns else 0.0,
        # of the GPU time that has a launching op in the capture (kernels launched before it began have none)
        "covered_launched_fraction": covered / launched if launched else 0.0,
        # per step: GPU time with no launching op in the capture (queued before the profiler started, or replayed
        # from a graph whose capture trace is not given): no op, no shapes, so no op floor can speak for it
        "unattributed_ns": int(round((gpu_ns - launched) / n)),
        # the share whose floor bounds the op's main operands (not a bytes bound on an op whose expert weights or
        # cached context its inputs do not record): what the verdict from the op floor rests on
        "tight_fraction": (covered - loose_ns) / gpu_ns if gpu_ns else 0.0,
        "min_instance_ratio": _min_ratio(units),
        "unmodelled": _unmodelled(units, n),
        "classes": class_table(units, n), "ops": op_table(units, n),
        "steps": len(steps),
    }
    return OpFloor(_stable(section), t_opt, class_budgets, placement, units)


def _stable(value: Any) -> Any:
    """Floats to 12 significant digits, in nested dicts and lists: float sums over many ops differ in their
    last bits with the order threads or workers add them, and a report must not."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _min_ratio(units: pl.DataFrame) -> dict[str, Any] | None:
    """The op instance closest to (or under) its floor: measured / t_opt, with its op and shapes."""
    floored = units.filter(pl.col("t_opt_ns") > 0).with_columns((pl.col("measured_ns") / pl.col("t_opt_ns"))
                                                                .alias("r"))
    if floored.is_empty():
        return None
    r = floored.filter(pl.col("r") == pl.col("r").min()).sort(["step", "unit"]).row(0, named=True)
    return {"ratio": r["r"], "op": r["op"], "shapes": r["detail"], "measured_ns": r["measured_ns"],
            "t_opt_ns": r["t_opt_ns"]}


def _binding(row: dict[str, Any]) -> str:
    parts = {"stream": row["stream_ns"], "compute": row["compute_ns"], "hbm": row["memory_ns"]}
    return max(parts, key=lambda k: parts[k])


def _unmodelled(units: pl.DataFrame, n_steps: int, limit: int = 5) -> list[dict[str, Any]]:
    """The ops without a floor (no recorded shapes, no model, or no launching op) with most GPU time."""
    rows = (units.filter(~pl.col("has_floor")).group_by("op").agg(pl.col("measured_ns").sum())
            .sort(["measured_ns", "op"], descending=[True, False], nulls_last=True).head(limit))
    return [{"op": r["op"] or "(no launching op in the capture)", "measured_ns": int(r["measured_ns"] / n_steps)}
            for r in rows.iter_rows(named=True)]


def work_inflation(op: OpFloor, model_t_opt_ns: int | None, model_budgets: dict[str, int],
                   step_ns: int) -> dict[str, Any]:
    """The op floor against the model floor (their ratio: work the kernels that ran do beyond what the
    configuration needs), per class, and the ops responsible: unfused attention (its score and probability
    tensors go through HBM) and copies (data movement a fused stack avoids)."""
    units, n = op.units, op.section["steps"]
    findings = []
    # Unfused attention: attention work in module instances that run no fused attention op (the math path).
    fused_modules = units.filter(pl.col("family") == "attention")["module"].unique().to_list()
    unfused = units.filter(pl.col("attention") & pl.col("has_floor") & (pl.col("family") != "attention")
                           & ~pl.col("module").is_in(fused_modules)
                           & pl.col("module").is_in(units.filter(pl.col("attention") & pl.col("family")
                                                                 .is_in(["gemm", "softmax"]))["module"].unique()
                                                    .to_list()))
    if not unfused.is_empty():
        ops = unfused.group_by("op").agg(pl.col("measured_ns").sum()).sort(["measured_ns", "op"],
                                                                          descending=[True, False])
        measured = float(unfused["measured_ns"].sum()) / n
        floor_ns = float(unfused["t_opt_ns"].sum()) / n
        scores = float(unfused.filter(pl.col("family") != "gemm")["hbm_bytes"].sum()) / n
        findings.append({
            "kind": "unfused_attention", "ops": ops["op"].to_list()[:6], "measured_ns": int(measured),
            "t_opt_ns": int(round(floor_ns)), "step_fraction": measured / step_ns if step_ns else None,
            "intermediate_bytes": scores,
            "text": f"unfused attention ({', '.join(ops['op'].to_list()[:4])} under attention modules): "
                    f"{measured / 1e6:.3f} ms a step, op floor {floor_ns / 1e6:.3f} ms, of which "
                    f"{scores / 1e6:.1f} MB of scores and probabilities go through HBM; a fused attention "
                    "(FlashAttention, SDPA) keeps them on chip"})
    copies = units.filter(pl.col("family") == "copy")
    if not copies.is_empty():
        measured = float(copies["measured_ns"].sum()) / n
        findings.append({
            "kind": "copies", "ops": copies.group_by("op").agg(pl.col("measured_ns").sum())
            .sort(["measured_ns", "op"], descending=[True, False])["op"].to_list()[:6], "measured_ns": int(measured),
            "t_opt_ns": int(round(float(copies["t_opt_ns"].sum()) / n)),
            "step_fraction": measured / step_ns if step_ns else None, "intermediate_bytes": None,
            "text": f"copies and casts: {measured / 1e6:.3f} ms a step (op floor "
                    f"{float(copies['t_opt_ns'].sum()) / n / 1e6:.3f} ms): data movement no model needs"})
    by_class = {}
    for c, row in op.section["classes"].items():
        budget = model_budgets.get(c)
        by_class[c] = {"op_floor_ns": row["t_opt_ns"], "model_budget_ns": budget,
                       "ratio": row["t_opt_ns"] / budget if budget else None}
    return {"model_t_opt_ns": model_t_opt_ns, "op_t_opt_ns": op.t_opt_ns,
            "ratio": op.t_opt_ns / model_t_opt_ns if model_t_opt_ns else None,
            "by_class": by_class if model_budgets else {}, "findings": findings}


def verdict_coverage_reason(op: OpFloor) -> str | None:
    """Why the op floor may not decide the verdict (too little of the GPU time has one), or None when it may."""
    covered, tight = op.section["covered_fraction"], op.section["tight_fraction"]
    if covered >= MIN_VERDICT_COVERAGE and tight < MIN_VERDICT_COVERAGE:
        ops = sorted({str(o["op"]) for o in op.section["ops"] if o["op"] and loose(o["op"])})
        return (f"no --config, and the op floor bounds only {tight:.0%} of the GPU time by the work its ops "
                f"must do (under {MIN_VERDICT_COVERAGE:.0%}): {', '.join(ops)} record neither expert weights nor "
                "cached keys among their inputs, so their floor is a bytes bound far below their work; give --config "
                "(tracekit config-draft FILE drafts one)")
    if covered >= MIN_VERDICT_COVERAGE:
        return None
    top = ", ".join(f"{u['op']} {u['measured_ns'] / 1e6:.3f} ms" for u in op.section["unmodelled"][:3])
    outside = op.section["unattributed_ns"]
    of_launched = (f", {op.section['covered_launched_fraction']:.0%} of the GPU time that has a launching op in "
                   "the trace" if outside else "")
    return (f"no --config, and the op floor speaks for only {covered:.0%} of the GPU time{of_launched} (under "
            f"{MIN_VERDICT_COVERAGE:.0%}; without one: {top}): a verdict from it would judge the rest unseen; "
            "give --config (tracekit config-draft FILE drafts one)")
