"""Property tests of the interval algebra against a brute-force point-set model."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit import intervals as iv

SPAN = 60
raw = st.lists(st.tuples(st.integers(0, SPAN), st.integers(0, SPAN)), max_size=12)


def build(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([a for a, _ in pairs], dtype=np.int64)
    e = np.array([b for _, b in pairs], dtype=np.int64)
    return s, e


def points(pairs: list[tuple[int, int]]) -> set[int]:
    return {t for a, b in pairs for t in range(a, b)}


def as_points(x: iv.Intervals) -> set[int]:
    return {t for a, b in zip(x.starts.tolist(), x.ends.tolist(), strict=True) for t in range(a, b)}


def normalised(x: iv.Intervals) -> bool:
    ok_nonempty = bool(np.all(x.ends > x.starts))
    ok_disjoint = bool(np.all(x.starts[1:] > x.ends[:-1]))
    return ok_nonempty and ok_disjoint


@settings(max_examples=300, deadline=None)
@given(raw)
def test_union_is_the_point_set(pairs):
    u = iv.union(*build(pairs))
    assert normalised(u)
    assert as_points(u) == points(pairs)
    assert iv.length(u) == len(points(pairs))


@settings(max_examples=300, deadline=None)
@given(raw, raw)
def test_intersect_and_difference(pa, pb):
    a, b = iv.union(*build(pa)), iv.union(*build(pb))
    inter, diff = iv.intersect(a, b), iv.difference(a, b)
    assert normalised(inter) and normalised(diff)
    assert as_points(inter) == points(pa) & points(pb)
    assert as_points(diff) == points(pa) - points(pb)
    # Exposed time never exceeds the whole: |a - b| <= |a|, and the parts add up.
    assert iv.length(diff) + iv.length(inter) == iv.length(a)


@settings(max_examples=300, deadline=None)
@given(raw, st.integers(0, SPAN), st.integers(0, SPAN))
def test_busy_plus_idle_is_the_window(pairs, lo, hi):
    u = iv.union(*build(pairs))
    busy, idle = iv.clip(u, lo, hi), iv.complement(u, lo, hi)
    assert as_points(busy) == points(pairs) & set(range(lo, hi))
    assert as_points(idle) == set(range(lo, hi)) - points(pairs)
    assert iv.length(busy) + iv.length(idle) == max(hi - lo, 0)


@settings(max_examples=300, deadline=None)
@given(raw, raw)
def test_overlap_per_interval(pairs, cover_pairs):
    cover = iv.union(*build(cover_pairs))
    s, e = build(pairs)
    got = iv.overlap_per_interval(s, e, cover)
    cpts = points(cover_pairs)
    want = [len(set(range(a, b)) & cpts) for a, b in pairs]
    assert got.tolist() == want
    assert iv.overlap_per_interval(s, e, iv.indexed(cover)).tolist() == want  # prefix sums kept for many queries


def test_tiny_golden():
    u = iv.union([0, 5, 20], [10, 12, 30])
    assert u.starts.tolist() == [0, 20] and u.ends.tolist() == [12, 30]
    gaps = iv.complement(u, 0, 40)
    assert gaps.starts.tolist() == [12, 30] and gaps.ends.tolist() == [20, 40]
