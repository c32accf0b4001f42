"""Interval algebra on int64 nanosecond intervals: the one module behind host gaps, exposed
communication and overlap.

An ``Intervals`` value is a normalised set: sorted, disjoint, non-empty, half-open ``[start, end)``
intervals held as two int64 numpy arrays. Every operation is vectorised (sort + cumulative max),
so a million kernels take milliseconds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

_EMPTY = np.empty(0, dtype=np.int64)


class Intervals(NamedTuple):
    """A normalised set of half-open intervals [starts[i], ends[i])."""

    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:  # number of disjoint intervals
        return int(self.starts.size)


EMPTY = Intervals(_EMPTY, _EMPTY)


def union(starts: np.ndarray | list[int], ends: np.ndarray | list[int]) -> Intervals:
    """Merge possibly overlapping intervals into a normalised set (empty intervals are dropped)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # A new interval begins where its start lies beyond everything seen so far.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    group_starts = s[new]
    last_of_group = np.flatnonzero(np.append(new[1:], True))
    return Intervals(group_starts, reach[last_of_group])


def length(iv: Intervals) -> int:
    """Total covered nanoseconds."""
    return int((iv.ends - iv.starts).sum())


def clip(iv: Intervals, lo: int, hi: int) -> Intervals:
    """The part of ``iv`` inside [lo, hi)."""
    if hi <= lo or len(iv) == 0:
        return EMPTY
    s = np.maximum(iv.starts, lo)
    e = np.minimum(iv.ends, hi)
    keep = e > s
    return Intervals(s[keep], e[keep])


def complement(iv: Intervals, lo: int, hi: int) -> Intervals:
    """The parts of [lo, hi) that ``iv`` does not cover (the gaps of a busy set in a window)."""
    if hi <= lo:
        return EMPTY
    c = clip(iv, lo, hi)
    starts = np.concatenate(([lo], c.ends))
    ends = np.concatenate((c.starts, [hi]))
    keep = ends > starts
    return Intervals(starts[keep].astype(np.int64), ends[keep].astype(np.int64))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Points covered by both ``a`` and ``b``."""
    if len(a) == 0 or len(b) == 0:
        return EMPTY
    # For each interval of a, the candidate intervals of b are those overlapping it: a sweep by searchsorted.
    lo_idx = np.searchsorted(b.ends, a.starts, side="right")
    hi_idx = np.searchsorted(b.starts, a.ends, side="left")
    counts = np.maximum(hi_idx - lo_idx, 0)
    total = int(counts.sum())
    if total == 0:
        return EMPTY
    a_idx = np.repeat(np.arange(len(a)), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    b_idx = np.repeat(lo_idx, counts) + offsets
    s = np.maximum(a.starts[a_idx], b.starts[b_idx])
    e = np.minimum(a.ends[a_idx], b.ends[b_idx])
    keep = e > s
    return Intervals(s[keep], e[keep])


def difference(a: Intervals, b: Intervals) -> Intervals:
    """Points covered by ``a`` but not by ``b``."""
    if len(a) == 0 or len(b) == 0:
        return a
    lo = int(min(a.starts[0], b.starts[0]))
    hi = int(max(a.ends[-1], b.ends[-1]))
    return intersect(a, complement(b, lo, hi))


class Cover(NamedTuple):
    """A normalised set with the prefix sums of its lengths (``prefix[i]``: ns covered before interval i), so
    that many ``overlap_per_interval`` queries against one set pay for the sums once."""

    starts: np.ndarray
    ends: np.ndarray
    prefix: np.ndarray

    def __len__(self) -> int:
        return int(self.starts.size)


def indexed(iv: Intervals) -> Cover:
    """``iv`` with its prefix sums, for repeated overlap queries."""
    return Cover(iv.starts, iv.ends, np.concatenate(([0], np.cumsum(iv.ends - iv.starts))))


def overlap_per_interval(starts: np.ndarray, ends: np.ndarray, cover: Intervals | Cover) -> np.ndarray:
    """For each (possibly overlapping) interval [starts[i], ends[i]), how many ns ``cover`` covers (a ``Cover``
    when the same set is queried many times: its prefix sums are not recomputed)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if len(cover) == 0 or s.size == 0:
        return np.zeros(s.size, dtype=np.int64)
    # Prefix sums of covered length let each query be answered with two lookups.
    prefix = cover.prefix if isinstance(cover, Cover) else indexed(cover).prefix

    def covered_before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(cover.starts, t, side="right")  # intervals starting at or before t
        last = np.maximum(i - 1, 0)
        partial = np.clip(t - cover.starts[last], 0, cover.ends[last] - cover.starts[last])
        return np.where(i > 0, prefix[last] + partial, 0)

    # An empty or reversed interval covers nothing.
    return np.maximum(covered_before(e) - covered_before(s), 0)
