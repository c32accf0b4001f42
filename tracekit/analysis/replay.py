"""Graph replays mapped to their capture: each replayed kernel gets the op, shape and module that launched it.

A kernel replayed from a CUDA/HIP graph hangs off one graph-launch call, with no op above it. The capture
trace of the same process (``tracekit.store.captures``: the store's ``capture_*`` views) holds every launch
captured into the graph, with the kernel it names (``launch_kernels``), the op it ran in (innermost
``cpu_op`` on its thread), that op's shape (``op_shapes``, where recorded) and its module (innermost
``nn.Module: ...`` Python frame). Captures are cut into graphs at their stream-capture calls; each graph
launch of the replay is matched to the captured graph whose kernel-name sequence it best repeats (ties:
the graph at the same position in capture order), and its kernels to that graph's launches by node order
(an alignment of the two name sequences, so a node missing on either side shifts nothing).

Where the replay trace itself annotates its graph kernels (PyTorch's ``export_chrome_trace(...,
cuda_graph_annotations=...)`` writes ``graph node id`` and the capturing module's ``module_fqn`` into each
kernel's args, which the Kineto reader keeps as ``kernels.graph_node_id`` / ``annotation``), those annotations
attribute the kernels no capture matched, and so do Nsight Systems' graph node records (``graph_nodes``,
``--cuda-graph-trace=node``: the node a replayed kernel ran, traced back to its creation in the capture and the
host range around it). The result is the connection's ``replay_ops`` table (docs/schema.md),
one row per attributed replayed kernel, for op-level budgets and per-layer views; ``replay_section``
summarises it for the report.
"""

from __future__ import annotations

from collections import defaultdict
from difflib import SequenceMatcher
from typing import Any

import duckdb
import pyarrow as pa

from tracekit.store.captures import STREAM_CAPTURE_REGEX

#: Where each engine or profiler writes what maps graph replays to their ops, for a trace without it.
CAPTURE_HINTS = (
    "SGLang: --enable-profile-cuda-graph writes the capture traces (capture_traces/bs_<bs>_rank<r>.json.gz)",
    "vLLM: --profiler-config.capture_torch_profiler True (vLLM >= 0.26.0) writes "
    "capture_traces/graph_capture_rank_<r>.*.pt.trace.json.gz; VLLM_CUDA_GRAPH_ANNOTATIONS_PATH annotates kernels",
    "TRT-LLM: a profile with CUDA graphs off (LLM(..., cuda_graph_config=None)) shows the launching ops",
    "PyTorch: torch.cuda.graph(..., enable_annotations=True) and export_chrome_trace(..., "
    "cuda_graph_annotations=...) write each graph node's module into the trace",
    "Nsight Systems: --cuda-graph-trace=node traces each graph node's kernel",
)
REPLAY_OPS_COLUMNS = ("rank", "pid", "device_id", "graph_correlation_id", "start_ns", "end_ns", "kernel",
                      "capture_graph", "capture_node", "op", "op_start_ns", "op_shape", "module", "capture_pid",
                      "capture_tid", "capture_launch_ns")


def _captured(con: duckdb.DuckDBPyConnection) -> dict[int, list[list[tuple[Any, ...]]]]:
    """Per rank, its captured graphs in capture order: each a list of (kernel, op, op start, shape, module,
    capturing process and thread, captured launch's start)."""
    rows = con.execute("""
        WITH l AS (
            SELECT a.rank, a.pid, a.tid, a.start_ns, a.end_ns, lk.kernel FROM capture_api_calls a
            JOIN capture_launch_kernels lk
              ON lk.rank = a.rank AND lk.pid = a.pid AND lk.correlation_id = a.correlation_id
            WHERE NOT EXISTS (SELECT 1 FROM capture_kernels k
                              WHERE k.rank = a.rank AND k.pid = a.pid AND k.correlation_id = a.correlation_id)),
        ops AS (
            SELECT l.rank, l.pid, l.tid, l.start_ns, any_value(l.kernel) AS kernel,
                   arg_max(r.name, r.start_ns) FILTER (WHERE r.kind = 'op') AS op,
                   max(r.start_ns) FILTER (WHERE r.kind = 'op') AS op_start,
                   arg_max(r.name, r.start_ns) FILTER (WHERE r.kind = 'python') AS module
            FROM l LEFT JOIN capture_ranges r
              ON r.rank = l.rank AND r.pid = l.pid AND r.tid = l.tid AND r.start_ns <= l.start_ns
             AND r.end_ns >= l.end_ns
             AND (r.kind = 'op' OR (r.kind = 'python' AND starts_with(r.name, 'nn.Module: ')))
            GROUP BY l.rank, l.pid, l.tid, l.start_ns, l.end_ns)
        SELECT o.rank, o.pid, o.start_ns, o.kernel, o.op, o.op_start, s.input_dims, o.module, o.tid,
               (SELECT max(c.start_ns) FROM capture_api_calls c
                WHERE c.rank = o.rank AND c.pid = o.pid AND c.start_ns <= o.start_ns
                  AND regexp_matches(c.name, $capture)) AS graph_start
        FROM ops o LEFT JOIN capture_op_shapes s
          ON s.rank = o.rank AND s.pid = o.pid AND s.tid = o.tid AND s.start_ns = o.op_start
        ORDER BY o.rank, o.start_ns
    """, {"capture": STREAM_CAPTURE_REGEX}).fetchall()
    graphs: dict[int, dict[tuple[int, int], list[Any]]] = defaultdict(dict)
    for rank, pid, launch_ns, kernel, op, op_start, shape, module, tid, graph_start in rows:
        if graph_start is None:
            continue  # launched outside any stream capture
        module = module.removeprefix("nn.Module: ") if module else None
        graphs[rank].setdefault((pid, graph_start), []).append((kernel, op, op_start, shape, module, pid,
                                                                tid, launch_ns))
    return {rank: [g[k] for k in sorted(g, key=lambda k: k[1])] for rank, g in graphs.items()}


def _replayed(con: duckdb.DuckDBPyConnection) -> dict[int, list[tuple[int, int, list[tuple[Any, ...]]]]]:
    """Per rank, its graph launches in launch order: (pid, correlation id, kernels (device, start, end, name))."""
    rows = con.execute("""
        SELECT k.rank, k.pid, k.correlation_id, g.start_ns, k.device_id, k.start_ns, k.end_ns, k.name
        FROM kernels k JOIN launches g ON g.rank = k.rank AND g.pid = k.pid AND g.correlation_id = k.correlation_id
        WHERE g.is_graph_launch ORDER BY k.rank, g.start_ns, k.pid, k.correlation_id, k.start_ns, k.end_ns
    """).fetchall()
    launches: dict[int, dict[tuple[int, int, int], list[Any]]] = defaultdict(dict)
    for rank, pid, corr, g_start, device, s, e, name in rows:
        launches[rank].setdefault((g_start, pid, corr), []).append((device, s, e, name))
    return {rank: [(k[1], k[2], v) for k, v in sorted(g.items())] for rank, g in launches.items()}


def _best_graph(names: list[str], graphs: list[list[Any]], position: int) -> int:
    """The captured graph whose kernel names this launch best repeats; ties: nearest to its position."""
    def score(i: int) -> tuple[float, int]:
        other = [n[0] for n in graphs[i]]
        return (SequenceMatcher(None, names, other, autojunk=False).ratio(), -abs(i - position % len(graphs)))
    return max(range(len(graphs)), key=score)


def map_replays(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The ``replay_ops`` rows: every replayed kernel matched to a captured launch (REPLAY_OPS_COLUMNS)."""
    out: dict[str, list[Any]] = {c: [] for c in REPLAY_OPS_COLUMNS}
    captured = _captured(con)
    for rank, launches in _replayed(con).items():
        graphs = captured.get(rank)
        if not graphs:
            continue
        for position, (pid, corr, kernels) in enumerate(launches):
            names = [k[3] for k in kernels]
            g = _best_graph(names, graphs, position)
            nodes = graphs[g]
            matcher = SequenceMatcher(None, names, [n[0] for n in nodes], autojunk=False)
            for a, b, size in matcher.get_matching_blocks():
                for i in range(size):
                    device, s, e, name = kernels[a + i]
                    _, op, op_start, shape, module, c_pid, c_tid, c_ns = nodes[b + i]
                    for col, v in zip(REPLAY_OPS_COLUMNS, (rank, pid, device, corr, s, e, name, g, b + i, op, op_start,
                                                           shape, module, c_pid, c_tid, c_ns), strict=True):
                        out[col].append(v)
    types = {"rank": pa.int32(), "pid": pa.int64(), "device_id": pa.int32(), "graph_correlation_id": pa.int64(),
             "start_ns": pa.int64(), "end_ns": pa.int64(), "capture_graph": pa.int32(), "capture_node": pa.int32(),
             "op_start_ns": pa.int64(), "capture_pid": pa.int64(), "capture_tid": pa.int64(),
             "capture_launch_ns": pa.int64()}
    return pa.table({c: pa.array(v, types.get(c, pa.string())) for c, v in out.items()})


# Nsight Systems graph node records (graph_nodes): a replayed kernel's executable node, followed back through
# its clones (original_graph_node_id, at most 8 hops) to the node its capture created; the innermost host range
# on the creating thread at that moment is the op that captured it (PyTorch's autograd NVTX range, a user range).
_NODE_OPS_SQL = """
    INSERT INTO replay_ops
    WITH RECURSIVE chain(rank, pid, node, cur, hops) AS (
        SELECT DISTINCT rank, pid, graph_node_id, graph_node_id, 0 FROM kernels
        WHERE graph_node_id IS NOT NULL AND annotation IS NULL
        UNION ALL
        SELECT c.rank, c.pid, c.node, g.original_graph_node_id, c.hops + 1 FROM chain c
        JOIN graph_nodes g ON g.rank = c.rank AND g.pid = c.pid AND g.graph_node_id = c.cur
        WHERE g.original_graph_node_id IS NOT NULL AND g.original_graph_node_id <> c.cur AND c.hops < 8),
    root AS (SELECT rank, pid, node, arg_max(cur, hops) AS root FROM chain GROUP BY ALL),
    created AS (SELECT r.rank, r.pid, r.node, g.tid, g.start_ns FROM root r
                JOIN graph_nodes g ON g.rank = r.rank AND g.pid = r.pid AND g.graph_node_id = r.root
                WHERE g.original_graph_node_id IS NULL AND g.tid IS NOT NULL),
    op AS (SELECT c.rank, c.pid, c.node, arg_max(h.name, h.start_ns) AS op, max(h.start_ns) AS op_start
           FROM created c JOIN ranges h ON h.rank = c.rank AND h.pid = c.pid AND h.tid = c.tid
            AND h.device_id IS NULL AND h.start_ns <= c.start_ns AND h.end_ns >= c.start_ns
            AND h.kind IN ('range', 'op')
           GROUP BY ALL)
    SELECT k.rank, k.pid, k.device_id, k.correlation_id, k.start_ns, k.end_ns, k.name, NULL, k.graph_node_id,
           o.op, o.op_start, NULL, NULL, NULL, NULL, NULL
    FROM kernels k JOIN op o ON o.rank = k.rank AND o.pid = k.pid AND o.node = k.graph_node_id
    WHERE NOT EXISTS (SELECT 1 FROM replay_ops r WHERE r.rank = k.rank AND r.pid = k.pid AND r.device_id = k.device_id
                        AND r.start_ns = k.start_ns AND r.end_ns = k.end_ns AND r.kernel = k.name)
"""


def register_replay_ops(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) the connection's ``replay_ops`` table: kernels matched to a capture, then graph
    kernels the trace itself annotates (PyTorch ``cuda_graph_annotations``: ``module`` is the annotation's
    ``module_fqn``, ``capture_node`` the graph node id, ``op`` unknown). Once per connection: the op
    attribution (``tracekit.analysis.attribution``) and the report's ``graphs`` section read the same table."""
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = 'replay_ops'"
                   ).fetchall()[0][0]:
        return
    con.register("_replay_ops", map_replays(con))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE replay_ops AS SELECT * FROM _replay_ops")
    finally:
        con.unregister("_replay_ops")
    con.execute(_NODE_OPS_SQL)
    con.execute("""
        INSERT INTO replay_ops
        SELECT k.rank, k.pid, k.device_id, k.correlation_id, k.start_ns, k.end_ns, k.name, NULL, k.graph_node_id,
               NULL, NULL, NULL, k.annotation, NULL, NULL, NULL
        FROM kernels k WHERE k.annotation IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM replay_ops r WHERE r.rank = k.rank AND r.pid = k.pid AND r.device_id = k.device_id
              AND r.start_ns = k.start_ns AND r.end_ns = k.end_ns AND r.kernel = k.name)
    """)


def replay_section(con: duckdb.DuckDBPyConnection, captures: list[str]) -> dict[str, Any] | None:
    """The report's ``graphs``: replayed kernels and time, how much of it the capture attributes to ops, the
    modules that take most of it, and (without a capture) which option writes one. None without replays."""
    register_replay_ops(con)
    replayed = con.execute("""
        SELECT count(*), coalesce(sum(k.end_ns - k.start_ns), 0) FROM kernels k
        JOIN launches g ON g.rank = k.rank AND g.pid = k.pid AND g.correlation_id = k.correlation_id
        WHERE g.is_graph_launch
    """).fetchone()
    if not replayed[0]:
        return None
    n, ns = con.execute("""
        SELECT count(*), coalesce(sum(end_ns - start_ns), 0) FROM replay_ops
        WHERE op IS NOT NULL OR module IS NOT NULL
    """).fetchone()
    modules = con.execute("""
        SELECT coalesce(module, op) AS m, sum(end_ns - start_ns) AS ns, count(*) FROM replay_ops
        WHERE op IS NOT NULL OR module IS NOT NULL GROUP BY m ORDER BY ns DESC, m LIMIT 5
    """).fetchall()
    return {"captures": captures, "replayed_kernels": int(replayed[0]), "replayed_ns": int(replayed[1]),
            "attributed_kernels": int(n), "attributed_ns": int(ns),
            "attributed_fraction": ns / replayed[1] if replayed[1] else 0.0,
            "top_modules": [{"module": m, "ns": int(t), "kernels": int(c)} for m, t, c in modules],
            "how_to_attribute": [] if captures or n else list(CAPTURE_HINTS)}
