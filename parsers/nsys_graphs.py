"""CUDA graph node records of an Nsight Systems export (``--cuda-graph-trace=node``): ``CUDA_GRAPH_NODE_EVENTS``.

Each row is a node created on a thread at ``start`` (during stream capture: inside the captured launch call,
so the host ranges around it name the op that captured it) or cloned from ``originalGraphNodeId`` (graph
instantiation gives every executable node a new id). A replayed kernel's ``graphNodeId`` is its executable
node; following ``original_graph_node_id`` leads to the node its capture created
(``tracekit.analysis.replay``). Exports without the table (graph-level tracing, no graphs) store nothing.
"""

from __future__ import annotations

from typing import Any

WANTED = ["start", "globalTid", "graphNodeId", "originalGraphNodeId"]


def read_graph_nodes(reader: Any, pid_sql: str, tid_sql: str) -> None:
    """Load the export's graph node records into the store's ``graph_nodes`` (``reader``: the nsys reader)."""
    found = reader._columns("CUDA_GRAPH_NODE_EVENTS", WANTED, ["start", "graphNodeId"])
    if found is None:
        return
    table, select = found
    have = set(reader.info.tables[table])
    tid = "g.globalTid" if "globalTid" in have else "NULL"
    original = "g.originalGraphNodeId" if "originalGraphNodeId" in have else "NULL"
    reader._insert(
        f"""INSERT INTO graph_nodes (pid, tid, start_ns, graph_node_id, original_graph_node_id)
            SELECT {pid_sql.format(g=tid)}, {tid_sql.format(g=tid)}, g.start, g.graphNodeId, {original}
            FROM _nsys_g g WHERE g.graphNodeId IS NOT NULL""",
        {"_nsys_g": reader._stream(f"SELECT {select} FROM {table}", table)},
    )
