"""Where one step's time went on one device, with every nanosecond owned by exactly one bucket.

The window is cut into elementary segments at every operation boundary. A segment with no operation is
a host gap. A segment where communication runs and no compute kernel does is exposed communication,
shared among the collectives running in it: memory copies and sets do not hide communication (as in
HTA's communication/computation overlap), and the part of the exposed time under a memory operation is
kept apart (``exposed_under_memops_ns``) for the other definition. Every other segment with an
operation is compute time, shared evenly among the non-communication classes running in it (memory
operations included). The exposed time itself is one interval difference, communication minus compute
kernels, kept as intervals for pictures and exports. So gaps + exposed communication + compute by class
equals the step, and no nanosecond is blamed twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.ops import DeviceOps
from tracekit.analysis.steps import StepWindow
from tracekit.budgets.classify import MEMOP_CLASSES


@dataclass
class StepAccount:
    """One step on one device. A summary (kept for every step) has no ``gaps`` intervals and no
    ``ops_in_window``: those are per-operation detail, re-read for the few steps that are drawn."""

    rank: int
    device_id: int
    window: StepWindow
    gaps: iv.Intervals | None
    exposed: iv.Intervals | None  # communication with no compute kernel: the one definition of exposed time
    gap_ns: int
    comm_ns: int  # union of the communication kernels
    exposed_ns: int  # communication with no compute kernel running
    exposed_by_class: dict[str, int] = field(default_factory=dict)
    attributed_by_class: dict[str, int] = field(default_factory=dict)
    measured_by_class: dict[str, int] = field(default_factory=dict)
    ops_in_window: np.ndarray | None = None  # indices into the ops it was accounted on
    exposed_under_memops_ns: int = 0  # of exposed_ns: time a memory copy or set ran beside the communication

    @property
    def dur_ns(self) -> int:
        return self.window.dur_ns

    def summary(self) -> StepAccount:
        """This account without its per-operation detail."""
        return replace(self, gaps=None, exposed=None, ops_in_window=None)


def _active(seg_lo: np.ndarray, seg_hi: np.ndarray, n_seg: int, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Active-operation counts per (group, segment): row g counts the ops of group g covering each segment."""
    width = n_seg + 1
    delta = (np.bincount(group * width + seg_lo, minlength=n_groups * width)
             - np.bincount(group * width + seg_hi, minlength=n_groups * width))
    return np.cumsum(delta.reshape(n_groups, width), axis=1)[:, :n_seg]


def account_step(ops: DeviceOps, window: StepWindow, communication: frozenset[str]) -> StepAccount:
    """Split one step window into gaps, exposed communication and compute by class."""
    lo, hi = window.start_ns, window.end_ns
    # Ops are sorted by start; none that starts before lo - max_dur can reach into the window.
    begin = int(np.searchsorted(ops.start_ns, lo - ops.max_dur_ns, side="left"))
    stop = int(np.searchsorted(ops.start_ns, hi, side="left"))
    inside = begin + np.flatnonzero(ops.end_ns[begin:stop] > lo)
    s = np.clip(ops.start_ns[inside], lo, hi)
    e = np.clip(ops.end_ns[inside], lo, hi)
    # Classes present in the step, as dense local codes 0..k-1 (integer work, no string compares).
    present, local = np.unique(ops.cls_code[inside], return_inverse=True)
    names = [str(ops.class_names[c]) for c in present]
    comm_class = np.array([n in communication for n in names], dtype=bool)
    memop_class = np.array([n in MEMOP_CLASSES and n not in communication for n in names], dtype=bool)
    is_comm = comm_class[local]
    busy = iv.union(s, e)
    gaps = iv.complement(busy, lo, hi)
    if window.excluded:  # waits on work outside the trace: not the step's time (tracekit.analysis.waits)
        gaps = iv.difference(gaps, iv.union(np.array([a for a, _ in window.excluded], dtype=np.int64),
                                            np.array([b for _, b in window.excluded], dtype=np.int64)))
    comm_union = iv.union(s[is_comm], e[is_comm])
    is_kernel = ~is_comm & ~memop_class[local]
    exposed = iv.difference(comm_union, iv.union(s[is_kernel], e[is_kernel]))
    measured_ns = np.bincount(local, weights=e - s, minlength=len(names)) if len(names) else np.zeros(0)
    measured = {n: int(measured_ns[k]) for k, n in enumerate(names)}

    bounds = np.unique(np.concatenate(([lo, hi], s, e)))
    n_seg = bounds.size - 1
    seg_len = np.diff(bounds)
    seg_lo = np.searchsorted(bounds, s)
    seg_hi = np.searchsorted(bounds, e)
    active = _active(seg_lo, seg_hi, n_seg, local, len(names))
    other_total = active[~comm_class].sum(axis=0)  # compute kernels and memory operations
    kernel_total = active[~comm_class & ~memop_class].sum(axis=0)
    comm_total = active[comm_class].sum(axis=0)

    exposed_seg = (kernel_total == 0) & (comm_total > 0)
    owned_seg = ~exposed_seg & (other_total > 0)  # compute: shared among the non-communication classes
    exposed_ns = iv.length(exposed)  # = seg_len[exposed_seg].sum(): the same set, as intervals
    shares = (seg_len * active / np.maximum(np.where(comm_class[:, None], comm_total, other_total), 1)
              ) if len(names) else np.zeros((0, n_seg))
    exposed_by = _apportion([n for k, n in enumerate(names) if comm_class[k]],
                            shares[comm_class][:, exposed_seg].sum(axis=1), exposed_ns)
    attributed = _apportion([n for k, n in enumerate(names) if not comm_class[k]],
                            shares[~comm_class][:, owned_seg].sum(axis=1), int(seg_len[owned_seg].sum()))
    return StepAccount(
        rank=ops.rank, device_id=ops.device_id, window=window, gaps=gaps, exposed=exposed, gap_ns=iv.length(gaps),
        comm_ns=iv.length(comm_union),
        exposed_ns=exposed_ns, exposed_by_class=exposed_by, attributed_by_class=attributed,
        measured_by_class=measured, ops_in_window=inside,
        exposed_under_memops_ns=int(seg_len[exposed_seg & (other_total > kernel_total)].sum()),
    )


def _apportion(names: list[str], shares: np.ndarray, total: int) -> dict[str, int]:
    """Integer parts of ``total`` in proportion to ``shares`` (which sum to it up to float error), summing
    to it exactly: floors, then the remainder one by one to the largest fractions (ties by name order)."""
    if not names:
        return {}
    floors = np.floor(shares).astype(np.int64)
    left = total - int(floors.sum())
    if left > 0:
        order = np.argsort(-(shares - floors), kind="stable")
        floors[order[:left]] += 1
    return {n: int(v) for n, v in zip(names, floors, strict=True)}
