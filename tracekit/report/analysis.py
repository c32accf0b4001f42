"""The analysis report as a Document: verdict first, then floor, the three questions and ncu targets.

JSON output is the ``tracekit.report/v1`` dict itself; the human formats show the same numbers in ms.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.report.document import Document, Table
from tracekit.report.ranks import ranks_tables


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 1)


def report_document(report: dict[str, Any]) -> Document:
    """Render the v1 report dict as titled tables with the verdict and reasons as notes."""
    steps = report["steps"]
    notes = [f"verdict: {report['verdict']}"] + [f"reason: {r}" for r in report["reasons"]]
    notes.append(f"steps: {steps['count']} from {', '.join(steps['source'])}; p50 {_ms(steps['step_ns_p50'])} ms, "
                 f"p99 {_ms(steps['step_ns_p99'])} ms; slowest rank {steps['slowest_rank']}")
    notes += [f"caveat: {c}" for c in report["caveats"]]
    tables: list[Table] = []
    fl = report["floor"]
    if fl:
        rows = [("t_opt (max of resources)", _ms(fl["t_opt_ns"])), ("t_sum (sum of resources)", _ms(fl["t_sum_ns"]))]
        rows += [(f"{k} time", _ms(v)) for k, v in fl["resource_ns"].items()]
        rows += [("measured step p50", _ms(steps["step_ns_p50"]))]
        frame = pl.DataFrame({"quantity": [r[0] for r in rows], "ms": [r[1] for r in rows]},
                             schema={"quantity": pl.String, "ms": pl.Float64})
        tables.append(Table("floor", frame, note=f"binding: {fl['binding']}; residual ratio "
                            f"{fl['residual_ratio']:.2f}; position {fl['position']:.2f} (0 = t_opt, 1 = t_sum); "
                            f"peaks: {fl['peak_kind']}" if fl["residual_ratio"] is not None else None))
    hg = report["host_gaps"]
    gap_rows = [(cause, _ms(ns)) for cause, ns in hg["by_cause"].items()]
    tables.append(Table(
        "1. host gaps per step (median)",
        pl.DataFrame({"cause": [r[0] for r in gap_rows], "ms": [r[1] for r in gap_rows]},
                     schema={"cause": pl.String, "ms": pl.Float64}),
        note=f"total {_ms(hg['total_ns'])} ms = {_pct(hg['fraction'])}% of the step",
    ))
    if hg["top"]:
        tables.append(Table("costliest gaps (repeats across steps collapsed)", pl.DataFrame([{
            "rank": g["rank"], "device": g["device"], "times": g["occurrences"], "total ms": _ms(g["total_ns"]),
            "longest ms": _ms(g["dur_ns"]), "cause": g["cause"],
            "next kernel": g["next_kernel"], "host range": (g.get("host") or {}).get("range"),
            "host call": (g.get("host") or {}).get("api_call"),
        } for g in hg["top"]])))
    ec = report["exposed_comm"]
    tables.append(Table(
        "2. exposed communication per step (median)",
        pl.DataFrame({"collective": list(ec["by_collective"]),
                      "comm ms": [_ms(v["comm_ns"]) for v in ec["by_collective"].values()],
                      "exposed ms": [_ms(v["exposed_ns"]) for v in ec["by_collective"].values()]},
                     schema={"collective": pl.String, "comm ms": pl.Float64, "exposed ms": pl.Float64}),
        note=f"communication {_ms(ec['comm_ns'])} ms, exposed {_ms(ec['exposed_ns'])} ms "
             f"({_pct(ec['fraction'])}% of the step); overlapped {_pct(ec['overlap_fraction'])}%"
             + (f"; of the exposed, waiting for a late rank {_ms(ec['wait_ns'])} ms, moving bytes "
                f"{_ms(ec['transfer_ns'])} ms" if ec.get("wait_ns") is not None else ""),
    ))
    rank_tables, rank_notes = ranks_tables(report)
    tables += rank_tables
    notes += rank_notes
    tables.append(Table("3. kernel classes per step (median)", pl.DataFrame([{
        "class": c["name"], "measured ms": _ms(c["measured_ns"]), "budget ms": _ms(c["budget_ns"]),
        "ratio": None if c["ratio"] is None else round(c["ratio"], 2), "excess ms": _ms(c["excess_ns"]),
        "over budget": c["over_budget"], "top kernel": c["kernels"][0]["name"] if c["kernels"] else None,
    } for c in report["classes"]], schema={"class": pl.String, "measured ms": pl.Float64, "budget ms": pl.Float64,
                                           "ratio": pl.Float64, "excess ms": pl.Float64, "over budget": pl.Boolean,
                                           "top kernel": pl.String})))
    if report["ncu_targets"]:
        tables.append(Table("Nsight Compute targets", pl.DataFrame([{
            "class": t["class"], "function": t["function"], "kernel": t["kernel"], "excess ms": _ms(t["excess_ns"]),
            "launch skip": t["launch_skip"], "in graph": t["in_graph"],
        } for t in report["ncu_targets"]])))
    doc = Document(f"tracekit analyze: {report['verdict']}", tables, notes)
    doc.blocks = [(f"ncu target {i + 1}: {t['class']}", t["command"]) for i, t in enumerate(report["ncu_targets"])]
    doc.data = report
    return doc
