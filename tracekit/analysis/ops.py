"""GPU operations of one device with their class and launch call, as numpy columns.

Analysis reads the store one (rank, device) at a time, so memory grows with one device's events,
not with the whole trace. Names and classes travel as small integer codes into a shared vocabulary
(the ``name``/``cls`` object arrays point at one string object per distinct name), so a device with
millions of kernels costs tens of bytes per operation, and per-class sums are integer bin counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import duckdb
import numpy as np

from tracekit.budgets.classify import ClassRules, register_classes


@dataclass
class DeviceOps:
    """Kernels and memory operations of one device, sorted by start."""

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
    op_index: np.ndarray  # launch index of this kernel name within its process (for ncu --launch-skip)
    cls_code: np.ndarray  # int32 per op: index into class_names (cls == class_names[cls_code])
    class_names: np.ndarray  # object array of the distinct class names
    name_code: np.ndarray  # int32 per op: index into names (name == names[name_code])
    names: np.ndarray  # object array of the distinct op names

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @cached_property
    def max_dur_ns(self) -> int:
        return int((self.end_ns - self.start_ns).max()) if len(self) else 0


def prepare(con: duckdb.DuckDBPyConnection, rules: ClassRules) -> list[tuple[int, int]]:
    """Register kernel classes, the op-name vocabulary and the deduplicated launch table; return the
    (rank, device) pairs."""
    register_classes(con, rules)
    # One code per kernel name (with its class) and per memop kind (its own class); codes index the vocabulary.
    con.execute("""
        CREATE OR REPLACE TEMP TABLE op_names AS
        SELECT (row_number() OVER (ORDER BY is_memop, name) - 1)::INTEGER AS code, name, class, is_memop
        FROM (SELECT name, class, FALSE AS is_memop FROM kernel_class
              UNION ALL SELECT DISTINCT kind, kind, TRUE FROM memops WHERE kind IS NOT NULL)
    """)
    # The first call per (rank, pid, correlation id): a grouped arg_min, cheaper than a window sort.
    con.execute("""
        CREATE OR REPLACE TEMP TABLE launches AS
        SELECT rank, pid, correlation_id, first_call.tid AS tid, first_call.start_ns AS start_ns,
               first_call.end_ns AS end_ns, first_call.graph AS is_graph_launch
        FROM (
            SELECT rank, pid, correlation_id,
                   arg_min({'tid': tid, 'start_ns': start_ns, 'end_ns': end_ns,
                            'graph': contains(name, 'GraphLaunch')}, start_ns) AS first_call
            FROM api_calls WHERE NOT is_duplicate AND correlation_id IS NOT NULL
            GROUP BY rank, pid, correlation_id
        )
    """)
    return [tuple(r) for r in con.execute("""
        SELECT DISTINCT rank, device_id FROM kernels ORDER BY rank, device_id
    """).fetchall()]


def _objects(values: list[str]) -> np.ndarray:
    """A 1-d object array of the given strings."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _launch_index(pid: np.ndarray, name_code: np.ndarray) -> np.ndarray:
    """Per op (already in time order), how many earlier ops of the same process share its name."""
    order = np.lexsort((name_code, pid))  # stable: time order within each (pid, name)
    key_pid, key_name = pid[order], name_code[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (key_pid[1:] != key_pid[:-1]) | (key_name[1:] != key_name[:-1])
    group_start = np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
    index = np.empty(order.size, dtype=np.int64)
    index[order] = np.arange(order.size) - group_start
    return index


def load_device_ops(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> DeviceOps:
    """All kernels and memops of one device with class, launch call and per-name launch index."""
    vocab = con.execute("SELECT name, class FROM op_names ORDER BY code").fetchall()
    table = con.sql("""
        WITH k AS (
            SELECT k.start_ns, k.end_ns, k.stream_id, n.code, k.pid, k.correlation_id,
                   (k.graph_id IS NOT NULL OR k.graph_node_id IS NOT NULL) AS node_traced
            FROM kernels k JOIN op_names n ON n.name = k.name AND NOT n.is_memop
            WHERE k.rank = $rank AND k.device_id = $device
            UNION ALL
            SELECT m.start_ns, m.end_ns, m.stream_id, n.code, m.pid, m.correlation_id, FALSE
            FROM memops m JOIN op_names n ON n.name = m.kind AND n.is_memop
            WHERE m.rank = $rank AND m.device_id = $device
        )
        SELECT k.start_ns, k.end_ns, coalesce(k.stream_id, -1) AS stream_id, k.code,
               coalesce(k.pid, -1) AS pid,
               coalesce(l.tid, -1) AS launch_tid, coalesce(l.start_ns, -1) AS launch_start_ns,
               coalesce(l.end_ns, -1) AS launch_end_ns,
               (k.node_traced OR coalesce(l.is_graph_launch, FALSE)) AS in_graph
        FROM k LEFT JOIN launches l
          ON l.rank = $rank AND l.pid = k.pid AND l.correlation_id = k.correlation_id
    """, params={"rank": rank, "device": device_id}).to_arrow_table()

    def col(name: str, dtype: type) -> np.ndarray:
        return table.column(name).to_numpy().astype(dtype, copy=False)

    start, end = col("start_ns", np.int64), col("end_ns", np.int64)
    order = np.lexsort((end, start))
    code = col("code", np.int32)[order]
    pid = col("pid", np.int64)[order]
    names = _objects([v[0] for v in vocab])
    class_names = _objects(sorted({v[1] for v in vocab}))
    class_index = {c: i for i, c in enumerate(class_names)}
    cls_code = np.array([class_index[v[1]] for v in vocab], dtype=np.int32)[code]
    return DeviceOps(
        rank=rank, device_id=device_id, start_ns=start[order], end_ns=end[order],
        stream_id=col("stream_id", np.int64)[order], cls=class_names[cls_code], name=names[code], pid=pid,
        launch_tid=col("launch_tid", np.int64)[order], launch_start_ns=col("launch_start_ns", np.int64)[order],
        launch_end_ns=col("launch_end_ns", np.int64)[order], in_graph=col("in_graph", bool)[order],
        op_index=_launch_index(pid, code), cls_code=cls_code, class_names=class_names, name_code=code,
        names=names,
    )
