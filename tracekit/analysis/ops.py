"""GPU operations of one device with their class and launch call, as numpy columns, read a time range at a time.

Analysis never holds a whole device: it reads the operations of a few consecutive steps at a time (see
``tracekit.analysis.device``), so memory grows with one batch of steps, not with the trace. Names and
classes travel as small integer codes into a shared vocabulary (the ``name``/``cls`` object arrays point
at one string object per distinct name), so an operation costs tens of bytes and per-class sums are
integer bin counts. Operations are ordered by (start, end, stream, name, process, launch), a total order
that every read of the same trace repeats, however the reads are cut.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from tracekit.analysis.attribution import register_attribution
from tracekit.budgets.classify import ClassRules

# Host calls that wait for the device (a gap inside one is waiting, not launching). Defined here, beside the
# launch lookup that flags them, and used by the gap causes (tracekit.analysis.gaps).
SYNC_API_REGEX = (
    r"^(cuda|hip)(Device|Stream|Event|Ctx)Synchroni[sz]e|^cu(Ctx|Stream|Event)Synchronize|"
    r"^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|WithStream)?(_v\d+)?$|^cuMemcpy[DH]to[DH](_v\d+)?$|"
    r"^(Stream|Event|Context) Sync$"
)

ORDER = "start_ns, end_ns, stream_id, code, pid, launch_start_ns, launch_end_ns, launch_tid, in_graph"


@dataclass
class DeviceOps:
    """Kernels and memory operations of one device (or of a time range of it), sorted by ``ORDER``."""

    rank: int
    device_id: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    stream_id: np.ndarray
    cls: np.ndarray  # class name per op (object array)
    name: np.ndarray
    pid: np.ndarray
    launch_tid: np.ndarray  # -1 where the launch call is not in the capture
    launch_start_ns: np.ndarray  # -1 where unknown
    launch_end_ns: np.ndarray
    in_graph: np.ndarray  # bool: launched as part of a CUDA/HIP graph
    cls_code: np.ndarray  # int32 per op: index into class_names (cls == class_names[cls_code])
    class_names: np.ndarray  # object array of the distinct class names
    name_code: np.ndarray  # int32 per op: index into names (name == names[name_code])
    names: np.ndarray  # object array of the distinct op names
    launch_sync: np.ndarray | None = None  # bool: the launch call is itself synchronising (a blocking copy)

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @cached_property
    def max_dur_ns(self) -> int:
        return int((self.end_ns - self.start_ns).max()) if len(self) else 0

    def take(self, rows: np.ndarray) -> DeviceOps:
        """The operations at ``rows`` (ascending indices: still in ``ORDER``)."""
        per_op = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _PER_OP:
            if per_op[name] is not None:
                per_op[name] = per_op[name][rows]
        return DeviceOps(**per_op)


_PER_OP = ("start_ns", "end_ns", "stream_id", "cls", "name", "pid", "launch_tid", "launch_start_ns",
           "launch_end_ns", "in_graph", "cls_code", "name_code", "launch_sync")


@dataclass(frozen=True)
class Vocabulary:
    """The op-name vocabulary of a prepared connection: names and classes by code."""

    names: np.ndarray  # object array: name per code
    class_names: np.ndarray  # object array of the distinct class names, sorted
    cls_of_code: np.ndarray  # int32: class index per name code

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> Vocabulary:
        vocab = con.execute("SELECT name, class FROM op_names ORDER BY code").fetchall()
        class_names = _objects(sorted({v[1] for v in vocab}))
        index = {c: i for i, c in enumerate(class_names)}
        return cls(_objects([v[0] for v in vocab]), class_names,
                   np.array([index[v[1]] for v in vocab], dtype=np.int32))


def prepare(con: duckdb.DuckDBPyConnection, rules: ClassRules) -> list[tuple[int, int]]:
    """Register kernel classes, each kernel's launching op (``kernel_ops``) and the op-name vocabulary; return
    the (rank, device) pairs."""
    register_attribution(con, rules)  # registers the kernel classes too (once per connection, as it is)
    # Kernels whose launching op makes them attention while their name does not (the second signal). Only an
    # attention kernel's class can differ from its name's: the filter on ``attention`` leaves nothing to scan
    # where nothing was attributed (``kernel_ops`` a view with the constant FALSE there).
    con.execute("""
        CREATE OR REPLACE TEMP TABLE kernel_via_op AS
        SELECT o.rank, o.device_id, o.stream_id, o.start_ns, o.name, o.class FROM kernel_ops o
        JOIN kernel_class c USING (name) WHERE o.attention AND NOT o.is_memop AND o.class <> c.class
    """)
    # One code per kernel name (with its class) and per memop kind (its own class); codes index the vocabulary.
    # A name some of whose kernels take their class from the launching op has a second code (``via_op``).
    # ``fn`` is the kernel's function name (the store's short name): what ncu's --kernel-name-base function
    # matches, since ncu's demangler spells templates and lambdas unlike CUPTI's.
    con.execute("""
        CREATE OR REPLACE TEMP TABLE op_names AS
        SELECT (row_number() OVER (ORDER BY is_memop, name, via_op) - 1)::INTEGER AS code, name, class, is_memop,
               fn, via_op
        FROM (SELECT c.name, c.class, FALSE AS is_memop, coalesce(nullif(s.fn, ''), c.name) AS fn, FALSE AS via_op
              FROM kernel_class c LEFT JOIN (SELECT name, min(short_name) AS fn FROM kernels GROUP BY name) s
                USING (name)
              UNION ALL
              SELECT DISTINCT v.name, v.class, FALSE, coalesce(nullif(s.fn, ''), v.name), TRUE
              FROM kernel_via_op v LEFT JOIN (SELECT name, min(short_name) AS fn FROM kernels GROUP BY name) s
                USING (name)
              UNION ALL SELECT DISTINCT kind, kind, TRUE, kind, FALSE FROM memops WHERE kind IS NOT NULL)
    """)
    return [tuple(r) for r in con.execute("""
        SELECT DISTINCT rank, device_id FROM kernels ORDER BY rank, device_id
    """).fetchall()]


def is_prepared(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``prepare`` has run on this connection (its temp tables exist)."""
    return con.execute("""
        SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = 'op_names'
    """).fetchall()[0][0] == 1


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array: ``np.unique`` by a sort (numpy's hashing ``unique`` is
    many times slower on millions of int64 values)."""
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))] if out.size else out


def _objects(values: list[str]) -> np.ndarray:
    """A 1-d object array of the given strings."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def ops_sql(where: str = "TRUE") -> str:
    """SQL of one device's operations ($rank, $device) with their launch call; ``where`` filters the kernel
    and memop rows (columns start_ns, end_ns) before the launch join. The launch call is the first API call
    of the operation's (process, correlation id), looked up for the selected operations only."""
    return f"""
        WITH k AS (
            SELECT k.start_ns, k.end_ns, k.stream_id, n.code, k.pid, k.correlation_id,
                   (k.graph_id IS NOT NULL OR k.graph_node_id IS NOT NULL) AS node_traced
            FROM (SELECT * FROM kernels WHERE rank = $rank AND device_id = $device AND ({where})) k
            LEFT JOIN kernel_via_op v ON v.rank = k.rank AND v.device_id = k.device_id AND v.start_ns = k.start_ns
                 AND v.stream_id IS NOT DISTINCT FROM k.stream_id AND v.name = k.name
            JOIN op_names n ON n.name = k.name AND NOT n.is_memop AND n.via_op = (v.name IS NOT NULL)
            UNION ALL
            SELECT m.start_ns, m.end_ns, m.stream_id, n.code, m.pid, m.correlation_id, FALSE
            FROM memops m JOIN op_names n ON n.name = m.kind AND n.is_memop
            WHERE m.rank = $rank AND m.device_id = $device AND ({where})
        ),
        l AS (  -- a grouped arg_min, cheaper than a window sort
            SELECT pid, correlation_id, first_call.tid AS tid, first_call.start_ns AS start_ns,
                   first_call.end_ns AS end_ns, first_call.graph AS is_graph_launch, first_call.sync AS is_sync
            FROM (SELECT pid, correlation_id,
                         arg_min({{'tid': tid, 'start_ns': start_ns, 'end_ns': end_ns,
                                  'graph': is_graph_launch,
                                  'sync': regexp_matches(name, '{SYNC_API_REGEX}')}}, start_ns) AS first_call
                  FROM launches WHERE rank = $rank
                    AND correlation_id IN (SELECT correlation_id FROM k)
                  GROUP BY pid, correlation_id)
        )
        SELECT k.start_ns, k.end_ns, coalesce(k.stream_id, -1) AS stream_id, k.code,
               coalesce(k.pid, -1) AS pid,
               coalesce(l.tid, -1) AS launch_tid, coalesce(l.start_ns, -1) AS launch_start_ns,
               coalesce(l.end_ns, -1) AS launch_end_ns,
               (k.node_traced OR coalesce(l.is_graph_launch, FALSE)) AS in_graph,
               coalesce(l.is_sync, FALSE) AS launch_sync
        FROM k LEFT JOIN l ON l.pid = k.pid AND l.correlation_id = k.correlation_id
    """


def launch_start_sql(where: str = "TRUE") -> str:
    """SQL of the same operations as ``ops_sql(where)`` with only what step finding reads: start, end,
    process, whether it ran in a graph, and the start of its launch call (the first API call of its process
    and correlation id; -1 where none). No per-call regex, no launch struct: it scans whole devices."""
    return f"""
        WITH k AS (
            SELECT k.start_ns, k.end_ns, k.pid, k.correlation_id,
                   (k.graph_id IS NOT NULL OR k.graph_node_id IS NOT NULL) AS node_traced
            FROM (SELECT * FROM kernels WHERE rank = $rank AND device_id = $device AND ({where})) k
            SEMI JOIN (SELECT name FROM op_names WHERE NOT is_memop AND NOT via_op) n ON n.name = k.name
            UNION ALL
            SELECT m.start_ns, m.end_ns, m.pid, m.correlation_id, FALSE
            FROM memops m SEMI JOIN (SELECT name FROM op_names WHERE is_memop) n ON n.name = m.kind
            WHERE m.rank = $rank AND m.device_id = $device AND ({where})
        ),
        l AS (
            SELECT pid, correlation_id, min(start_ns) AS start_ns, arg_min(is_graph_launch, start_ns) AS is_graph_launch
            FROM launches WHERE rank = $rank AND correlation_id IN (SELECT correlation_id FROM k)
            GROUP BY pid, correlation_id
        )
        SELECT k.start_ns, k.end_ns, coalesce(k.pid, -1) AS pid, coalesce(l.start_ns, -1) AS launch_start_ns,
               (k.node_traced OR coalesce(l.is_graph_launch, FALSE)) AS in_graph
        FROM k LEFT JOIN l ON l.pid = k.pid AND l.correlation_id = k.correlation_id
    """


def next_start(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, at_ns: int) -> int | None:
    """The first operation start at or after ``at_ns`` on the device (None: there is none)."""
    row = con.execute("""
        SELECT min(start_ns) FROM (
            SELECT start_ns FROM kernels WHERE rank = $rank AND device_id = $device AND start_ns >= $at
            UNION ALL
            SELECT start_ns FROM memops WHERE rank = $rank AND device_id = $device AND start_ns >= $at)
    """, {"rank": rank, "device": device_id, "at": at_ns}).fetchall()[0]
    return None if row[0] is None else int(row[0])


_reuse = threading.local()


@contextmanager
def reuse_reads(max_rows: int) -> Iterator[None]:
    """Within (in this thread): a device of at most ``max_rows`` operations is read whole once, and each
    ``load_ops`` of a time range of it, and each ``HostActivity.load`` of its rank, selects rows of that
    one read with the very filter the SQL applies, in the same order: a one-batch device is not read
    again around its costliest gaps and its median step (each read is a query over joined views, whose
    planning costs more than the rows of a small trace). Only the last device's reads are held."""
    outer = getattr(_reuse, "state", None)
    _reuse.state = {"max_rows": max_rows}
    try:
        yield
    finally:
        _reuse.state = outer


def reused(con: duckdb.DuckDBPyConnection, key: tuple[Any, ...], count: Callable[[], int],
           read: Callable[[], Any]) -> Any:
    """Inside ``reuse_reads``: the whole read ``read()`` under ``key`` for ``con`` (made once, and only when
    ``count()`` rows are at most the bound; ``read`` may answer None, unfit to select from), else None: the
    caller queries the range itself."""
    state = getattr(_reuse, "state", None)
    if state is None:
        return None
    held = state.get(key)
    if held is None or held[0] is not con:
        value = read() if count() <= state["max_rows"] else None
        state[key] = held = (con, value)
    return held[1]


def _device_starts(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> np.ndarray:
    """Every operation start of the device, sorted: what ``next_start`` looks up."""
    return con.sql("""
        SELECT start_ns FROM kernels WHERE rank = $rank AND device_id = $device
        UNION ALL SELECT start_ns FROM memops WHERE rank = $rank AND device_id = $device
        ORDER BY 1
    """, params={"rank": rank, "device": device_id}).to_arrow_table().column(0).to_numpy().astype(np.int64)


def _device_count(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> int:
    return int(con.execute("""
        SELECT (SELECT count(*) FROM kernels WHERE rank = $rank AND device_id = $device)
             + (SELECT count(*) FROM memops WHERE rank = $rank AND device_id = $device)
    """, {"rank": rank, "device": device_id}).fetchall()[0][0])


def load_ops(con: duckdb.DuckDBPyConnection, vocab: Vocabulary, rank: int, device_id: int,
             lo: int | None = None, hi: int | None = None) -> DeviceOps:
    """The device's operations that can matter for time range [lo, hi]: those that overlap it (or start
    in it), and all that start from ``hi`` up to the first start at or after ``hi`` (the operation that
    ends a gap reaching ``hi``). Without bounds, all of the device's operations."""
    if lo is not None and hi is not None:
        whole = reused(con, ("ops", id(vocab), rank, device_id), lambda: _device_count(con, rank, device_id),
                       lambda: (vocab, load_ops(con, vocab, rank, device_id), _device_starts(con, rank, device_id)))
        if whole is not None and whole[0] is vocab:
            ops, starts = whole[1], whole[2]
            k = int(np.searchsorted(starts, hi, side="left"))
            upto = int(starts[k]) if k < starts.size else hi
            return ops.take(np.flatnonzero(((ops.end_ns > lo) | (ops.start_ns >= lo)) & (ops.start_ns <= upto)))
    params = {"rank": rank, "device": device_id}
    where = "TRUE"
    if lo is not None and hi is not None:
        upto = next_start(con, rank, device_id, hi)
        params |= {"lo": lo, "upto": hi if upto is None else upto}
        where = "(end_ns > $lo OR start_ns >= $lo) AND start_ns <= $upto"
    table = con.sql(f"SELECT * FROM ({ops_sql(where)}) ORDER BY {ORDER}", params=params).to_arrow_table()
    return _device_ops(table, vocab, rank, device_id)


def _device_ops(table: pa.Table, vocab: Vocabulary, rank: int, device_id: int) -> DeviceOps:
    def col(name: str, dtype: type) -> np.ndarray:
        return table.column(name).to_numpy().astype(dtype, copy=False)

    code = col("code", np.int32)
    cls_code = vocab.cls_of_code[code]
    return DeviceOps(
        rank=rank, device_id=device_id, start_ns=col("start_ns", np.int64), end_ns=col("end_ns", np.int64),
        stream_id=col("stream_id", np.int64), cls=vocab.class_names[cls_code], name=vocab.names[code],
        pid=col("pid", np.int64), launch_tid=col("launch_tid", np.int64),
        launch_start_ns=col("launch_start_ns", np.int64), launch_end_ns=col("launch_end_ns", np.int64),
        in_graph=col("in_graph", bool), cls_code=cls_code, class_names=vocab.class_names,
        name_code=code, names=vocab.names, launch_sync=col("launch_sync", bool),
    )


def launch_skips(con: duckdb.DuckDBPyConnection, ops: DeviceOps, picked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the ops at indices ``picked``, each the first of its name and process among ops in a window: how
    many launches in that process come before it on the whole device (1) of a kernel with the same function
    name, i.e. ncu's ``--launch-skip`` under ``--kernel-name-base function`` (ncu counts only the launches its
    name filter matches), and (2) of a kernel with the very same name, as rocprofv3 counts dispatches per
    kernel symbol for ``--kernel-iteration-range`` (minus one: it counts from 1). One pass over the device
    in SQL. Being first, an op has no tie before it in ``ORDER`` beyond (start, end, stream), so the launch
    columns need not be read."""
    if picked.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    probe = pa.table({"i": np.arange(picked.size), "pid": ops.pid[picked], "code": ops.name_code[picked],
                      "s": ops.start_ns[picked], "e": ops.end_ns[picked], "st": ops.stream_id[picked]})
    con.register("launch_probe", probe)
    try:
        rows = con.execute("""
            WITH d AS (
                SELECT k.start_ns, k.end_ns, coalesce(k.stream_id, -1) AS stream_id, n.fn, n.name,
                       coalesce(k.pid, -1) AS pid
                FROM kernels k JOIN op_names n ON n.name = k.name AND NOT n.is_memop AND NOT n.via_op
                WHERE k.rank = $rank AND k.device_id = $device
                UNION ALL
                SELECT m.start_ns, m.end_ns, coalesce(m.stream_id, -1), n.fn, n.name, coalesce(m.pid, -1)
                FROM memops m JOIN op_names n ON n.name = m.kind AND n.is_memop
                WHERE m.rank = $rank AND m.device_id = $device),
            p AS (SELECT p.*, n.fn, n.name FROM launch_probe p JOIN op_names n ON n.code = p.code)
            SELECT p.i, count(d.start_ns), count(d.start_ns) FILTER (WHERE d.name = p.name) FROM p
            LEFT JOIN d ON d.pid = p.pid AND d.fn = p.fn AND (d.start_ns, d.end_ns, d.stream_id) < (p.s, p.e, p.st)
            GROUP BY p.i ORDER BY p.i
        """, {"rank": ops.rank, "device": ops.device_id}).fetchall()
    finally:
        con.unregister("launch_probe")
    return (np.array([r[1] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64))
