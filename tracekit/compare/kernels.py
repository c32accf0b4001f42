"""The kernel-level part of a diff: each kernel (by name) before and after, and the work-normalised kernel
figure that gates captures without step markers.

The figure: over the kernels both sides' kernel tables hold, BEFORE's launches at AFTER's mean time per
launch against BEFORE's own time, ``Σ n_b·mean_a / Σ n_b·mean_b − 1``. It does not depend on how long
either capture ran (the whole-capture "step" does), only on how fast each kernel ran.
"""

from __future__ import annotations

from tracekit.schema.diff import Counts, DiffKernel, KernelFigure, MeanChange, StepDelta
from tracekit.schema.report import KernelRow, Report

MAX_ROWS = 20  # kernels in the diff's kernel-level section, largest change per step first


def _table(report: Report) -> dict[str, KernelRow]:
    return {k.name: k for k in report.kernels}


def kernel_rows(b: Report, a: Report) -> list[DiffKernel]:
    """Per kernel in either side's table: class, launches, time per step and mean time per launch on both
    sides; the largest change per step first (``MAX_ROWS``)."""
    kb, ka = _table(b), _table(a)
    rows = []
    for name in set(kb) | set(ka):
        x, y = kb.get(name), ka.get(name)
        before, after = x.per_step_ns if x else 0, y.per_step_ns if y else 0
        mb, ma = x and x.mean_ns, y and y.mean_ns
        rows.append(DiffKernel(name=name, cls=(x.cls if x else None) or (y.cls if y else None),
                               launches=Counts(before=x.launches if x else 0, after=y.launches if y else 0),
                               per_step_ns=StepDelta(before=before, after=after, delta=after - before),
                               mean_ns=MeanChange(before=mb, after=ma,
                                                  delta_fraction=(ma / mb - 1) if mb and ma is not None else None)))
    rows.sort(key=lambda r: (-abs(r.per_step_ns.delta), r.name))
    return rows[:MAX_ROWS]


def kernel_figure(b: Report, a: Report, cls: str | None = None) -> KernelFigure | None:
    """BEFORE's launches at AFTER's per-launch times against BEFORE's time, over the kernels both sides hold
    (of class ``cls`` when given); None when they share no kernel."""
    kb, ka = _table(b), _table(a)
    both = [n for n in kb if n in ka and kb[n].launches and ka[n].launches and (cls is None or kb[n].cls == cls)]
    if not both:
        return None
    before = sum(kb[n].total_ns for n in both)
    after = sum(kb[n].launches * ka[n].total_ns / ka[n].launches for n in both)
    all_before = sum(k.total_ns for k in kb.values() if cls is None or k.cls == cls)
    return KernelFigure(kernels=len(both), before_ns=before, after_ns=int(round(after)),
                        delta_fraction=after / before - 1 if before else None,
                        coverage=before / all_before if all_before else None)
