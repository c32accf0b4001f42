"""Causes of host gaps: every idle nanosecond of a device gets exactly one cause.

For a gap that ends when operation X starts, with X's launch call [Ls, Le) on host thread T:
- ``dependency``: after Le, X was launched but waited (on another stream, an event, a peer);
- ``launch_call``: inside [Ls, Le), the launch API call itself (driver/runtime launch cost); when that
  call is a blocking one (a synchronous copy), the time inside it is waiting and counts as ``sync``;
- ``host_code``: before Ls while T was busy in other API calls or host ranges: framework and Python
  code between launches (the host could not issue work fast enough). Until report v2 these two were
  one cause, ``launch``; they have different fixes (fewer or cheaper launches, e.g. CUDA graphs, versus
  less host work per launch, e.g. torch.compile or a faster scheduler);
- ``sync``: before Ls while a thread of X's process sat in a synchronising call;
- ``host_idle``: before Ls with no traced host activity on T.
Without X's launch call (outside the capture), host state is read from all threads of the process and
no time can be called dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

from tracekit import intervals as iv
from tracekit.analysis.ops import SYNC_API_REGEX, DeviceOps, reused

CAUSES = ("launch_call", "host_code", "sync", "dependency", "host_idle")


@dataclass
class HostActivity:
    """Host-side busy and synchronising time of one rank, by thread and by process."""

    busy_by_thread: dict[tuple[int, int], iv.Intervals]
    busy_by_process: dict[int, iv.Intervals]
    sync_by_process: dict[int, iv.Intervals]
    _covers: dict[tuple[int, int], tuple[iv.Cover, iv.Cover]] = field(default_factory=dict, repr=False,
                                                                      compare=False)

    def covers(self, pid: int, tid: int) -> tuple[iv.Cover, iv.Cover]:
        """(synchronising, occupied) time of thread ``tid`` of process ``pid`` (``tid`` < 0: the whole
        process), each with its prefix sums. Built once per thread and kept: a batch of many short steps asks
        for the same thread at every step, and rebuilding them from the batch's whole host activity each time
        made the analysis quadratic in the steps."""
        key = (pid, tid)
        if key not in self._covers:
            sync = self.sync_by_process.get(pid, iv.EMPTY)
            busy = self.busy_by_thread.get(key, iv.EMPTY) if tid >= 0 else self.busy_by_process.get(pid, iv.EMPTY)
            occupied = iv.union(np.concatenate((sync.starts, busy.starts)), np.concatenate((sync.ends, busy.ends)))
            self._covers[key] = (iv.indexed(sync), iv.indexed(occupied))
        return self._covers[key]

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, rank: int, step_regex: str, lo: int | None = None,
             hi: int | None = None) -> HostActivity:
        """API calls and host ranges of ``rank`` (those overlapping [lo, hi) when given: gap causes are read
        only inside gaps, so the rest cannot matter); ranges that are step markers do not count as busy.
        Inside ``ops.reuse_reads``, a rank of few enough rows is read whole once and each range selects
        from it with the same filter."""
        if lo is not None and hi is not None:
            whole = reused(con, ("host", rank, step_regex), lambda: _host_count(con, rank),
                           lambda: _whole_host(con, rank, step_regex))
            if whole is not None:
                pid, tid, start, end, is_sync = whole
                sel = (end > lo) & (start < hi)
                return cls._of(pid[sel], tid[sel], start[sel], end[sel], is_sync[sel])
        return cls._of(*_host_rows(con, rank, step_regex, lo, hi))

    @classmethod
    def _of(cls, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray,
            is_sync: np.ndarray) -> HostActivity:
        by_thread: dict[tuple[int, int], iv.Intervals] = {}
        by_process: dict[int, iv.Intervals] = {}
        sync: dict[int, iv.Intervals] = {}
        for p in np.unique(pid):
            in_p = pid == p
            by_process[int(p)] = iv.union(start[in_p], end[in_p])
            sync[int(p)] = iv.union(start[in_p & is_sync], end[in_p & is_sync])
            for t in np.unique(tid[in_p]):
                sel = in_p & (tid == t)
                by_thread[(int(p), int(t))] = iv.union(start[sel], end[sel])
        return cls(by_thread, by_process, sync)


_HOST_ROWS = """
    WITH calls AS (SELECT pid, tid, start_ns, end_ns, name FROM launches
                   WHERE rank = $rank AND {span}),
         sync_names AS (SELECT name, regexp_matches(name, $sync) AS is_sync
                        FROM (SELECT DISTINCT name FROM calls))
    SELECT c.pid, c.tid, c.start_ns, c.end_ns, coalesce(s.is_sync, FALSE) AS is_sync
    FROM calls c LEFT JOIN sync_names s ON s.name = c.name
    UNION ALL
    SELECT pid, tid, start_ns, end_ns, FALSE FROM ranges
    WHERE rank = $rank AND end_ns IS NOT NULL AND device_id IS NULL AND {span}
      AND NOT regexp_matches(name, $step)
"""


def _host_rows(con: duckdb.DuckDBPyConnection, rank: int, step_regex: str, lo: int | None,
               hi: int | None) -> tuple[np.ndarray, ...]:
    """(pid, tid, start_ns, end_ns, is_sync) of the rank's host rows overlapping [lo, hi) (all without bounds)."""
    span = "TRUE" if lo is None or hi is None else "end_ns > $lo AND start_ns < $hi"
    params = {"rank": rank, "sync": SYNC_API_REGEX, "step": step_regex}
    if lo is not None and hi is not None:
        params |= {"lo": lo, "hi": hi}
    # The sync regex runs once per distinct API name, not once per call.
    rows = con.sql(_HOST_ROWS.format(span=span), params=params).to_arrow_table()
    return (rows.column("pid").to_numpy(zero_copy_only=False), rows.column("tid").to_numpy(zero_copy_only=False),
            rows.column("start_ns").to_numpy(zero_copy_only=False),
            rows.column("end_ns").to_numpy(zero_copy_only=False),
            rows.column("is_sync").to_numpy(zero_copy_only=False).astype(bool))


def _host_count(con: duckdb.DuckDBPyConnection, rank: int) -> int:
    """At least as many rows as the rank's host read has (a whole read is held only for a small rank)."""
    return int(con.execute("""
        SELECT (SELECT count(*) FROM api_calls WHERE rank = $rank) + (SELECT count(*) FROM ranges WHERE rank = $rank)
    """, {"rank": rank}).fetchall()[0][0])


def _whole_host(con: duckdb.DuckDBPyConnection, rank: int, step_regex: str) -> tuple[np.ndarray, ...] | None:
    """The rank's host rows, or None when a column holds NULLs (read as floats or objects: compared so they
    could differ from the query's filter), so every read stays in SQL."""
    rows = _host_rows(con, rank, step_regex, None, None)
    return rows if all(np.issubdtype(c.dtype, np.integer) for c in rows[:4]) else None


def gap_causes(gaps: iv.Intervals, ops: DeviceOps, host: HostActivity) -> tuple[np.ndarray, np.ndarray]:
    """ns per cause for each gap (shape (gaps, causes), columns in ``CAUSES`` order), and the index of the
    operation that ends each gap (-1: none). Vectorised: a million gaps cost one pass per host thread."""
    n = len(gaps)
    per_gap = np.zeros((n, len(CAUSES)), dtype=np.int64)
    col = {c: i for i, c in enumerate(CAUSES)}
    if n == 0:
        return per_gap, np.empty(0, dtype=np.int64)
    g0, g1 = gaps.starts, gaps.ends
    if len(ops) == 0:  # no operation ends these gaps: no launch call, no host thread to read
        per_gap[:, col["host_idle"]] = g1 - g0
        return per_gap, np.full(n, -1, dtype=np.int64)
    j = np.searchsorted(ops.start_ns, g1, side="left")
    has_next = j < len(ops)
    j = np.where(has_next, j, -1)
    safe = np.maximum(j, 0)
    ls = np.where(has_next, ops.launch_start_ns[safe], -1)
    le = np.where(has_next, ops.launch_end_ns[safe], -1)
    pid = np.where(has_next, ops.pid[safe], -1)
    tid = np.where(has_next, ops.launch_tid[safe], -1)
    known = ls >= 0
    per_gap[:, col["dependency"]] = np.where(known, np.maximum(g1 - np.maximum(g0, le), 0), 0)
    in_call = np.where(known, np.maximum(np.minimum(g1, le) - np.maximum(g0, ls), 0), 0)
    # Inside X's own call: launching, unless that call is a blocking copy, which waits (sync).
    blocking = np.zeros(n, dtype=bool) if ops.launch_sync is None else (has_next & ops.launch_sync[safe])
    per_gap[:, col["launch_call"]] = np.where(blocking, 0, in_call)
    per_gap[:, col["sync"]] = np.where(blocking, in_call, 0)
    pre_hi = np.maximum(np.where(known, np.minimum(g1, ls), g1), g0)
    # Before the launch call: read the host state of the launching thread (or the whole process).
    for p in np.unique(pid):
        for t in np.unique(tid[pid == p]):
            sel = np.flatnonzero((pid == p) & (tid == t))
            sync, occupied = host.covers(int(p), int(t))
            in_sync = iv.overlap_per_interval(g0[sel], pre_hi[sel], sync)
            in_occupied = iv.overlap_per_interval(g0[sel], pre_hi[sel], occupied)
            per_gap[sel, col["sync"]] += in_sync
            per_gap[sel, col["host_code"]] = in_occupied - in_sync
            per_gap[sel, col["host_idle"]] = (pre_hi[sel] - g0[sel]) - in_occupied
    return per_gap, j


def attribute_gaps(gaps: iv.Intervals, ops: DeviceOps, host: HostActivity) -> tuple[dict[str, int], np.ndarray]:
    """Total ns per cause over ``gaps``, and the index of the operation that ends each gap (-1: none)."""
    per_gap, j = gap_causes(gaps, ops, host)
    return dict(zip(CAUSES, (int(v) for v in per_gap.sum(axis=0)), strict=True)), j


def gap_context(con: duckdb.DuckDBPyConnection, rank: int, pid: int, tid: int, start_ns: int,
                end_ns: int) -> dict[str, str | None]:
    """What the launching host thread was doing during the gap [start_ns, end_ns) (``gap_contexts`` of one)."""
    return gap_contexts(con, rank, [(pid, tid, start_ns, end_ns)])[0]


_OVERLAP = "least(coalesce(x.end_ns, x.start_ns), g.e) - greatest(x.start_ns, g.s)"
_CONTEXT_SQL = f"""
    WITH api AS (
        SELECT g.i, x.name, row_number() OVER (PARTITION BY g.i ORDER BY {_OVERLAP} DESC, x.start_ns) AS n
        FROM _gaps g JOIN launches x ON x.rank = $rank AND x.pid = g.pid AND x.tid = g.tid
                                    AND x.start_ns < g.e AND x.end_ns > g.s),
    rng AS (
        SELECT g.i, x.name, row_number() OVER (
                   PARTITION BY g.i ORDER BY 2 * ({_OVERLAP}) >= g.e - g.s DESC,
                   CASE WHEN 2 * ({_OVERLAP}) >= g.e - g.s THEN coalesce(x.end_ns, x.start_ns) - x.start_ns END,
                   {_OVERLAP} DESC) AS n
        FROM _gaps g JOIN ranges x ON x.rank = $rank AND x.pid = g.pid AND x.tid = g.tid AND x.device_id IS NULL
                                   AND x.start_ns < g.e AND coalesce(x.end_ns, x.start_ns) > g.s)
    SELECT g.i, r.name AS range, a.name AS api_call FROM _gaps g
    LEFT JOIN rng r ON r.i = g.i AND r.n = 1 LEFT JOIN api a ON a.i = g.i AND a.n = 1 ORDER BY g.i
"""


def gap_contexts(con: duckdb.DuckDBPyConnection, rank: int, gaps: list[tuple[int, int, int, int]]
                 ) -> list[dict[str, str | None]]:
    """For each gap (pid, tid, start_ns, end_ns) of ``rank``, what its launching host thread was doing during it:
    the API call that covers most of it (the call at the gap's start is often only the tail of a sync, while a
    slow launch fills the rest), and the innermost range covering at least half of it (else the range covering
    most). One query for all the gaps: each query costs more to plan than to run on these few rows."""
    if not gaps:
        return []
    table = pa.table({"i": list(range(len(gaps))), **{k: [g[c] for g in gaps] for c, k in
                                                       enumerate(("pid", "tid", "s", "e"))}})
    con.register("_gaps", table)
    try:
        rows = con.execute(_CONTEXT_SQL, {"rank": rank}).fetchall()
    finally:
        con.unregister("_gaps")
    return [{"range": r, "api_call": a} for _, r, a in rows]
