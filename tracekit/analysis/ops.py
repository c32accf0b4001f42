"""GPU operations of one device with their class and launch call, as numpy columns.

Analysis reads the store one (rank, device) at a time, so memory grows with one device's events,
not with the whole trace.
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

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @cached_property
    def max_dur_ns(self) -> int:
        return int((self.end_ns - self.start_ns).max()) if len(self) else 0


def prepare(con: duckdb.DuckDBPyConnection, rules: ClassRules) -> list[tuple[int, int]]:
    """Register kernel classes and the deduplicated launch table; return the (rank, device) pairs."""
    register_classes(con, rules)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE launches AS
        SELECT rank, pid, correlation_id, tid, start_ns, end_ns, name FROM api_calls
        WHERE NOT is_duplicate AND correlation_id IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY rank, pid, correlation_id ORDER BY start_ns) = 1
    """)
    return [tuple(r) for r in con.execute("""
        SELECT DISTINCT rank, device_id FROM kernels ORDER BY rank, device_id
    """).fetchall()]


def load_device_ops(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> DeviceOps:
    """All kernels and memops of one device with class, launch call and per-name launch index."""
    table = con.sql("""
        WITH k AS (
            SELECT k.start_ns, k.end_ns, k.stream_id, c.class AS cls, k.name, k.pid, k.correlation_id,
                   (k.graph_id IS NOT NULL OR k.graph_node_id IS NOT NULL) AS node_traced
            FROM kernels k JOIN kernel_class c USING (name)
            WHERE k.rank = $rank AND k.device_id = $device
            UNION ALL
            SELECT m.start_ns, m.end_ns, m.stream_id, m.kind, m.kind, m.pid, m.correlation_id, FALSE
            FROM memops m WHERE m.rank = $rank AND m.device_id = $device
        )
        SELECT k.start_ns, k.end_ns, coalesce(k.stream_id, -1) AS stream_id, k.cls, k.name,
               coalesce(k.pid, -1) AS pid,
               coalesce(l.tid, -1) AS launch_tid, coalesce(l.start_ns, -1) AS launch_start_ns,
               coalesce(l.end_ns, -1) AS launch_end_ns,
               (k.node_traced OR coalesce(regexp_matches(l.name, 'GraphLaunch'), FALSE)) AS in_graph,
               row_number() OVER (PARTITION BY k.pid, k.name ORDER BY k.start_ns) - 1 AS op_index
        FROM k LEFT JOIN launches l
          ON l.rank = $rank AND l.pid = k.pid AND l.correlation_id = k.correlation_id
        ORDER BY k.start_ns, k.end_ns
    """, params={"rank": rank, "device": device_id}).to_arrow_table()
    col = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    return DeviceOps(
        rank=rank, device_id=device_id,
        start_ns=col["start_ns"].astype(np.int64), end_ns=col["end_ns"].astype(np.int64),
        stream_id=col["stream_id"].astype(np.int64), cls=col["cls"].astype(object),
        name=col["name"].astype(object), pid=col["pid"].astype(np.int64),
        launch_tid=col["launch_tid"].astype(np.int64), launch_start_ns=col["launch_start_ns"].astype(np.int64),
        launch_end_ns=col["launch_end_ns"].astype(np.int64), in_graph=col["in_graph"].astype(bool),
        op_index=col["op_index"].astype(np.int64),
    )
