"""Where one step's time went on one device, with every nanosecond owned by exactly one bucket.

The window is cut into elementary segments at every operation boundary. A segment with no operation is
a host gap. A segment where some non-communication operation runs is compute time, shared evenly
among the classes running in it. A segment where only communication runs is exposed communication,
shared among the collectives running in it. The exposed time itself is the interval difference
"communication minus everything else", kept as intervals for pictures and exports. So gaps + exposed
communication + compute by class equals the step, and no nanosecond is blamed twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.ops import DeviceOps
from tracekit.analysis.steps import StepWindow


@dataclass
class StepAccount:
    """One step on one device. A summary (kept for every step) has no ``gaps`` intervals and no
    ``ops_in_window``: those are per-operation detail, re-read for the few steps that are drawn."""

    rank: int
    device_id: int
    window: StepWindow
    gaps: iv.Intervals | None
    exposed: iv.Intervals | None  # where only communication runs: the one definition of exposed time
    gap_ns: int
    comm_ns: int
    exposed_ns: int
    exposed_by_class: dict[str, int] = field(default_factory=dict)
    attributed_by_class: dict[str, int] = field(default_factory=dict)
    measured_by_class: dict[str, int] = field(default_factory=dict)
    ops_in_window: np.ndarray | None = None  # indices into the ops it was accounted on

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
    is_comm = comm_class[local]
    busy = iv.union(s, e)
    gaps = iv.complement(busy, lo, hi)
    comm_union = iv.union(s[is_comm], e[is_comm])
    exposed = iv.difference(comm_union, iv.union(s[~is_comm], e[~is_comm]))
    measured_ns = np.bincount(local, weights=e - s, minlength=len(names)) if len(names) else np.zeros(0)
    measured = {n: int(measured_ns[k]) for k, n in enumerate(names)}

    bounds = np.unique(np.concatenate(([lo, hi], s, e)))
    n_seg = bounds.size - 1
    seg_len = np.diff(bounds)
    seg_lo = np.searchsorted(bounds, s)
    seg_hi = np.searchsorted(bounds, e)
    active = _active(seg_lo, seg_hi, n_seg, local, len(names))
    compute_total = active[~comm_class].sum(axis=0)
    comm_total = active[comm_class].sum(axis=0)

    attributed: dict[str, int] = {}
    exposed_by: dict[str, int] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        exposed_seg = (compute_total == 0) & (comm_total > 0)
        for k, n in enumerate(names):
            if comm_class[k]:
                share = np.where(exposed_seg, seg_len * active[k] / np.maximum(comm_total, 1), 0)
                exposed_by[n] = int(np.round(share.sum()))
            else:
                attributed[n] = int(np.round(np.where(compute_total > 0, seg_len * active[k] / compute_total, 0).sum()))
    return StepAccount(
        rank=ops.rank, device_id=ops.device_id, window=window, gaps=gaps, exposed=exposed, gap_ns=iv.length(gaps),
        comm_ns=iv.length(comm_union),
        exposed_ns=iv.length(exposed), exposed_by_class=exposed_by, attributed_by_class=attributed,
        measured_by_class=measured, ops_in_window=inside,
    )
