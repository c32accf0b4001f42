"""Nested host ranges: each range's parent, and the innermost range open at given points in time.

Host ranges of one thread nest (cpu ops, ``nn.Module`` frames, NVTX and record_function ranges): ``nest`` finds
the tree and the range open at each launch (``tracekit.analysis.attribution``), vectorised over numpy arrays.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def nest(group_iv: np.ndarray, start: np.ndarray, end: np.ndarray, group_pt: np.ndarray, t: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:
    """Per interval its parent (the innermost interval of its group enclosing it, -1 for none) and per point the
    innermost interval of its group open at it (start <= t < end). Intervals of one group must nest (one host
    thread's ranges do). Vectorised: intervals sorted by (group, start, longest first); an interval's parent is
    found by walking up from its predecessor with pointer jumps, a point's node by a binary search for the last
    interval starting at or before it, then walking up its parents until one is still open."""
    n_iv = len(start)
    order = np.arange(n_iv) if _is_sorted(group_iv, start, end) else np.lexsort((-end, start, group_iv))
    g, s, e = group_iv[order], start[order], end[order]
    cand = np.arange(n_iv, dtype=np.int64) - 1
    if n_iv:
        # no interval of its group before it ends after it starts (a top-level one): no parent, no walk
        ended = pl.DataFrame({"g": g, "e": e}).select(pl.col("e").cum_max().shift(1).over("g"))["e"]
        cand[ended.is_null().to_numpy() | (ended.fill_null(0).to_numpy() <= s)] = -1
    todo = np.flatnonzero(cand >= 0)  # intervals whose candidate is not yet known to enclose them
    while todo.size:
        c = cand[todo]
        todo = todo[~((e[c] > s[todo]) & (e[c] >= e[todo]))]
        cand[todo] = cand[cand[todo]]
        todo = todo[cand[todo] >= 0]
    parent_sorted = cand
    parent = np.full(n_iv, -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    inner_sorted = np.full(len(t), -1, dtype=np.int64)
    if n_iv and len(t):
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
        by_group = np.argsort(group_pt, kind="stable")
        groups = group_pt[by_group]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            mine = by_group[np.searchsorted(groups, g[lo], "left"):np.searchsorted(groups, g[lo], "right")]
            if mine.size:
                pos = lo + np.searchsorted(s[lo:hi], t[mine], side="right") - 1
                inner_sorted[mine] = np.where(pos >= lo, pos, -1)
        todo = np.flatnonzero(inner_sorted >= 0)
        while todo.size:
            todo = todo[e[inner_sorted[todo]] <= t[todo]]  # closed before the point: walk up
            inner_sorted[todo] = parent_sorted[inner_sorted[todo]]
            todo = todo[inner_sorted[todo] >= 0]
    inner = np.where(inner_sorted >= 0, order[np.maximum(inner_sorted, 0)], -1) if n_iv else inner_sorted
    return parent, inner


def _is_sorted(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether the intervals are already in (group, start, longest first) order (``op_nodes``' rows are)."""
    if len(start) < 2:
        return True
    dg, ds = np.diff(group), np.diff(start)
    return bool(np.all((dg > 0) | ((dg == 0) & ((ds > 0) | ((ds == 0) & (end[1:] <= end[:-1]))))))
