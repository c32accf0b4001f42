"""The analysis report as a Document: verdict first, then floor, the three questions and ncu targets.

JSON output is the ``tracekit.report/v2`` dict itself; the human formats show the same numbers in ms, read from the
typed report (``tracekit.schema.report.Report``).
"""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl

from tracekit.report.document import Document, Table, ms_text, ms_value, pct_value
from tracekit.report.opfloor import op_floor_tables
from tracekit.report.ranks import ranks_tables
from tracekit.schema.report import ClassRow, ExposedComm, FloorSection, HostGaps, Report, Steps, typed_report


def _per_rank_text(steps: Steps) -> str:
    """' (1 per rank, 2 ranks)' when the steps come from several ranks; '' for one."""
    per = list(steps.count_per_rank.values())
    if len(per) < 2:
        return ""
    each = str(per[0]) if min(per) == max(per) else f"{min(per)}-{max(per)}"
    return f" ({each} per rank, {len(per)} ranks)"


def over_budget_text(c: ClassRow) -> str:
    """'yes', 'no', or for a communication class that question 2 judges it (its ratio is shown, not judged)."""
    if c.communication:
        return "question 2"
    return "yes" if c.over_budget else "no"


def overlap_text(ec: ExposedComm) -> str:
    """How much communication the compute kernels hid, or that there was none."""
    if not ec.comm_ns:
        return "no communication"
    text = f"overlapped {pct_value(ec.overlap_fraction)}% by compute kernels in the median step"
    if ec.exposed_under_memops_ns:
        text += f" ({pct_value(ec.overlap_fraction_incl_memops)}% counting memory copies and sets as hiding it)"
    whole = ec.all_steps
    if whole.overlap_fraction is not None:
        text += f"; {pct_value(whole.overlap_fraction)}% over all {whole.steps} analysed steps together"
    if ec.wait_ns is not None:
        text += (f"; of the exposed, waiting for a late rank {ms_text(ec.wait_ns)} ms, moving bytes "
                 f"{ms_text(ec.transfer_ns)} ms")
    return text


def exposed_comm_rows(ec: ExposedComm) -> list[tuple[str, int, int]]:
    """(collective, comm ns, exposed ns) of the median step, then the concurrent-collectives correction and
    the total: the rows above the total add up to it."""
    rows = [(c, v.comm_ns, v.exposed_ns) for c, v in ec.by_collective.items()]
    if ec.concurrent_ns:  # kernel time of collectives that overlapped one another, counted once in all
        rows.append(("concurrent collectives (counted once)", -ec.concurrent_ns, 0))
    return [*rows, ("total", ec.comm_ns, ec.exposed_ns)] if rows else []


def median_step_text(ec: ExposedComm) -> str:
    """Which step the communication figures come from."""
    step = ec.step
    if not step:
        return "median step"
    return f"median step ({step.label}, rank {step.rank} device {step.device}, {ms_text(step.dur_ns)} ms)"


def exposed_comm_table(ec: ExposedComm) -> Table:
    """Question 2 for the median step: one row per collective; rows add up to the total row."""
    rows = exposed_comm_rows(ec)
    return Table(
        f"2. exposed communication in the {median_step_text(ec)}",
        pl.DataFrame({"collective": [r[0] for r in rows], "comm ms": [ms_value(r[1]) for r in rows],
                      "exposed ms": [ms_value(r[2]) for r in rows]},
                     schema={"collective": pl.String, "comm ms": pl.Float64, "exposed ms": pl.Float64}),
        note=f"communication {ms_text(ec.comm_ns)} ms, exposed {ms_text(ec.exposed_ns)} ms "
             f"({pct_value(ec.fraction)}% of the step); {overlap_text(ec)}",
    )


def summary_table(report: Report) -> Table:
    """The verdict, step time and floor in one row, in the JSON's units (ns): the first CSV table, for scripts
    (the human formats state the same in their notes)."""
    steps, fl = report.steps, report.floor
    row = {"verdict": str(report.verdict), "config": report.config.name,
           "steps": steps.count, "step_source": ", ".join(steps.source),
           "step_p50_ns": steps.step_ns_p50, "step_p99_ns": steps.step_ns_p99,
           "floor_t_opt_ns": fl and fl.t_opt_ns, "floor_t_sum_ns": fl and fl.t_sum_ns,
           "expected_ns": fl and fl.expected_ns, "residual_ratio": fl and fl.residual_ratio,
           "binding": fl and fl.binding, "host_gaps_ns": report.host_gaps.total_ns,
           "exposed_comm_ns": report.exposed_comm.exposed_ns}
    schema = {k: pl.String for k in ("verdict", "config", "step_source", "binding")}
    schema |= {k: pl.Int64 for k in row if k.endswith("_ns") or k == "steps"} | {"residual_ratio": pl.Float64}
    return Table("summary", pl.DataFrame([row], schema={k: schema[k] for k in row}), human=False)


def _floor_table(report: Report, fl: FloorSection) -> Table:
    """The floor's resources against the measured step."""
    rows = [("t_opt (max of resources)", ms_value(fl.t_opt_ns)),
            ("t_sum (sum of resources)", ms_value(fl.t_sum_ns))]
    rows += [(f"{k} time", ms_value(v)) for k, v in fl.resource_ns.items()]
    rows += [("latency chain (one link hop per collective)", ms_value(fl.latency_chain_ns)),
             ("attainable floor (best measured rates)", ms_value(fl.attainable_ns))]
    rows += [(f"expected ({fl.expected_peak_kind} peaks: an estimate, not a bound)", ms_value(fl.expected_ns)),
             ("measured step p50", ms_value(report.steps.step_ns_p50))]
    frame = pl.DataFrame({"quantity": [r[0] for r in rows], "ms": [r[1] for r in rows]},
                         schema={"quantity": pl.String, "ms": pl.Float64})
    placed = (f"residual ratio {fl.residual_ratio:.2f}; position {fl.position:.2f} (0 = t_opt, 1 = t_sum); "
              if fl.residual_ratio is not None else "")
    return Table("floor", frame, note=f"binding: {fl.binding}; {placed}peaks: {fl.peak_kind}; "
                                      f"stop rule on the {fl.stop_rule_floor} floor")


def _gap_tables(hg: HostGaps) -> list[Table]:
    """Question 1: the host gaps by cause, and the costliest gaps."""
    gap_rows = [(cause, ms_value(ns)) for cause, ns in hg.by_cause.items()]
    head = hg.before_first_kernel
    tables = [Table(
        "1. host gaps per step (median)",
        pl.DataFrame({"cause": [r[0] for r in gap_rows], "ms": [r[1] for r in gap_rows]},
                     schema={"cause": pl.String, "ms": pl.Float64}),
        note=f"total {ms_text(hg.total_ns)} ms = {pct_value(hg.fraction)}% of the step"
             + (f"; GPU idle before the first kernel {ms_text(head.ns)} ms ({pct_value(head.fraction)}% of the "
                "step)" if head.ns else ""),
    )]
    if hg.top:
        tables.append(Table("costliest gaps (repeats across steps collapsed)", pl.DataFrame([{
            "rank": g.rank, "device": g.device, "times": g.occurrences, "total ms": ms_value(g.total_ns),
            "longest ms": ms_value(g.dur_ns), "cause": g.cause,
            "next kernel": g.next_kernel, "host range": g.host and g.host.range,
            "host call": g.host and g.host.api_call,
        } for g in hg.top])))
    return tables


def report_document(report: dict[str, Any] | Report) -> Document:
    """Render the v2 report (its dict, converted once, or the typed report) as titled tables with the verdict
    and reasons as notes."""
    typed = report if isinstance(report, Report) else typed_report(report)
    steps = typed.steps
    notes = [f"verdict: {typed.verdict}"] + [f"reason: {r}" for r in typed.reasons]
    incomplete = steps.incomplete
    left_out = (f" (over {steps.count - incomplete} complete steps: the last step of each device, which ends "
                "at its own last operation, is left out)") if incomplete else ""
    notes.append(f"steps: {steps.count}{_per_rank_text(steps)} from {', '.join(steps.source)}; "
                 f"p50 {ms_text(steps.step_ns_p50)} ms, "
                 f"p99 {ms_text(steps.step_ns_p99)} ms{left_out}; slowest rank {steps.slowest_rank}")
    graphs = typed.graphs
    if graphs:
        notes.append(f"graphs: {graphs.replayed_kernels} kernels ran in graph replays; "
                     f"{pct_value(graphs.attributed_fraction)}% of their time is attributed to the op or module "
                     "that captured it" + (f" (from {len(graphs.captures)} capture trace"
                                            f"{'s' if len(graphs.captures) != 1 else ''})" if graphs.captures
                                            else ""))
    notes += [f"caveat: {c}" for c in typed.caveats]
    notes += [f"fit: {n}" for n in (typed.fit.notes if typed.fit else [])]
    tables: list[Table] = [summary_table(typed)]
    if typed.floor:
        tables.append(_floor_table(typed, typed.floor))
    op_tables, op_notes = op_floor_tables(typed)
    tables += op_tables
    notes += op_notes
    tables += _gap_tables(typed.host_gaps)
    tables.append(exposed_comm_table(typed.exposed_comm))
    rank_tables, rank_notes = ranks_tables(typed)
    tables += rank_tables
    notes += rank_notes
    tables.append(Table("3. kernel classes per step (median)", pl.DataFrame([{
        "class": c.name, "measured ms": ms_value(c.measured_ns), "budget ms": ms_value(c.budget_ns),
        "ratio": None if c.ratio is None else round(c.ratio, 2), "excess ms": ms_value(c.excess_ns),
        "over budget": over_budget_text(c), "top kernel": c.kernels[0].name if c.kernels else None,
    } for c in typed.classes], schema={"class": pl.String, "measured ms": pl.Float64, "budget ms": pl.Float64,
                                       "ratio": pl.Float64, "excess ms": pl.Float64, "over budget": pl.String,
                                       "top kernel": pl.String}),
        note=f"communication classes are judged by question 2 (exposed communication), not against their budget; "
             f"over budget: a ratio above {typed.config.threshold} and an excess of at least "
             f"{typed.config.min_excess_fraction:.0%} of the step"))
    if typed.ncu_targets:
        tables.append(Table("deep-dive targets (ncu for NVIDIA, rocprofv3 for AMD kernels)", pl.DataFrame([{
            "class": t.cls, "tool": t.tool, "function": t.function, "kernel": t.kernel,
            "excess ms": ms_value(t.excess_ns), "launch skip": t.launch_skip, "in graph": t.in_graph,
        } for t in typed.ncu_targets])))
    doc = Document(f"tracekit analyze: {typed.verdict}", tables, notes)
    doc.blocks = [(f"{t.tool} target {i + 1}: {t.cls}", t.command) for i, t in enumerate(typed.ncu_targets)]
    doc.data = report if isinstance(report, dict) else msgspec.to_builtins(report)
    return doc
