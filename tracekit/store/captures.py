"""Graph-capture traces given beside the replay traces of the same process: recognised, kept out of the ranks.

Serving engines write the capture of their CUDA/HIP graphs as a trace of its own (SGLang
``capture_traces/bs_<bs>_rank<r>.json.gz``, vLLM ``graph_capture_rank_<r>.*.pt.trace.json.gz``). Such a file is
no rank: it holds the ops, shapes and modules that launched each graph node, which its replay trace lacks
(``tracekit.analysis.replay`` maps them). It is recognised by content (stream captures, and more kernel
launches captured without a kernel of their own than kernels run) or by those names with a stream capture.
Its tables are the store's ``capture_*`` views, under the rank the replay files give its process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")
#: The engines' names for their capture traces (SGLang's capture_traces/bs_32_rank0, vLLM's graph_capture_rank_0).
CAPTURE_NAME_REGEX = re.compile(r"graph_capture|capture_traces|(^|[_/])bs_\d+_rank\d+")
#: The call that begins a stream capture (CUDA runtime, HIP, CUDA driver): a graph's capture starts there.
STREAM_CAPTURE_REGEX = r"^(cuda|hip|cu)StreamBeginCapture"
#: Store tables a capture trace keeps under ``capture_<table>``.
CAPTURE_TABLES = ("trace_info", "api_calls", "kernels", "ranges", "op_shapes", "launch_kernels")


def is_graph_capture(con: duckdb.DuckDBPyConnection, alias: str, path: Path) -> bool:
    """Whether the attached store ``alias`` (of ``path``) is a graph-capture trace.

    The launches without a kernel are counted only for a store that begins a stream capture: on a trace of
    a million launches that anti-join is most of the opening's time, and most traces capture no graph."""
    if not con.execute(f"SELECT EXISTS (SELECT 1 FROM {alias}.api_calls "
                       f"WHERE regexp_matches(name, '{STREAM_CAPTURE_REGEX}'))").fetchone()[0]:
        return False
    if CAPTURE_NAME_REGEX.search(path.as_posix()):
        return True
    captured, executed = con.execute(f"""
        SELECT (SELECT count(*) FROM {alias}.api_calls a
                WHERE regexp_matches(a.name, 'Launch') AND NOT regexp_matches(a.name, 'GraphLaunch')
                  AND NOT EXISTS (SELECT 1 FROM {alias}.kernels k
                                  WHERE k.pid = a.pid AND k.correlation_id = a.correlation_id)),
               (SELECT count(*) FROM {alias}.kernels)
    """).fetchone()
    return captured > executed


def create_capture_views(con: duckdb.DuckDBPyConnection, aliases: list[str], ranks: list[int]) -> None:
    """``capture_<table>`` views over the capture stores (``aliases``), each under its rank (empty: none)."""
    for table in CAPTURE_TABLES:
        parts = [f"SELECT * REPLACE (CAST({r} AS INTEGER) AS rank) FROM {a}.{table}"
                 for a, r in zip(aliases, ranks, strict=True)]
        sql = " UNION ALL ".join(parts) if parts else f"SELECT * FROM {table} WHERE FALSE"
        con.execute(f"CREATE VIEW capture_{table} AS {sql}")


def split_captures(con: duckdb.DuckDBPyConnection, results: Sequence[T], enabled: bool
                   ) -> tuple[list[T], list[str], list[T], list[str]]:
    """(traces, their aliases, graph-capture traces, their aliases) of the attached stores f0, f1, ... of
    ``results`` (each with a ``source`` path). A capture given alone, or ``enabled`` false (one file of a set
    opened under its ranks), stays a trace: it is analysed as what it is (and refused: no step to judge)."""
    aliases = [f"f{i}" for i in range(len(results))]
    enabled = enabled and len(results) > 1  # a file alone stays a trace: nothing to look for
    captured = [i for i, r in enumerate(results) if is_graph_capture(con, aliases[i], r.source)] if enabled else []
    if len(captured) == len(results):
        captured = []
    keep = [i for i in range(len(results)) if i not in captured]
    return ([results[i] for i in keep], [aliases[i] for i in keep], [results[i] for i in captured],
            [aliases[i] for i in captured])


def captured_ranks(con: duckdb.DuckDBPyConnection, aliases: list[str], mappings: list[dict[Any, int]]) -> list[int]:
    """Each capture trace's rank: the rank it names where a replay file names it too, else the first one."""
    named = {local: g for m in mappings for local, g in m.items() if local is not None}
    first = min(m[None] for m in mappings) if mappings else 0
    out = []
    for alias in aliases:
        local = con.execute(f"SELECT min(rank) FROM {alias}.trace_info").fetchone()[0]
        out.append(named.get(local, first))
    return out
