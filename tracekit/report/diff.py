"""The `tracekit diff` document: a summary fit for a pull request (the noise verdict with its interval,
comparability, the gate), the step's owners by change (largest explanation first), the noise test per class,
the kernels that changed most, then each question."""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl

from tracekit.report.analysis import ms_text
from tracekit.report.document import Document, Table, ms_value, pct_value
from tracekit.schema.diff import Delta, Diff, Tested, TestedClass, typed_diff

ARROW = "→"  # not '->': Markdown escapes '>' (GitHub shows '-&gt;' in a raw view)


def _rows(items: dict[str, Delta], label: str) -> list[dict[str, Any]]:
    return [{label: k, "before ms": ms_value(v.before), "after ms": ms_value(v.after),
             "delta ms": ms_value(v.delta), "delta %": pct_value(v.delta_fraction)} for k, v in items.items()]


def _ms_text(ns: float | None) -> str:
    """A change in milliseconds with its sign, 3 decimals."""
    return "n/a" if ns is None else f"{ns / 1e6:+.3f}" if ns else "0.000"


def interval_text(change: Tested) -> str:
    """'+4.2% [+3.1%, +5.0%] of BEFORE's step (95% bootstrap interval, 16 vs 16 steps)' or the untested form."""
    point = f"{change.delta_fraction or 0:+.1%}"
    n_b, n_a = change.samples
    if change.low_fraction is None:
        return f"{point} of BEFORE's step (untested: {n_b} vs {n_a} steps)"
    return (f"{point} [{change.low_fraction:+.1%}, {change.high_fraction:+.1%}] of BEFORE's step "
            f"({change.confidence:.0%} bootstrap interval, {n_b} vs {n_a} steps)")


def _own(change: TestedClass) -> str:
    own = change.own_fraction
    return "" if own is None else f" {own:+.1%} of its own time,"


def summary(doc: Diff) -> list[str]:
    """The lines a pull request needs: the step's noise verdict, what regressed, comparability and the gate."""
    noise = doc.noise
    step = doc.step.p50_ns
    lines = [f"step p50 {ms_text(step.before)} {ARROW} {ms_text(step.after)} ms ({_ms_text(step.delta)} ms, "
             f"{pct_value(step.delta_fraction)}%); verdict {doc.verdict.before} {ARROW} {doc.verdict.after}"]
    lines.append(f"**{noise.step.verdict}**: step median {interval_text(noise.step)}; practical "
                 f"threshold {noise.practical_threshold:.1%}")
    for kind, names in (("regressions", noise.regressions), ("improvements", noise.improvements)):
        named = [f"{c}{_own(noise.classes[c])} {interval_text(noise.classes[c])}" for c in names]
        if named:
            lines.append(f"{kind[:-1]}: " + "; ".join(named))
    comp = doc.comparability
    if comp.fraction is not None:
        known = [c for c in comp.checks if c.same is not None]
        failed = [c.name for c in known if not c.same]
        lines.append(f"comparability {comp.fraction:.0%} ({len(known) - len(failed)} of {len(known)} checks"
                     + (f"; differ: {', '.join(failed)})" if failed else ")"))
    if doc.gate_basis == "kernels" and doc.kernel_figure is not None:
        fig = doc.kernel_figure
        lines.append(f"no step markers on either side: kernels compared per launch ({fig.kernels} kernels both "
                     f"ran): {fig.delta_fraction:+.1%}")
    gate = doc.gate
    if gate and (gate.reasons or gate.exit_status):
        lines.append(f"gate: exit {gate.exit_status}")
    return lines


def diff_notes(doc: Diff) -> list[str]:
    """The diff's sentences: the summary, whether the sides compare, the largest explanation, and both sides'
    reasons and caveats."""
    notes = summary(doc)
    if not doc.step.significant:
        notes.append("the step changed by less than 1% of BEFORE's p50: no shares of it are given; the changes "
                     "below are absolute")
    notes += [f"inconclusive: {r}" for r in doc.inconclusive]
    if doc.changes:
        top = doc.changes[0]
        share = top.share_of_step_delta
        notes.append(f"largest {'explanation' if share is not None else 'change'}: {top.component} "
                     f"{_ms_text(top.delta_ns)} ms" + (f" ({pct_value(share)}% of the step change)"
                                                        if share is not None else ""))
    notes += [f"reason: {r}" for r in doc.reasons] + [f"caveat: {c}" for c in doc.caveats]
    return notes + [f"gate: {r}" for r in (doc.gate.reasons if doc.gate else [])]


def _noise_table(doc: Diff) -> Table:
    noise = doc.noise
    items: dict[str, Tested] = {"step": noise.step, "host gaps": noise.host_gaps,
                                "exposed communication": noise.exposed_comm,
                                **{f"class: {c}": v for c, v in noise.classes.items()}}
    frame = pl.DataFrame([{
        "quantity": k, "verdict": v.verdict, "delta ms": ms_value(v.delta_ns),
        "low ms": ms_value(v.low_ns), "high ms": ms_value(v.high_ns),
        "delta % of step": pct_value(v.delta_fraction), "steps": f"{v.samples[0]} vs {v.samples[1]}",
    } for k, v in items.items()], schema={"quantity": pl.String, "verdict": pl.String, "delta ms": pl.Float64,
                                          "low ms": pl.Float64, "high ms": pl.Float64,
                                          "delta % of step": pl.Float64, "steps": pl.String})
    return Table("noise test (change of the median per step, 95% bootstrap interval)", frame,
                 note=f"regression / improvement: the interval excludes 0 and the change is at least "
                      f"{noise.practical_threshold:.1%} of BEFORE's step median; else within noise")


def _kernel_table(doc: Diff) -> Table:
    frame = pl.DataFrame([{
        "kernel": k.name, "class": k.cls, "launches before": k.launches.before,
        "launches after": k.launches.after, "before ms": ms_value(k.per_step_ns.before),
        "after ms": ms_value(k.per_step_ns.after), "delta ms": ms_value(k.per_step_ns.delta),
        "per launch %": pct_value(k.mean_ns.delta_fraction),
    } for k in doc.kernels], schema={"kernel": pl.String, "class": pl.String,
                                      "launches before": pl.Int64, "launches after": pl.Int64,
                                      "before ms": pl.Float64, "after ms": pl.Float64,
                                      "delta ms": pl.Float64, "per launch %": pl.Float64})
    return Table("kernels (time per step, largest change first)", frame,
                 note="per launch %: the change of the kernel's mean time per launch")


def _comparability_table(doc: Diff) -> Table:
    frame = pl.DataFrame([{"check": c.name, "same": c.same, "blocking": c.blocking,
                           "before": str(c.before), "after": str(c.after)} for c in doc.comparability.checks],
                         schema={"check": pl.String, "same": pl.Boolean, "blocking": pl.Boolean,
                                 "before": pl.String, "after": pl.String})
    return Table("comparability", frame, note="a blocking check that differs makes the diff inconclusive")


def diff_document(diff: dict[str, Any] | Diff) -> Document:
    """The v1 diff (its dict, converted once, or the typed diff) as tables: the step's owners by change (largest
    explanation first), the noise test, the kernels, then each question and comparability."""
    doc = diff if isinstance(diff, Diff) else typed_diff(diff)
    notes = diff_notes(doc)
    schema = {"before ms": pl.Float64, "after ms": pl.Float64, "delta ms": pl.Float64, "delta %": pl.Float64}
    tables = [
        Table("changes (largest explanation of the step change first)" if doc.step.significant
              else "changes (largest first; the step change is under 1%)", pl.DataFrame([{
            "component": c.component, "before ms": ms_value(c.before_ns), "after ms": ms_value(c.after_ns),
            "delta ms": ms_value(c.delta_ns), "share of step change %": pct_value(c.share_of_step_delta),
        } for c in doc.changes], schema={"component": pl.String, **{k: pl.Float64 for k in
                                                                   ("before ms", "after ms", "delta ms")},
                                         "share of step change %": pl.Float64}),
            note="the step's owners: host-gap causes, classes' attributed compute, exposed communication "
                 "(the median step's, as in the exposed communication table)"),
        _noise_table(doc),
        _kernel_table(doc),
        Table("step and floor", pl.DataFrame(
            _rows({"step p50": doc.step.p50_ns, "step p99": doc.step.p99_ns,
                   "t_opt": doc.floor.t_opt_ns, "t_sum": doc.floor.t_sum_ns}, "quantity"),
            schema={"quantity": pl.String, **schema})),
        Table("kernel classes (measured per step)", pl.DataFrame(
            _rows({c.name: c.measured_ns for c in doc.classes}, "class"),
            schema={"class": pl.String, **schema})),
        Table("host gaps by cause", pl.DataFrame(
            _rows({**doc.host_gaps.by_cause, "total": doc.host_gaps.total_ns}, "cause"),
            schema={"cause": pl.String, **schema})),
        Table("exposed communication (the median step)", pl.DataFrame(
            _rows({**doc.exposed_comm.by_collective, "total": doc.exposed_comm.exposed_ns}, "collective"),
            schema={"collective": pl.String, **schema})),
        _comparability_table(doc),
    ]
    fl = doc.floor
    pos = [f"{k} {d.before:.2f} {ARROW} {d.after:.2f}" for k, d in (("residual_ratio", fl.residual_ratio),
                                                                     ("position", fl.position))
           if d.before is not None and d.after is not None]
    if pos:
        next(t for t in tables if t.title == "step and floor").note = "floor position: " + "; ".join(pos)
    return Document("tracekit diff", tables, notes,
                    data=diff if isinstance(diff, dict) else msgspec.to_builtins(diff))
