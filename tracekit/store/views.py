"""Named SQL views over the store tables: the joins and tests every analysis needs, each defined once.

Like the standard library of Perfetto's trace processor: an analysis selects from ``gpu_ops`` or
``graph_launches`` instead of re-deriving the join. Every view has all ranks (``rank`` column) and is
documented in docs/schema.md; ``open_store`` creates them on each connection.
"""

from __future__ import annotations

import duckdb

from tracekit.parsers.schema import GRAPH_LAUNCH_APIS, PROFILER_STEP_REGEX

# A graph launch API call, whatever its suffixes (cudaGraphLaunch_v10000, cudaGraphLaunch_ptsz).
IS_GRAPH_LAUNCH = "regexp_matches(name, '^({})(_v[0-9]+)?(_ptsz|_spt)?$')".format("|".join(GRAPH_LAUNCH_APIS))

VIEWS: dict[str, str] = {
    # Host API calls once each: Kineto files can record a call twice (is_duplicate marks the copy).
    "launches": f"""
        SELECT rank, pid, tid, correlation_id, name, start_ns, end_ns, dur_ns,
               {IS_GRAPH_LAUNCH} AS is_graph_launch
        FROM api_calls WHERE NOT is_duplicate
    """,
    # Graph launch calls with the number of kernels traced under their correlation id (0: captured whole).
    "graph_launches": """
        SELECT g.rank, g.pid, g.correlation_id, any_value(g.start_ns) AS start_ns,
               count(k.correlation_id) AS kernels
        FROM launches g LEFT JOIN kernels k
          ON k.rank = g.rank AND k.pid = g.pid AND k.correlation_id = g.correlation_id
        WHERE g.is_graph_launch
        GROUP BY g.rank, g.pid, g.correlation_id
    """,
    # Every GPU operation, kernels and memory copies/sets alike; a memop's name is its kind.
    "gpu_ops": """
        SELECT rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns AS dur_ns, name, FALSE AS is_memop,
               pid, correlation_id
        FROM kernels
        UNION ALL
        SELECT rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns AS dur_ns, kind, TRUE,
               pid, correlation_id
        FROM memops
    """,
    # User ranges, whatever the format wrote them as (NVTX, roctx, record_function): what step markers, engine
    # annotations and collective calls are found in.
    "user_ranges": "SELECT * FROM ranges WHERE kind = 'range'",
    # Devices that ran kernels (a capture's device list can name idle GPUs of the node).
    "used_devices": """
        SELECT d.* FROM devices d
        WHERE EXISTS (SELECT 1 FROM kernels k WHERE k.rank = d.rank AND k.device_id = d.device_id)
    """,
    # PyTorch profiler step annotations with their step number.
    "profiler_steps": f"""
        SELECT rank, pid, start_ns, end_ns, name,
               CAST(regexp_extract(name, '{PROFILER_STEP_REGEX}', 1) AS BIGINT) AS step
        FROM ranges WHERE regexp_matches(name, '{PROFILER_STEP_REGEX}')
    """,
}


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create every named view on ``con``, over the store tables already visible there."""
    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")
