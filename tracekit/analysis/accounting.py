"""Where one step's time went on one device, with every nanosecond owned by exactly one bucket.

The window is cut into elementary segments at every operation boundary. A segment with no operation is
a host gap. A segment where some non-communication operation runs is compute time, shared evenly
among the classes running in it. A segment where only communication runs is exposed communication,
shared among the collectives running in it. So gaps + exposed communication + compute by class
equals the step, and no nanosecond is blamed twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.ops import DeviceOps
from tracekit.analysis.steps import StepWindow


@dataclass
class StepAccount:
    """One step on one device."""

    rank: int
    device_id: int
    window: StepWindow
    gaps: iv.Intervals
    comm_ns: int
    exposed_ns: int
    exposed_by_class: dict[str, int] = field(default_factory=dict)
    attributed_by_class: dict[str, int] = field(default_factory=dict)
    measured_by_class: dict[str, int] = field(default_factory=dict)
    ops_in_window: np.ndarray | None = None  # indices into the device's ops

    @property
    def dur_ns(self) -> int:
        return self.window.dur_ns

    @property
    def gap_ns(self) -> int:
        return iv.length(self.gaps)


def _shares(seg_lo: np.ndarray, seg_hi: np.ndarray, n_seg: int, classes: np.ndarray,
            mask: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Active-operation counts per segment: in total and per class, for the ops selected by ``mask``."""
    total = np.zeros(n_seg + 1, dtype=np.int64)
    np.add.at(total, seg_lo[mask], 1)
    np.add.at(total, seg_hi[mask], -1)
    per_class: dict[str, np.ndarray] = {}
    for cls in np.unique(classes[mask]):
        sel = mask & (classes == cls)
        d = np.zeros(n_seg + 1, dtype=np.int64)
        np.add.at(d, seg_lo[sel], 1)
        np.add.at(d, seg_hi[sel], -1)
        per_class[str(cls)] = np.cumsum(d)[:n_seg]
    return np.cumsum(total)[:n_seg], per_class


def account_step(ops: DeviceOps, window: StepWindow, communication: frozenset[str]) -> StepAccount:
    """Split one step window into gaps, exposed communication and compute by class."""
    lo, hi = window.start_ns, window.end_ns
    # Ops are sorted by start; none that starts before lo - max_dur can reach into the window.
    begin = int(np.searchsorted(ops.start_ns, lo - ops.max_dur_ns, side="left"))
    stop = int(np.searchsorted(ops.start_ns, hi, side="left"))
    candidates = np.arange(begin, stop)
    inside = candidates[ops.end_ns[begin:stop] > lo]
    s = np.clip(ops.start_ns[inside], lo, hi)
    e = np.clip(ops.end_ns[inside], lo, hi)
    cls = ops.cls[inside]
    is_comm = np.isin(cls, list(communication))
    busy = iv.union(s, e)
    gaps = iv.complement(busy, lo, hi)
    comm_union = iv.union(s[is_comm], e[is_comm])
    measured: dict[str, int] = {}
    for c in np.unique(cls):
        measured[str(c)] = int((e[cls == c] - s[cls == c]).sum())

    bounds = np.unique(np.concatenate(([lo, hi], s, e)))
    n_seg = bounds.size - 1
    seg_len = np.diff(bounds)
    seg_lo = np.searchsorted(bounds, s)
    seg_hi = np.searchsorted(bounds, e)
    compute_total, compute_by = _shares(seg_lo, seg_hi, n_seg, cls, ~is_comm)
    comm_total, comm_by = _shares(seg_lo, seg_hi, n_seg, cls, is_comm)

    attributed: dict[str, int] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for c, active in compute_by.items():
            attributed[c] = int(np.round(np.where(compute_total > 0, seg_len * active / compute_total, 0).sum()))
        exposed_seg = (compute_total == 0) & (comm_total > 0)
        exposed_by = {
            c: int(np.round(np.where(exposed_seg, seg_len * active / np.maximum(comm_total, 1), 0).sum()))
            for c, active in comm_by.items()
        }
    exposed_ns = int(seg_len[exposed_seg].sum())
    return StepAccount(
        rank=ops.rank, device_id=ops.device_id, window=window, gaps=gaps, comm_ns=iv.length(comm_union),
        exposed_ns=exposed_ns, exposed_by_class=exposed_by, attributed_by_class=attributed,
        measured_by_class=measured, ops_in_window=inside,
    )
