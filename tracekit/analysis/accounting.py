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

A class's share of a segment is ``length x its ops / all ops sharing it``: summed exactly, as integer
numerators per denominator, and apportioned to whole nanoseconds only at the end. So a step may be
accounted in time pieces (``account_piece``, each a bounded read of a long step or a whole capture) and
the pieces merged (``merge``) into the very account of one read: lengths add, intervals that touch at a
piece's edge join, and the numerators add.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.ops import DeviceOps, distinct
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


@dataclass
class Piece:
    """The account of one time piece [a, b) of a step, to be merged with the step's other pieces. Classes are
    codes into the ops' ``class_names``; ``owned`` are the ops the piece counts once for the step (those
    starting in it; the first piece also those starting before the step), ``ops_in_window`` every op
    overlapping the piece (indices into the ops it was accounted on)."""

    a: int
    b: int
    gaps: iv.Intervals
    exposed: iv.Intervals
    comm_ns: int
    exposed_under_memops_ns: int
    measured: dict[int, int]  # class code -> clipped-to-step ns of its owned ops (every class present)
    exposed_num: dict[int, dict[int, int]]  # communication class -> {denominator: numerator} of its share
    attributed_num: dict[int, dict[int, int]]  # other classes, likewise
    attributed_ns: int  # compute time of the piece (what attributed_num's shares sum to)
    owned: np.ndarray
    ops_in_window: np.ndarray
    gap_ns: int = 0
    exposed_ns: int = 0

    def __post_init__(self) -> None:
        self.gap_ns, self.exposed_ns = iv.length(self.gaps), iv.length(self.exposed)

    def slim(self) -> Piece:
        """This piece's sums alone (what ``merge`` needs without detail), its intervals and ops dropped."""
        none = np.zeros(0, dtype=np.int64)
        out = replace(self, gaps=iv.EMPTY, exposed=iv.EMPTY, owned=none, ops_in_window=none)
        out.gap_ns, out.exposed_ns = self.gap_ns, self.exposed_ns
        return out


def _count(seg_lo: np.ndarray, seg_hi: np.ndarray, n_seg: int) -> np.ndarray:
    """Per segment, how many of the ops (each covering segments [seg_lo, seg_hi)) cover it."""
    delta = np.bincount(seg_lo, minlength=n_seg + 1) - np.bincount(seg_hi, minlength=n_seg + 1)
    return np.cumsum(delta)[:n_seg]


def _numerators(seg_lo: np.ndarray, seg_hi: np.ndarray, group: np.ndarray, n_groups: int, seg_len: np.ndarray,
                selected: np.ndarray, denominator: np.ndarray) -> list[dict[int, int]]:
    """Per op group 0..n_groups-1 (``group``: each op's), {denominator: numerator}: over the ``selected``
    segments with that denominator, the sum of length x the group's ops covering the segment, in integers (the
    group's share is the sum of numerator / denominator; no zero numerator is kept). Summed per op: the
    selected length of one denominator that each op covers is a difference of two prefix sums, one pass per
    distinct denominator (a few: how many ops run at once), never a (group x segment) matrix."""
    out: list[dict[int, int]] = [{} for _ in range(n_groups)]
    if group.size == 0 or not selected.any():
        return out
    order = np.argsort(group, kind="stable")
    in_order = group[order]
    first = np.flatnonzero(np.concatenate(([True], in_order[1:] != in_order[:-1])))
    present = in_order[first].tolist()
    lo, hi = seg_lo[order], seg_hi[order]
    prefix = np.zeros(seg_len.size + 1, dtype=np.int64)
    for d in distinct(denominator[selected]).tolist():
        np.cumsum(np.where(selected & (denominator == d), seg_len, 0), out=prefix[1:])
        for g, n in zip(present, np.add.reduceat(prefix[hi] - prefix[lo], first).tolist(), strict=True):
            if n:
                out[g][int(d)] = int(n)
    return out


def _class_codes(codes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The class codes present among ``codes`` (sorted), and each op's dense index among them."""
    seen = np.bincount(codes, minlength=n_classes) > 0
    present = np.flatnonzero(seen)
    dense = np.cumsum(seen) - 1
    return present, dense[codes]


def account_piece(ops: DeviceOps, window: StepWindow, communication: frozenset[str], a: int, b: int) -> Piece:
    """Account the piece [a, b) of step ``window`` on ``ops`` (sorted, holding every op overlapping it)."""
    lo, hi = window.start_ns, window.end_ns
    # Ops are sorted by start; none that starts before a - max_dur can reach into the piece.
    begin = int(np.searchsorted(ops.start_ns, a - ops.max_dur_ns, side="left"))
    stop = int(np.searchsorted(ops.start_ns, b, side="left"))
    inside = begin + np.flatnonzero(ops.end_ns[begin:stop] > a)
    # The ops it counts once for the step: the first piece (a = the step's start) those overlapping it, every
    # later one those starting in it.
    owned = inside if a <= lo else np.arange(int(np.searchsorted(ops.start_ns, a, side="left")), stop)
    s = np.clip(ops.start_ns[inside], a, b)
    e = np.clip(ops.end_ns[inside], a, b)
    n_classes = len(ops.class_names)
    present, local = _class_codes(ops.cls_code[inside], n_classes)
    names = [str(ops.class_names[c]) for c in present.tolist()]
    comm_class = np.array([n in communication for n in names], dtype=bool)
    memop_class = np.array([n in MEMOP_CLASSES and n not in communication for n in names], dtype=bool)
    is_comm = comm_class[local]
    busy = iv.union(s, e)
    gaps = iv.complement(busy, a, b)
    if window.excluded:  # waits on work outside the trace: not the step's time (tracekit.analysis.waits)
        gaps = iv.difference(gaps, iv.union(np.array([x for x, _ in window.excluded], dtype=np.int64),
                                            np.array([y for _, y in window.excluded], dtype=np.int64)))
    comm_union = iv.union(s[is_comm], e[is_comm])
    is_kernel = ~is_comm & ~memop_class[local]
    exposed = iv.difference(comm_union, iv.union(s[is_kernel], e[is_kernel]))
    owned_cls = ops.cls_code[owned]
    owned_ns = np.clip(ops.end_ns[owned], lo, hi) - np.clip(ops.start_ns[owned], lo, hi)
    measured_ns = np.bincount(owned_cls, weights=owned_ns, minlength=n_classes)
    measured = {c: int(measured_ns[c]) for c in np.flatnonzero(np.bincount(owned_cls, minlength=n_classes)).tolist()}

    bounds = distinct(np.concatenate(([a, b], s, e)))
    n_seg = bounds.size - 1
    seg_len = np.diff(bounds)
    seg_lo = np.searchsorted(bounds, s)
    seg_hi = np.searchsorted(bounds, e)
    is_memop = ~is_comm & ~is_kernel
    kernel_total = _count(seg_lo[is_kernel], seg_hi[is_kernel], n_seg)
    other_total = kernel_total + _count(seg_lo[is_memop], seg_hi[is_memop], n_seg)  # kernels and memory ops
    comm_total = _count(seg_lo[is_comm], seg_hi[is_comm], n_seg)
    exposed_seg = (kernel_total == 0) & (comm_total > 0)
    owned_seg = ~exposed_seg & (other_total > 0)  # compute: shared among the non-communication classes
    code = present.tolist()  # class code per group
    exposed_num = _numerators(seg_lo[is_comm], seg_hi[is_comm], local[is_comm], len(names), seg_len, exposed_seg,
                              comm_total)
    attributed_num = _numerators(seg_lo[~is_comm], seg_hi[~is_comm], local[~is_comm], len(names), seg_len,
                                 owned_seg, other_total)
    return Piece(
        a=a, b=b, gaps=gaps, exposed=exposed, comm_ns=iv.length(comm_union),
        exposed_under_memops_ns=int(seg_len[exposed_seg & (other_total > kernel_total)].sum()),
        measured=measured, exposed_num={code[g]: exposed_num[g] for g in np.flatnonzero(comm_class).tolist()},
        attributed_num={code[g]: attributed_num[g] for g in np.flatnonzero(~comm_class).tolist()},
        attributed_ns=int(seg_len[owned_seg].sum()), owned=owned, ops_in_window=inside,
    )


def _joined(parts: list[iv.Intervals]) -> iv.Intervals:
    """Interval sets of consecutive pieces as one (sets touching at a piece's edge join)."""
    if len(parts) == 1:
        return parts[0]
    return iv.union(np.concatenate([p.starts for p in parts]), np.concatenate([p.ends for p in parts]))


def _added(parts: list[dict[int, dict[int, int]]]) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for part in parts:
        for c, by_d in part.items():
            mine = out.setdefault(c, {})
            for d, n in by_d.items():
                mine[d] = mine.get(d, 0) + n
    return out


def merge(ops: DeviceOps, window: StepWindow, pieces: list[Piece], communication: frozenset[str],
          detail: bool = True) -> StepAccount:
    """The step's account from its pieces (consecutive, covering the window). With ``detail`` it keeps its
    gaps and exposed intervals, and for a one-piece step its ops (indices into ``ops``)."""
    measured: dict[int, int] = {}
    for p in pieces:
        for c, ns in p.measured.items():
            measured[c] = measured.get(c, 0) + ns
    exposed_num = _added([p.exposed_num for p in pieces])
    attributed_num = _added([p.attributed_num for p in pieces])
    exposed_ns = sum(p.exposed_ns for p in pieces)
    present = sorted(measured)  # the classes of the step's ops, each op owned by one piece
    label = {c: str(ops.class_names[c]) for c in present}
    comm = [c for c in present if label[c] in communication]
    other = [c for c in present if label[c] not in communication]
    return StepAccount(
        rank=ops.rank, device_id=ops.device_id, window=window,
        gaps=_joined([p.gaps for p in pieces]) if detail else None,
        exposed=_joined([p.exposed for p in pieces]) if detail else None,
        gap_ns=sum(p.gap_ns for p in pieces), comm_ns=sum(p.comm_ns for p in pieces),
        exposed_ns=exposed_ns,
        exposed_by_class=_apportion([label[c] for c in comm], [exposed_num.get(c, {}) for c in comm], exposed_ns),
        attributed_by_class=_apportion([label[c] for c in other], [attributed_num.get(c, {}) for c in other],
                                       sum(p.attributed_ns for p in pieces)),
        measured_by_class={label[c]: measured[c] for c in present},
        ops_in_window=pieces[0].ops_in_window if detail and len(pieces) == 1 else None,
        exposed_under_memops_ns=sum(p.exposed_under_memops_ns for p in pieces),
    )


def account_step(ops: DeviceOps, window: StepWindow, communication: frozenset[str]) -> StepAccount:
    """Split one step window into gaps, exposed communication and compute by class (in one piece)."""
    piece = account_piece(ops, window, communication, window.start_ns, window.end_ns)
    return merge(ops, window, [piece], communication)


def _apportion(names: list[str], numerators: list[dict[int, int]], total: int) -> dict[str, int]:
    """Integer parts of ``total`` in proportion to the shares (each the sum of numerator / denominator, and
    together exactly ``total``): floors, then the remainder one by one to the largest fractions (ties by name
    order). Exact: the shares are rationals, never rounded."""
    if not names:
        return {}
    shares = [sum((Fraction(n, d) for d, n in by_d.items()), Fraction(0)) for by_d in numerators]
    floors = [s.numerator // s.denominator for s in shares]
    left = total - sum(floors)
    if left > 0:
        order = sorted(range(len(names)), key=lambda k: -(shares[k] - floors[k]))  # stable: ties by name order
        for k in order[:left]:
            floors[k] += 1
    return dict(zip(names, floors, strict=True))
