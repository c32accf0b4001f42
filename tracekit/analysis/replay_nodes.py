"""Replayed graph kernels fed to the op attribution: each gets the ops and modules that captured it.

A kernel replayed from a CUDA/HIP graph hangs off its graph-launch call, with no op above it. Where the
capture trace of the same process is given (``tracekit.analysis.replay``: ``replay_ops`` with the captured
launch's thread and start), the capture's host ranges (its cpu ops with their recorded shapes, its
``nn.Module`` frames) are nodes too, and a replayed kernel's launching node is the innermost capture range
open at its captured launch. One graph is replayed many times, and each replay is work of its own: the
capture's ops that a graph launch's kernels ran under (and everything under them) are copied once per graph
launch, so every replay's op is a unit of its own with the capturing op's shapes; the modules and ranges
above every op (the model, its layers) stay one node for all launches, as the capture has them, unless the
replay trace has a module open at the graph launch (vLLM's piecewise graphs run inside the replay's own
modules): then the replay's modules are the ones that ran and the capture's are left out. A node with no
parent left hangs under the node open at the (first) graph launch in the replay trace. The
copies follow the replay trace's nodes in ``_op_nodes`` (``node`` numbers go on from there).
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

#: the store's views of a graph-capture trace (``tracekit.store.captures``)
CAPTURE_PREFIX = "capture_"


def replayed_rows(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The replayed kernels matched to a captured launch (``replay_ops`` with a capture thread), one row each."""
    return con.sql("""
        SELECT rank, pid, device_id, start_ns, end_ns, kernel AS name, graph_correlation_id,
               capture_pid, capture_tid, capture_launch_ns
        FROM replay_ops WHERE capture_tid IS NOT NULL AND capture_launch_ns IS NOT NULL
        ORDER BY rank, pid, graph_correlation_id, start_ns, end_ns, name
    """).pl()


def copy_replayed(con: duckdb.DuckDBPyConnection, nodes: pl.DataFrame, gpu: pl.DataFrame, capture: pl.DataFrame,
                  rows: pl.DataFrame, inner: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``nodes`` with the copies of the capture nodes each graph launch used, and ``gpu`` with each replayed
    kernel's ``node`` set to its copy. ``capture``: the capture's nodes (``op_nodes`` frame of the capture
    tables, in the temp table ``_capture_nodes``); ``rows``: ``replayed_rows``; ``inner``: per row, the
    innermost capture node open at its captured launch (-1 none)."""
    keep = inner >= 0
    rows, inner = rows.filter(pl.Series(keep)), inner[keep]
    if rows.is_empty():
        return nodes, gpu
    parent = capture["parent"].to_numpy()
    launch_keys = rows.select("rank", "pid", "graph_correlation_id")
    launch = launch_keys.with_row_index("i").join(
        launch_keys.unique(maintain_order=True).with_row_index("launch"),
        on=["rank", "pid", "graph_correlation_id"], how="left").sort("i")["launch"].to_numpy().astype(np.int64)
    # every (graph launch, capture node) a launch's kernels sit under, their ancestors included
    pairs_l, pairs_n = [launch], [inner]
    cur_l, cur_n = launch, inner
    while len(cur_n):
        up = parent[cur_n]
        live = up >= 0
        cur_l, cur_n = cur_l[live], up[live]
        pairs_l.append(cur_l)
        pairs_n.append(cur_n)
    # The node open at each graph launch in the replay trace, and whether a module is open there (vLLM's
    # piecewise graphs run inside the replay's own modules; SGLang's whole-forward graph inside none).
    launcher = (gpu.join(rows.select("rank", "pid", "device_id", "start_ns", "end_ns", "name")
                         .with_columns(pl.Series("launch", launch)),
                         on=["rank", "pid", "device_id", "start_ns", "end_ns", "name"], how="inner")
                .group_by("launch").agg(pl.col("node").min().alias("launcher")).sort("launch"))
    context = np.zeros(int(launch.max()) + 1, dtype=bool)
    context[launcher["launch"].to_numpy()] = _in_module(nodes, launcher["launcher"].to_numpy())
    # An op, and all under it, is copied per graph launch. The modules and ranges above every op (the model, its
    # layers) are one node for all launches, as in the capture, where the replay trace has no module around the
    # launch; where it has one, the replay's modules are the ones that ran, and the capture's are left out.
    under_op = _under_op(capture)
    all_l, all_n = np.concatenate(pairs_l), np.concatenate(pairs_n)
    owner = np.where(under_op[all_n], all_l, np.where(context[all_l], -2, -1))
    pairs = (pl.DataFrame({"launch": all_l, "cnode": all_n, "owner": owner}).filter(pl.col("owner") != -2)
             .group_by("owner", "cnode").agg(pl.col("launch").min().alias("first")).sort("owner", "cnode"))
    base = len(nodes)
    cparent = parent[pairs["cnode"].to_numpy()]
    pairs = pairs.with_columns(
        (pl.int_range(pl.len(), dtype=pl.Int64) + base).alias("copy"), pl.Series("cparent", cparent),
        pl.Series("powner", np.where((cparent >= 0) & under_op[np.maximum(cparent, 0)], pairs["owner"],
                                     np.where(context[pairs["first"].to_numpy()], -2, -1))))
    # a copy's parent: the copy of its capture parent, else the node open at the graph launch (the first one's)
    pairs = (pairs.join(pairs.select(pl.col("owner").alias("powner"), pl.col("cnode").alias("cparent"),
                                     pl.col("copy").alias("pcopy")), on=["powner", "cparent"], how="left")
             .join(launcher, left_on="first", right_on="launch", how="left")
             .with_columns(pl.coalesce("pcopy", "launcher", pl.lit(-1, pl.Int64)).alias("parent"))
             .sort("copy"))
    copies = pairs.select("copy", "cnode")  # noqa: F841 - read by DuckDB below
    con.execute("INSERT INTO _op_nodes SELECT c.* REPLACE (x.copy AS node, -1 AS thread) "
                "FROM copies x JOIN _capture_nodes c ON c.node = x.cnode ORDER BY x.copy")
    extra = (capture.drop("parent").join(pairs.select("cnode", "copy", "parent"), left_on="node", right_on="cnode")
             .sort("copy").with_columns(pl.col("copy").alias("node"), pl.lit(-1, pl.Int64).alias("thread"))
             .drop("copy").select(nodes.columns))
    node_of = rows.select("rank", "pid", "device_id", "start_ns", "end_ns", "name").with_columns(
        pl.Series("owner", np.where(under_op[inner], launch, np.where(context[launch], -2, -1))),
        pl.Series("cnode", inner)).join(
        pairs.select("owner", "cnode", "copy"), on=["owner", "cnode"], how="left")
    gpu = (gpu.with_row_index("_row")
           .join(node_of.select("rank", "pid", "device_id", "start_ns", "end_ns", "name", "copy")
                 .unique(["rank", "pid", "device_id", "start_ns", "end_ns", "name"], keep="first"),
                 on=["rank", "pid", "device_id", "start_ns", "end_ns", "name"], how="left")
           .sort("_row").with_columns(pl.coalesce("copy", "node").alias("node")).drop("_row", "copy"))
    return pl.concat([nodes, extra.cast(nodes.schema)]), gpu


def _under_op(capture: pl.DataFrame) -> np.ndarray:
    """Per capture node: whether it is a cpu op or under one (nodes come in order, a parent before its children)."""
    parent = capture["parent"].to_numpy()
    under = (capture["source"] == "op").to_numpy().copy()
    for i in np.flatnonzero(parent >= 0).tolist():
        under[i] |= under[parent[i]]
    return under


def _in_module(nodes: pl.DataFrame, start: np.ndarray) -> np.ndarray:
    """Per node of ``start`` (-1: none): whether it or a node above it is an ``nn.Module``."""
    parent = nodes["parent"].to_numpy()
    module = (nodes["source"] == "python").to_numpy()
    out = np.zeros(len(start), dtype=bool)
    cur = start.astype(np.int64).copy()
    while (live := cur >= 0).any():
        out[live] |= module[cur[live]]
        cur[live] = parent[cur[live]]
    return out
