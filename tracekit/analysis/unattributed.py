"""``kernel_ops`` of a capture with no cpu op and no ``nn.Module`` frame: a view over ``gpu_ops``, no copy.

Only cpu ops give a GPU operation its unit, only modules its module, and only an attention op or module makes
it attention (``tracekit.analysis.attribution``): where the host ranges are user ranges alone (NVTX, roctx,
record_function; the common case of an Nsight Systems export taken without PyTorch's ranges) or there are none,
every operation's unit and module are -1, its attention flag false and its class its name's (a memop's: its
kind). What is left per operation is its launching node, the innermost range open on the launching thread when
the launch call began. That is a step function of time per thread, which changes only where a range starts or
ends: ``timeline`` evaluates it there (``nest`` at each range boundary, a few rows per range), and the view
reads it with an as-of join at each launch. The same values as ``launching_nodes`` and ``attribute`` give, for
no per-kernel frame in Python and no per-kernel table: a reader that filters on the constant columns
(``attention``, ``unit >= 0``, ``module >= 0``) is left nothing to scan.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from tracekit.analysis.nesting import nest

#: the innermost node open on each thread from ``at_ns`` on (until the thread's next row; -1: none)
TIMELINE_TABLE = "_node_timeline"
#: the kernel classes ``kernel_ops`` was registered with (a copy: ``kernel_class`` may be registered again)
CLASS_TABLE = "_kernel_ops_class"

VIEW_SQL = f"""
    WITH l AS (SELECT rank, pid, correlation_id, arg_min(tid, start_ns) AS tid, min(start_ns) AS launch_ns
               FROM launches GROUP BY rank, pid, correlation_id),
    g AS (SELECT g.*, l.tid, coalesce(l.launch_ns, -1) AS launch_ns
          FROM gpu_ops g LEFT JOIN l ON l.rank = g.rank AND l.pid = g.pid AND l.correlation_id = g.correlation_id)
    SELECT g.rank, g.device_id, g.stream_id, g.start_ns, g.end_ns, g.dur_ns, g.name, g.is_memop, g.tid,
           g.launch_ns, g.pid, coalesce(t.node, -1)::BIGINT AS node, -1::BIGINT AS unit, -1::BIGINT AS module,
           FALSE AS attention,
           CASE WHEN g.is_memop THEN g.name WHEN g.name IS NULL THEN 'other' ELSE coalesce(c.class, 'other') END
             AS class
    FROM g ASOF LEFT JOIN {TIMELINE_TABLE} t
      ON t.rank = g.rank AND t.pid = g.pid AND t.tid = g.tid AND t.at_ns <= g.launch_ns
    LEFT JOIN {CLASS_TABLE} c ON NOT g.is_memop AND c.name = g.name
"""


def unattributable(nodes: pl.DataFrame) -> bool:
    """Whether no node can give a GPU operation a unit, a module or attention: none is a cpu op or a module."""
    return not nodes["source"].is_in(["op", "python"]).any()


def timeline(nodes: pl.DataFrame) -> pl.DataFrame:
    """Per thread of ``nodes`` (``op_nodes``' frame) and each start or end of one of its ranges, the innermost
    node open there (``nest``, -1 none): (rank, pid, tid, at_ns, node). Between two such times no range starts
    or ends, so the innermost range open at any time is that of the last row at or before it."""
    thread = nodes["thread"].to_numpy()
    start, end = nodes["start_ns"].to_numpy(), nodes["end_ns"].to_numpy()
    points = (pl.DataFrame({"thread": np.concatenate([thread, thread]), "at_ns": np.concatenate([start, end])})
              .unique().sort("thread", "at_ns"))
    _, inner = nest(thread, start, end, points["thread"].to_numpy(), points["at_ns"].to_numpy())
    keys = nodes.select("thread", "rank", "pid", "tid").unique("thread")
    return (points.with_columns(pl.Series("node", inner, dtype=pl.Int64)).join(keys, on="thread", how="left")
            .select("rank", "pid", "tid", "at_ns", "node"))


def register_view(con: duckdb.DuckDBPyConnection, nodes: pl.DataFrame) -> None:
    """``kernel_ops`` as the view ``VIEW_SQL`` over ``gpu_ops``, for ``nodes`` that are ``unattributable``."""
    frame = timeline(nodes)  # noqa: F841 - read by DuckDB below
    con.execute(f"CREATE TEMP TABLE {TIMELINE_TABLE} AS SELECT * FROM frame")
    con.execute(f"CREATE TEMP TABLE {CLASS_TABLE} AS SELECT name, class FROM kernel_class")
    con.execute(f"CREATE TEMP VIEW kernel_ops AS {VIEW_SQL}")
