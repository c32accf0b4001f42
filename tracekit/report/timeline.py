"""What the pictures show of one step: its operations by stream, host gaps by cause, exposed communication.

Shared by the HTML report, the matplotlib plots and the Perfetto export, so that all three draw the same
step with the same colours. Built from ``run_analysis``'s per-device detail; nothing is re-measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.accounting import StepAccount
from tracekit.analysis.analyze import Analysis, DeviceAnalysis
from tracekit.analysis.detail import Detail
from tracekit.analysis.gaps import CAUSES, gap_causes
from tracekit.budgets.classify import MEMOP_CLASSES
from tracekit.schema.report import Report, typed_report

UNKNOWN_CAUSE = "unknown"

# Qualitative palette (Tableau 10 and lighter companions) for compute classes; reds for communication.
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#86bcb6",
            "#8cd17d", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#b6992d", "#499894", "#79706e")
_COMM_PALETTE = ("#e15759", "#c0392b", "#d37295", "#ff7f7f", "#a93226", "#f1948a")
_MEMOP_COLOUR = "#bab0ac"
CAUSE_COLOURS = {"launch_call": "#f5a623", "host_code": "#e8743b", "sync": "#8e6fc1", "dependency": "#3b9ab2",
                 "host_idle": "#9e9e9e", UNKNOWN_CAUSE: "#cccccc"}
EXPOSED_COLOUR = "#d62728"


@dataclass
class GapMark:
    """One host gap: when, its dominant cause, and its time by cause."""

    start_ns: int
    end_ns: int
    cause: str
    by_cause: dict[str, int]


@dataclass
class StepPicture:
    """One step of one device as drawn: operations clipped to the window, gaps and exposed communication."""

    title: str
    rank: int
    device_id: int
    label: str
    start_ns: int
    end_ns: int
    streams: list[int]
    op_start_ns: np.ndarray
    op_end_ns: np.ndarray
    op_stream: np.ndarray
    op_cls: np.ndarray
    op_name: np.ndarray
    op_memop: np.ndarray  # bool
    op_over: np.ndarray  # bool: its class is over budget
    gaps: list[GapMark]
    exposed: iv.Intervals

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def kernel_count(self) -> int:
        return int((~self.op_memop).sum())


def is_memop(cls: np.ndarray, name: np.ndarray) -> np.ndarray:
    """Memory operations among a device's ops (their class and name are both the memop kind)."""
    return np.array([c == n and c in MEMOP_CLASSES for c, n in zip(cls, name, strict=True)], dtype=bool)


def typed_of(analysis: Analysis) -> Report:
    """The analysis's report as its typed contract (converted by the analysis; once here for one built
    without it)."""
    return analysis.typed if analysis.typed is not None else typed_report(analysis.report)


def communication_classes(report: Report) -> frozenset[str]:
    return frozenset(c.name for c in report.classes if c.communication)


def over_budget_classes(report: Report) -> frozenset[str]:
    return frozenset(c.name for c in report.classes if c.over_budget)


def class_colours(names: Iterable[str], communication: frozenset[str]) -> dict[str, str]:
    """A stable colour per class: the same analysis always gets the same colours in every picture."""
    out: dict[str, str] = {}
    compute = comm = 0
    for name in sorted(set(names)):
        if name in MEMOP_CLASSES:
            out[name] = _MEMOP_COLOUR
        elif name in communication:
            out[name] = _COMM_PALETTE[comm % len(_COMM_PALETTE)]
            comm += 1
        else:
            out[name] = _PALETTE[compute % len(_PALETTE)]
            compute += 1
    return out


def analysis_colours(analysis: Analysis) -> dict[str, str]:
    report = typed_of(analysis)
    names = {c.name for c in report.classes}
    for dev in analysis.devices:
        names.update(dev.classes)
    return class_colours(names, communication_classes(report))


def gap_marks(dev: Detail, gaps: iv.Intervals) -> list[GapMark]:
    """Each gap with its causes, by the analysis's own attribution."""
    lo, hi = gaps.starts.tolist(), gaps.ends.tolist()
    if dev.host is None:
        return [GapMark(g0, g1, UNKNOWN_CAUSE, {UNKNOWN_CAUSE: g1 - g0}) for g0, g1 in zip(lo, hi, strict=True)]
    per_gap, _ = gap_causes(gaps, dev.ops, dev.host)
    marks = []
    for g0, g1, row in zip(lo, hi, per_gap.tolist(), strict=True):
        by_cause = dict(zip(CAUSES, row, strict=True))
        marks.append(GapMark(g0, g1, max(CAUSES, key=lambda c: by_cause[c]), by_cause))
    return marks



def median_step(pairs: list[tuple[DeviceAnalysis, StepAccount]]) -> tuple[DeviceAnalysis, StepAccount] | None:
    """The step whose duration is the (lower) median of ``pairs``: a real step, not an interpolation."""
    if not pairs:
        return None
    ordered = sorted(pairs, key=lambda p: (p[1].dur_ns, p[1].rank, p[1].device_id, p[1].window.index))
    return ordered[(len(ordered) - 1) // 2]


def picked_steps(analysis: Analysis) -> list[tuple[str, Detail, StepAccount]]:
    """The median step of all ranks, and the slowest rank's median step when that is another step (each with
    its operations, re-read from the store)."""
    pairs = [(d, a) for d in analysis.devices for a in d.accounts]
    picks = []
    overall = median_step(pairs)
    if overall is not None:
        picks.append(("median step", *overall))
    slowest = typed_of(analysis).steps.slowest_rank
    mine = median_step([p for p in pairs if p[1].rank == slowest])
    if mine is not None and overall is not None and mine[1] is not overall[1]:
        picks.append((f"slowest rank ({slowest}): its median step", *mine))
    return [(title, *analysis.step_detail(dev, acc)) for title, dev, acc in picks]


def step_picture(analysis: Analysis, title: str, dev: Detail, acc: StepAccount) -> StepPicture:
    """Everything drawn for one step, clipped to its window."""
    idx = acc.ops_in_window
    lo, hi = acc.window.start_ns, acc.window.end_ns
    ops = dev.ops
    cls = ops.cls[idx].astype(str)
    over = over_budget_classes(typed_of(analysis))
    stream = ops.stream_id[idx]
    return StepPicture(
        title=title, rank=dev.ops.rank, device_id=dev.ops.device_id, label=acc.window.label, start_ns=lo, end_ns=hi,
        streams=sorted(int(s) for s in np.unique(stream)),
        op_start_ns=np.clip(ops.start_ns[idx], lo, hi), op_end_ns=np.clip(ops.end_ns[idx], lo, hi),
        op_stream=stream, op_cls=cls, op_name=ops.name[idx].astype(str), op_memop=is_memop(cls, ops.name[idx]),
        op_over=np.isin(cls, list(over)), gaps=gap_marks(dev, acc.gaps),
        exposed=acc.exposed,
    )


def pictures(analysis: Analysis) -> list[StepPicture]:
    """The steps every picture shows: the median step and the slowest rank's median step."""
    return [step_picture(analysis, title, dev, acc) for title, dev, acc in picked_steps(analysis)]
