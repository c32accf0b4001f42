"""Before/after comparison of two analyses (``tracekit diff``): per-class time, host gaps by cause, exposed
communication and floor position, with the change that explains most of the step-time difference first,
and the exit status for gating.

Inputs are ``tracekit.report/v2`` JSON documents or traces (analysed here with the same options). The
result is the ``tracekit.diff/v1`` document (docs/reconcile.md); the exit status is ``tracekit.compare.gate``'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from tracekit.analysis.options import REPORT_SCHEMA, AnalyzeOptions
from tracekit.compare.comparability import blocking_reasons, comparability
from tracekit.compare.comparability import notes as comparability_notes
from tracekit.compare.kernels import kernel_figure, kernel_rows
from tracekit.compare.noise import PRACTICAL_THRESHOLD, RESAMPLES, compare
from tracekit.errors import InputError
from tracekit.schema.diff import (
    Comparability,
    Counts,
    Delta,
    Diff,
    DiffChange,
    DiffClass,
    DiffComm,
    DiffFloor,
    DiffGaps,
    DiffSide,
    DiffStep,
    Noise,
    TestedClass,
    Verdicts,
)
from tracekit.schema.report import ClassRow, CollectiveComm, Report, Samples, typed_report

SIGNIFICANT_STEP_CHANGE = 0.01  # a step change under 1% of BEFORE's p50 is noise: no shares of it are given
SNIFF_BYTES = 4096


@dataclass
class Side:
    """One input: where it came from and its v2 report (as read or analysed, and as its typed contract)."""

    path: str
    kind: str  # 'report' or 'trace'
    report: dict[str, Any]
    typed: Report


def json_schema(path: Path) -> str | None:
    """The ``schema`` of a tracekit JSON document (its first key), None for anything else (traces included:
    a Kineto trace starts with ``schemaVersion``, an Nsight export is SQLite)."""
    if not path.is_file() or path.suffix == ".gz":
        return None
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES).decode("utf-8", errors="replace").lstrip()
    if not head.startswith("{") or '"schema"' not in head[:200]:
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable tracekit report ({type(exc).__name__}); "
                         "write it with `tracekit analyze --format json --out FILE`") from None
    return str(doc.get("schema")) if isinstance(doc, dict) else None


def report_side(path: str, kind: str, report: dict[str, Any]) -> Side:
    """A side of its report, converted to the contract once; a report file that does not hold to it is a
    one-line error naming the file and the key."""
    try:
        return Side(path, kind, report, typed_report(report))
    except msgspec.ValidationError as exc:
        raise InputError(f"{path}: not a {REPORT_SCHEMA} report this tracekit reads ({exc}); write it again "
                         "with `tracekit analyze --format json --out FILE`") from None


def load_side(path: Path, opts: AnalyzeOptions, cache_dir: Path | None, use_cache: bool, jobs: int) -> Side:
    """A report file as is, or a trace (file or per-rank directory) analysed with ``opts``."""
    schema = json_schema(path)
    if schema == REPORT_SCHEMA:
        return report_side(str(path), "report", json.loads(path.read_text(encoding="utf-8")))
    if schema is not None:
        raise InputError(f"{path}: a {schema} document; give a {REPORT_SCHEMA} report "
                         "(`tracekit analyze --format json`) or a trace")
    from tracekit.analysis.analyze import analyze
    from tracekit.store.ingest import open_store

    with open_store([path], cache_dir=cache_dir, use_cache=use_cache, jobs=jobs) as store:
        return report_side(str(path), "trace", analyze(store, opts))


def _delta(before: int | float | None, after: int | float | None) -> Delta:
    d = None if before is None or after is None else after - before
    return Delta(before=before, after=after, delta=d, delta_fraction=(d / before) if d is not None and before else None)


def _classes(report: Report) -> dict[str, ClassRow]:
    return {c.name: c for c in report.classes}


def _owned(report: Report, classes: dict[str, ClassRow], name: str, comm: bool) -> int:
    """A class's owned time per step: its attributed compute, or for a collective its exposed time in the
    median step (``exposed_comm.by_collective``: the one exposed figure the diff shows for it)."""
    if comm:
        row = report.exposed_comm.by_collective.get(name)
        return row.exposed_ns if row else 0
    own = classes.get(name)
    return own.attributed_ns if own else 0


def significant(before: Report, after: Report) -> bool:
    """Whether the step p50 changed by at least ``SIGNIFICANT_STEP_CHANGE`` of BEFORE's."""
    b, a = before.steps.step_ns_p50, after.steps.step_ns_p50
    return bool(b) and abs(a - b) >= SIGNIFICANT_STEP_CHANGE * b


def changes(before: Report, after: Report) -> list[DiffChange]:
    """The step partitioned into owners (host-gap causes and each class's attributed time, communication
    classes by their exposed time), each owner's change, the one that explains most of the step change first.
    Shares of the step change are given only when that change is significant (else None: 5 us of a 100 ms
    step is noise, and a share of it says nothing); the absolute deltas always."""
    step_delta = after.steps.step_ns_p50 - before.steps.step_ns_p50
    shares = significant(before, after)
    rows = []
    gaps_b, gaps_a = dict(before.host_gaps.by_cause.items()), dict(after.host_gaps.by_cause.items())
    for cause in sorted(set(gaps_b) | set(gaps_a)):
        b, a = gaps_b.get(cause, 0), gaps_a.get(cause, 0)
        rows.append(DiffChange(component=f"host gap: {cause}", kind="host_gap", name=cause, before_ns=b,
                               after_ns=a, delta_ns=a - b, share_of_step_delta=None))
    cb, ca = _classes(before), _classes(after)
    for name in sorted(set(cb) | set(ca)):
        comm = (cb.get(name) or ca[name]).communication
        b, a = _owned(before, cb, name, comm), _owned(after, ca, name, comm)
        rows.append(DiffChange(component=f"{'exposed comm' if comm else 'class'}: {name}",
                               kind="exposed_comm" if comm else "class", name=name, before_ns=b, after_ns=a,
                               delta_ns=a - b, share_of_step_delta=None))
    sign = 1 if step_delta >= 0 else -1
    if shares:
        for r in rows:
            r.share_of_step_delta = r.delta_ns / step_delta + 0.0  # no -0.0
        rows.sort(key=lambda r: (-sign * r.delta_ns, -abs(r.delta_ns), r.component))
    else:  # no direction to explain: the largest changes either way first
        rows.sort(key=lambda r: (-abs(r.delta_ns), r.component))
    return rows


def inconclusive(b: Report, a: Report) -> list[str]:
    """Why the two sides do not compare (empty when they do): the failed blocking comparability checks
    (other hardware, another config, steps found another way, a side that is one whole capture rather than
    steps, a graph-capture trace: it holds no step, so its "step" against a real one is no speed-up)."""
    return blocking_reasons(comparability(b, a))


def gate_basis(b: Report, a: Report, section: Comparability) -> Literal["steps", "kernels"] | None:
    """What a gate judges: 'steps' when the sides compare; 'kernels' when both are whole captures (no step
    markers) that otherwise compare and share kernels; None when they do not compare."""
    if not blocking_reasons(section):
        return "steps"
    whole = all("whole_capture" in r.steps.source for r in (b, a))
    if whole and not blocking_reasons(section, frozenset({"step_markers"})) and kernel_figure(b, a):
        return "kernels"
    return None


def _samples(report: Report) -> Samples:
    """The report's per-step samples; a report without them (written before they were) has one sample: its
    medians (so its changes are untested)."""
    if report.samples is not None:
        return report.samples
    return Samples(step_ns=[report.steps.step_ns_p50], host_gap_ns=[report.host_gaps.total_ns],
                   exposed_comm_ns=[report.exposed_comm.exposed_ns],
                   class_ns={c.name: [c.attributed_ns] for c in report.classes}, thinned=False)


def noise(b: Report, a: Report, threshold: float = PRACTICAL_THRESHOLD) -> Noise:
    """The step, host gaps, exposed communication and each class tested: the change of the median of the
    per-step samples with its bootstrap interval, judged against ``threshold`` of BEFORE's step median."""
    sb, sa = _samples(b), _samples(a)
    scale = b.steps.step_ns_p50
    classes = {}
    for c in sorted(set(sb.class_ns) | set(sa.class_ns)):
        before = sb.class_ns.get(c, [0] * len(sb.step_ns))
        row = compare(before, sa.class_ns.get(c, [0] * len(sa.step_ns)), scale, threshold).section()
        own = float(np.median(before)) if before else 0.0
        classes[c] = TestedClass(**msgspec.structs.asdict(row), own_fraction=row.delta_ns / own if own else None)
    return Noise(method="bootstrap interval on the difference of medians of per-step samples", resamples=RESAMPLES,
                 practical_threshold=threshold,
                 step=compare(sb.step_ns, sa.step_ns, scale, threshold).section(),
                 host_gaps=compare(sb.host_gap_ns, sa.host_gap_ns, scale, threshold).section(),
                 exposed_comm=compare(sb.exposed_comm_ns, sa.exposed_comm_ns, scale, threshold).section(),
                 classes=classes,
                 regressions=sorted((c for c, v in classes.items() if v.verdict == "regression"),
                                    key=lambda c: -classes[c].delta_ns),
                 improvements=sorted((c for c, v in classes.items() if v.verdict == "improvement"),
                                     key=lambda c: classes[c].delta_ns))


def _floor_delta(b: Report, a: Report) -> DiffFloor:
    fb, fa = b.floor, a.floor
    return DiffFloor(t_opt_ns=_delta(fb and fb.t_opt_ns, fa and fa.t_opt_ns),
                     t_sum_ns=_delta(fb and fb.t_sum_ns, fa and fa.t_sum_ns),
                     residual_ratio=_delta(fb and fb.residual_ratio, fa and fa.residual_ratio),
                     position=_delta(fb and fb.position, fa and fa.position))


def _class_deltas(b: Report, a: Report) -> list[DiffClass]:
    cb, ca = _classes(b), _classes(a)
    out = []
    for n in sorted(set(cb) | set(ca)):
        x, y = cb.get(n), ca.get(n)
        out.append(DiffClass(name=n, communication=(x or y).communication,  # type: ignore[union-attr]
                             measured_ns=_delta(x.measured_ns if x else 0, y.measured_ns if y else 0),
                             attributed_ns=_delta(x.attributed_ns if x else 0, y.attributed_ns if y else 0),
                             budget_ns=(y or x).budget_ns))  # type: ignore[union-attr]
    return out


def diff(before: Side, after: Side, threshold: float = PRACTICAL_THRESHOLD) -> Diff:
    """The ``tracekit.diff/v1`` document of two analysed sides, without its ``gate`` (``tracekit.compare.gate``
    judges it)."""
    b, a = before.typed, after.typed
    comp = comparability(b, a)
    caveats = [f"BEFORE: {c}" for c in b.caveats] + [f"AFTER: {c}" for c in a.caveats]
    caveats += comparability_notes(comp)
    gaps_b, gaps_a = dict(b.host_gaps.by_cause.items()), dict(a.host_gaps.by_cause.items())
    coll_b, coll_a = b.exposed_comm.by_collective, a.exposed_comm.by_collective
    reasons = blocking_reasons(comp)

    def exposed(coll: dict[str, CollectiveComm], name: str) -> int:
        return coll[name].exposed_ns if name in coll else 0

    return Diff(
        before=DiffSide(path=before.path, kind=before.kind, config=b.config.name),  # type: ignore[arg-type]
        after=DiffSide(path=after.path, kind=after.kind, config=a.config.name),  # type: ignore[arg-type]
        step=DiffStep(p50_ns=_delta(b.steps.step_ns_p50, a.steps.step_ns_p50),
                      p99_ns=_delta(b.steps.step_ns_p99, a.steps.step_ns_p99),
                      count=Counts(before=b.steps.count, after=a.steps.count), significant=significant(b, a)),
        conclusive=not reasons,
        inconclusive=reasons,
        comparability=comp,
        gate_basis=gate_basis(b, a, comp),
        noise=noise(b, a, threshold),
        floor=_floor_delta(b, a),
        verdict=Verdicts(before=b.verdict, after=a.verdict),
        changes=changes(b, a),
        classes=_class_deltas(b, a),
        kernels=kernel_rows(b, a),
        kernel_figure=kernel_figure(b, a),
        host_gaps=DiffGaps(total_ns=_delta(b.host_gaps.total_ns, a.host_gaps.total_ns),
                           by_cause={c: _delta(gaps_b.get(c, 0), gaps_a.get(c, 0))
                                     for c in sorted(set(gaps_b) | set(gaps_a))}),
        exposed_comm=DiffComm(exposed_ns=_delta(b.exposed_comm.exposed_ns, a.exposed_comm.exposed_ns),
                              by_collective={c: _delta(exposed(coll_b, c), exposed(coll_a, c))
                                             for c in sorted(set(coll_b) | set(coll_a))}),
        reasons=[f"BEFORE: {r}" for r in b.reasons] + [f"AFTER: {r}" for r in a.reasons],
        caveats=caveats,
    )
