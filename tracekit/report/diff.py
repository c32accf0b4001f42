"""The `tracekit diff` document: the step's owners by change (largest explanation first), then each question."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.report.analysis import ms_text
from tracekit.report.document import Document, Table, ms_value, pct_value

if TYPE_CHECKING:
    pass




def _rows(items: dict[str, dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [{label: k, "before ms": ms_value(v["before"]), "after ms": ms_value(v["after"]),
             "delta ms": ms_value(v["delta"]), "delta %": pct_value(v["delta_fraction"])} for k, v in items.items()]


def _ms_text(ns: float | None) -> str:
    """A change in milliseconds with its sign, 3 decimals."""
    return "n/a" if ns is None else f"{ns / 1e6:+.3f}" if ns else "0.000"


def diff_notes(doc: dict[str, Any]) -> list[str]:
    """The diff's sentences: the step change (absolute always; its share only when significant), whether the
    sides compare, the largest explanation, and both sides' reasons and caveats."""
    step = doc["step"]["p50_ns"]
    notes = [f"step p50 {ms_text(step['before'])} -> {ms_text(step['after'])} ms ({_ms_text(step['delta'])} ms, "
             f"{pct_value(step['delta_fraction'])}%); verdict {doc['verdict']['before']} -> {doc['verdict']['after']}"]
    if not doc["step"].get("significant", True):
        notes.append("the step changed by less than 1% of BEFORE's p50: within noise, so no shares of it are "
                     "given; the changes below are absolute")
    notes += [f"inconclusive: {r}" for r in doc.get("inconclusive", [])]
    if doc["changes"]:
        top = doc["changes"][0]
        share = top["share_of_step_delta"]
        notes.append(f"largest {'explanation' if share is not None else 'change'}: {top['component']} "
                     f"{_ms_text(top['delta_ns'])} ms" + (f" ({pct_value(share)}% of the step change)"
                                                           if share is not None else ""))
    notes += [f"reason: {r}" for r in doc["reasons"]] + [f"caveat: {c}" for c in doc["caveats"]]
    return notes + [f"gate: {r}" for r in doc.get("gate", {}).get("reasons", [])]


def diff_document(doc: dict[str, Any]) -> Document:
    """The v1 diff as tables: the step's owners by change (largest explanation first), then each question."""
    import polars as pl

    notes = diff_notes(doc)
    schema = {"before ms": pl.Float64, "after ms": pl.Float64, "delta ms": pl.Float64, "delta %": pl.Float64}
    tables = [
        Table("changes (largest explanation of the step change first)" if doc["step"].get("significant", True)
              else "changes (largest first; the step change is within noise)", pl.DataFrame([{
            "component": c["component"], "before ms": ms_value(c["before_ns"]), "after ms": ms_value(c["after_ns"]),
            "delta ms": ms_value(c["delta_ns"]), "share of step change %": pct_value(c["share_of_step_delta"]),
        } for c in doc["changes"]], schema={"component": pl.String, **{k: pl.Float64 for k in
                                                                      ("before ms", "after ms", "delta ms")},
                                            "share of step change %": pl.Float64}),
            note="the step's owners: host-gap causes, classes' attributed compute, exposed communication"),
        Table("step and floor", pl.DataFrame(
            _rows({"step p50": doc["step"]["p50_ns"], "step p99": doc["step"]["p99_ns"],
                   "t_opt": doc["floor"]["t_opt_ns"], "t_sum": doc["floor"]["t_sum_ns"]}, "quantity"),
            schema={"quantity": pl.String, **schema})),
        Table("kernel classes (measured per step)", pl.DataFrame(
            _rows({c["name"]: c["measured_ns"] for c in doc["classes"]}, "class"),
            schema={"class": pl.String, **schema})),
        Table("host gaps by cause", pl.DataFrame(
            _rows({**doc["host_gaps"]["by_cause"], "total": doc["host_gaps"]["total_ns"]}, "cause"),
            schema={"cause": pl.String, **schema})),
        Table("exposed communication", pl.DataFrame(
            _rows({**doc["exposed_comm"]["by_collective"], "total": doc["exposed_comm"]["exposed_ns"]}, "collective"),
            schema={"collective": pl.String, **schema})),
    ]
    fl = doc["floor"]
    pos = [f"{k} {fl[k]['before']:.2f} -> {fl[k]['after']:.2f}" for k in ("residual_ratio", "position")
           if fl[k]["before"] is not None and fl[k]["after"] is not None]
    if pos:
        tables[1].note = "floor position: " + "; ".join(pos)
    return Document("tracekit diff", tables, notes, data=doc)
