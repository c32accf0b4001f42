"""Clocks that agree: one offset per capture file, estimated from the ends of matched collectives.

Every file is one clock (its host's; the devices of one file share it). A collective ends at nearly the same
instant on every member: the last data arrive everywhere at once, whoever arrived late. So for a file ``d``
and the reference file (the lowest rank), each matched instance gives ``delta = end_d - end_ref``, and the
offset is the value most instances agree on: each delta stands for the interval ``delta ± tol`` (``tol`` =
the larger of 50 µs and 2 % of the shorter member), the offset lies where most intervals overlap, and is
the median of the deltas of those intervals (rounded to the ns). Instances outside that consensus (a
dropped or extra collective shifting the order, as in sampled traces) do not pull it. Files that share no
instance with the reference are estimated against an already estimated one, in rounds.

The residual is the median distance of those deltas from the offset. Fewer than three agreeing instances:
the offset cannot be estimated; it stays 0 (or the difference of the files' wall-clock bases where both
record one) and the report says so. An estimate that would make two hosts' wall clocks disagree by more
than a second is not a clock: the file comes from another run, and it is left out of the comparison.
Aligned time is local time minus the offset: ``t_ref = t_d - offset_d``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracekit.analysis.collectives import INCONSISTENT, MATCHED, Matching
from tracekit.analysis.commlog import CollectiveLog

TOL_NS = 50_000
TOL_SHARE = 0.02
MIN_COLLECTIVES = 3
MAX_SKEW_NS = 1_000_000_000


@dataclass
class ClockDomain:
    """One file's clock: its offset to the reference file's, and how it was found."""

    rank: int  # the file's lowest rank
    participants: list[int]
    host: str | None
    wall_base_ns: int | None  # local time + this = wall-clock ns, where the file says
    offset_ns: int = 0
    estimated: bool = False
    residual_ns: int | None = None
    collectives: int = 0  # instances in the consensus
    note: str | None = None
    excluded: bool = False  # another run: left out of every cross-rank comparison
    ranks: list[int] = field(default_factory=list)  # every rank of the file (one per process in an nsys export)


def median_ns(values: np.ndarray | list[int]) -> int:
    """The median of integer ns, exact (float64 cannot hold epoch ns to the ns): the middle value, or the mean
    of the two middle values rounded half to even."""
    a = np.sort(np.asarray(values, dtype=np.int64))
    n = a.size
    if n == 0:
        raise ValueError("median of no values")
    if n % 2:
        return int(a[n // 2])
    q, r = divmod(int(a[n // 2 - 1]) + int(a[n // 2]), 2)
    return q + (r and q % 2)


def medians_without_each(values: np.ndarray) -> np.ndarray:
    """For each element, the median (as ``median_ns``) of all the others: linear after one sort."""
    n = values.size
    order = np.argsort(values, kind="stable")
    srt = values[order].astype(np.int64)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    m = n - 1  # the others
    if m < 1:
        return np.zeros(n, np.int64)

    def at(j: np.ndarray) -> np.ndarray:  # the j-th smallest of the others
        return srt[np.where(j < rank, j, j + 1)]

    if m % 2:
        return at(np.full(n, m // 2))
    total = at(np.full(n, m // 2 - 1)) + at(np.full(n, m // 2))
    q, r = np.divmod(total, 2)
    return q + (r & (q % 2))


def tolerance(dur_a: np.ndarray, dur_b: np.ndarray) -> np.ndarray:
    """How far two ends of one instance may lie apart and still be the same instant."""
    return np.maximum(TOL_NS, np.round(TOL_SHARE * np.minimum(dur_a, dur_b))).astype(np.int64)


def consensus(delta: np.ndarray, tol: np.ndarray) -> tuple[int, np.ndarray]:
    """The offset most ``delta ± tol`` intervals contain (median of their deltas) and which intervals do."""
    lo, hi = delta - tol, delta + tol
    points = np.concatenate((lo, hi))
    step = np.concatenate((np.ones(lo.size, np.int64), -np.ones(hi.size, np.int64)))
    order = np.lexsort((-step, points))  # at equal points, openings before closings: touching counts
    cover = np.cumsum(step[order])
    best = int(np.argmax(cover))
    at = points[order][best]
    inliers = (lo <= at) & (hi >= at)
    return median_ns(delta[inliers]), inliers


def _instance_ends(logs: list[CollectiveLog], matching: Matching, domain_of: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(instance, domain, end, duration) per matched instance and file, sorted; one member per file (the
    devices of one file share its clock)."""
    m = matching.members(MATCHED)
    part, rec, inst = matching.member_part[m], matching.member_rec[m], matching.member_inst[m]
    dom = domain_of[part]
    end = np.array([logs[p].end_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    start = np.array([logs[p].start_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    order = np.lexsort((part, dom, inst))
    inst, dom, end, dur = inst[order], dom[order], end[order], (end - start)[order]
    first = np.ones(inst.size, bool)
    first[1:] = (inst[1:] != inst[:-1]) | (dom[1:] != dom[:-1])
    return inst[first], dom[first], end[first], dur[first]


def estimate(logs: list[CollectiveLog], matching: Matching, domains: list[ClockDomain]) -> None:
    """Set each domain's offset (in place) from the matched instances' ends, in rounds from the reference."""
    domain_of = np.zeros(len(logs), np.int64)
    for d, dom in enumerate(domains):
        domain_of[dom.participants] = d
    inst, dom, end, dur = _instance_ends(logs, matching, domain_of)
    known = {0: 0} if domains else {}
    if domains:
        domains[0].estimated = True
        domains[0].note = "reference clock"
        domains[0].collectives = int(np.unique(inst[dom == 0]).size)
    while True:
        is_known = np.isin(dom, list(known))
        anchor_end = np.full(matching.n_instances, -1, np.int64)
        anchor_dur = np.zeros(matching.n_instances, np.int64)
        rows = np.flatnonzero(is_known)
        firsts = rows[np.unique(inst[rows], return_index=True)[1]]  # lowest known file per instance
        anchor_end[inst[firsts]] = end[firsts] - np.array([known[d] for d in dom[firsts].tolist()], np.int64)
        anchor_dur[inst[firsts]] = dur[firsts]
        found = {}
        for d in sorted(set(dom[~is_known].tolist())):
            sel = np.flatnonzero((dom == d) & (anchor_end[inst] >= 0))
            if sel.size == 0:
                continue
            delta = end[sel] - anchor_end[inst[sel]]
            offset, inliers = consensus(delta, tolerance(dur[sel], anchor_dur[inst[sel]]))
            dom_d = domains[d]
            dom_d.collectives = int(inliers.sum())
            if dom_d.collectives >= MIN_COLLECTIVES:
                dom_d.offset_ns, dom_d.estimated = offset, True
                dom_d.residual_ns = median_ns(np.abs(delta[inliers] - offset))
                found[d] = offset
        if not found:
            break
        known |= found
    _fallbacks(domains)


def _other_runs(domains: list[ClockDomain]) -> None:
    """Exclude the estimated files whose wall clock would disagree by more than ``MAX_SKEW_NS`` with the
    majority of the job's files; if the reference is one of them, the majority's lowest rank becomes it."""
    walls = [(d, dom.offset_ns + dom.wall_base_ns) for d, dom in enumerate(domains)
             if dom.estimated and dom.wall_base_ns is not None]
    if len(walls) < 2:
        return
    skew = np.array([w for _, w in walls], np.int64)
    agree = (np.abs(skew[:, None] - skew[None, :]) <= MAX_SKEW_NS).sum(axis=1)
    centre = skew[int(np.argmax(agree))]
    keep = [d for d, w in walls if abs(w - centre) <= MAX_SKEW_NS]
    ref = domains[keep[0]]
    for d, w in walls:
        dom = domains[d]
        if d in keep:
            continue
        dom.excluded, dom.estimated = True, False
        dom.note = (f"its collectives line up only if its clock were {(w - centre) / 1e9:+.3f} s off rank "
                    f"{ref.rank}'s: a file from another run? left out of the cross-rank comparison")
    if keep[0] != 0:  # the old reference was from another run: offsets relative to the new one
        shift = ref.offset_ns
        for dom in domains:
            if dom.estimated:
                dom.offset_ns -= shift
        ref.note, ref.residual_ns = "reference clock", None


def _fallbacks(domains: list[ClockDomain]) -> None:
    """Estimates no clock error explains, and files whose offset could not be estimated."""
    _other_runs(domains)
    ref = next((dom for dom in domains if dom.estimated and dom.note == "reference clock"), None)
    for dom in domains:
        if dom.estimated or dom.excluded:
            continue
        both_wall = ref is not None and ref.wall_base_ns is not None and dom.wall_base_ns is not None
        agreeing = f"{dom.collectives} collective{' agrees' if dom.collectives == 1 else 's agree'}"
        if both_wall:
            dom.offset_ns = ref.wall_base_ns - dom.wall_base_ns
            dom.note = (f"cannot be estimated ({agreeing} on one offset, fewer than {MIN_COLLECTIVES}): the files' "
                        "wall clocks are taken as they are")
        else:
            dom.note = f"cannot be estimated ({agreeing} on one offset, fewer than {MIN_COLLECTIVES}): taken as 0"


def check(logs: list[CollectiveLog], matching: Matching, offset_of: np.ndarray) -> None:
    """Mark matched instances whose members' aligned ends spread beyond the tolerance as inconsistent."""
    m = matching.members(MATCHED)
    if m.size == 0:
        return
    part, rec, inst = matching.member_part[m], matching.member_rec[m], matching.member_inst[m]
    end = np.array([logs[p].end_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    start = np.array([logs[p].start_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    aligned = end - offset_of[part]
    order = np.argsort(inst, kind="stable")
    inst, aligned, dur = inst[order], aligned[order], (end - start)[order]
    heads = np.flatnonzero(np.concatenate(([True], inst[1:] != inst[:-1])))
    spread = np.maximum.reduceat(aligned, heads) - np.minimum.reduceat(aligned, heads)
    shortest = np.minimum.reduceat(dur, heads)
    bad = spread > tolerance(shortest, shortest)
    matching.status[inst[heads[bad]]] = INCONSISTENT
