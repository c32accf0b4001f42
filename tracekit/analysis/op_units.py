"""The GPU time of each op unit in each analysed step: ``kernel_ops`` grouped by (step, unit), vectorised.

One narrow read of ``kernel_ops`` (numbers, the class and the attention flag; no kernel names), each operation
placed in the step window of its rank and device that began last at or before its start (an as-of match, kept
when the operation starts before that window ends), then one sort by (step, unit, start, stream, module) and
segment reductions: no Python loop per operation or unit, no GROUP BY with ordered aggregates. Per unit: its
summed time, its first operation's stream, start and module (first by start, then stream, then module), whether
any of its operations is attention, and the class with most time (ties: the first class by name).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import polars as pl

from tracekit.analysis.accounting import StepAccount

#: the columns ``unit_rows`` returns, in order, with their types
UNIT_SCHEMA = {"step": pl.Int64, "unit": pl.Int64, "measured_ns": pl.Int64, "stream_id": pl.Int64,
               "start_ns": pl.Int64, "module": pl.Int64, "attention": pl.Boolean, "class": pl.String}
_LAST = np.iinfo(np.int64).max  # a missing stream sorts after every stream (SQL's NULLS LAST)


def step_of(rank: np.ndarray, device: np.ndarray, start: np.ndarray, steps: Sequence[StepAccount]) -> np.ndarray:
    """Per operation the index in ``steps`` of the window of its (rank, device) that began last at or before its
    start, when the operation starts before that window's end; -1 otherwise."""
    out = np.full(len(start), -1, dtype=np.int64)
    by_gpu: dict[tuple[int, int], list[int]] = {}
    for i, a in enumerate(steps):
        by_gpu.setdefault((int(a.rank), int(a.device_id)), []).append(i)
    for (r, d), members in by_gpu.items():
        index = np.asarray(members, dtype=np.int64)
        w_start = np.asarray([steps[i].window.start_ns for i in members], dtype=np.int64)
        w_end = np.asarray([steps[i].window.end_ns for i in members], dtype=np.int64)
        order = np.argsort(w_start, kind="stable")
        index, w_start, w_end = index[order], w_start[order], w_end[order]
        mine = np.flatnonzero((rank == r) & (device == d))
        at = np.searchsorted(w_start, start[mine], side="right") - 1
        ok = at >= 0
        ok[ok] = start[mine[ok]] < w_end[at[ok]]
        out[mine[ok]] = index[at[ok]]
    return out


def _firsts(keys: np.ndarray) -> np.ndarray:
    """Positions where a sorted key array changes (its segments' first rows)."""
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)


def unit_rows(con: duckdb.DuckDBPyConnection, steps: Sequence[StepAccount]) -> pl.DataFrame:
    """One row per (step, unit) of the operations in ``steps`` (``UNIT_SCHEMA``), in (step, unit) order."""
    k = con.sql("SELECT rank, device_id, unit, module, stream_id, start_ns, coalesce(dur_ns, 0) AS dur_ns, class, "
                "attention FROM kernel_ops WHERE start_ns IS NOT NULL").pl()
    step = step_of(k["rank"].fill_null(-1).to_numpy(), k["device_id"].fill_null(-1).to_numpy(),
                   k["start_ns"].to_numpy(), steps)
    keep = step >= 0
    k, step = k.filter(pl.Series(keep)), step[keep]
    if k.is_empty():
        return pl.DataFrame(schema=UNIT_SCHEMA)
    unit, module = k["unit"].to_numpy(), k["module"].to_numpy()
    stream = k["stream_id"].fill_null(_LAST).to_numpy()
    start, dur = k["start_ns"].to_numpy(), k["dur_ns"].to_numpy()
    classes = sorted(c for c in k["class"].unique().to_list() if c is not None)
    code = k["class"].replace_strict(classes, list(range(len(classes))), default=len(classes),
                                     return_dtype=pl.Int64).to_numpy()  # name order; a missing class last
    # one integer key per (step, unit); an unstable sort of one int64 column is the cheapest order there is
    key = step * (int(unit.max()) + 2) + (unit + 1)
    order = np.argsort(key)
    key, step, unit, module, stream, start, dur, code = (
        a[order] for a in (key, step, unit, module, stream, start, dur, code))
    attention = k["attention"].fill_null(False).to_numpy()[order]
    first = _firsts(key)
    seg = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    # the first operation by (start, stream, module): the smallest start, then among those the smallest stream,
    # then the smallest module
    min_start = np.minimum.reduceat(start, first)
    at = start == min_start[seg]
    min_stream = np.minimum.reduceat(np.where(at, stream, _LAST), first)
    at &= stream == min_stream[seg]
    min_module = np.minimum.reduceat(np.where(at, module, _LAST), first)
    # the class with most time: per (unit, class) sums, then per unit the largest, ties to the smaller code
    by_class = np.argsort(seg * (len(classes) + 1) + code)
    pair_key = seg[by_class] * (len(classes) + 1) + code[by_class]
    pair_first = _firsts(pair_key)
    pair_seg, pair_code = seg[by_class][pair_first], code[by_class][pair_first]
    pair_ns = np.add.reduceat(dur[by_class], pair_first)
    top = np.flatnonzero(pair_ns == np.maximum.reduceat(pair_ns, _firsts(pair_seg))[pair_seg])
    chosen = top[_firsts(pair_seg[top])]  # pairs are in (unit, code) order: the first of a unit's top ones
    return pl.DataFrame({
        "step": step[first], "unit": unit[first], "measured_ns": np.add.reduceat(dur, first),
        "stream_id": min_stream, "start_ns": min_start, "module": min_module,
        "attention": np.logical_or.reduceat(attention, first),
        "class": pl.Series(classes + [None], dtype=pl.String).gather(pair_code[chosen]),
    }, schema=UNIT_SCHEMA).with_columns(
        pl.when(pl.col("stream_id") != _LAST).then(pl.col("stream_id")).alias("stream_id"))
