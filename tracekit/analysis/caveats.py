"""Capture caveats: properties of a capture that limit what an analysis can conclude."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from tracekit.parsers.schema import NO_GPU_ACTIVITY

GRAPH_LAUNCH_NAMES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")


# Reader notes that do not limit an analysis (still listed by `tracekit info` under "read notes").
INFORMATIONAL_NOTES = frozenset({"backtrace_duplicates", "invalid_utf8", "no_rank"})
# Kineto categories that carry nothing an analysis reads: flow arrows and instant markers.
EXPECTED_SKIPS = frozenset({"ac2g", "async", "async_cpu_to_gpu", "fwdbwd", "Trace", "cpu_instant_event",
                            "(no category, ph i)"})


@dataclass(frozen=True)
class Caveat:
    """A property of the capture that limits what an analysis can conclude."""

    kind: str
    rank: int
    text: str


def _rank_list(ranks: list[int]) -> str:
    """'0-3, 5, 7' for ranks 0, 1, 2, 3, 5, 7."""
    ranks = sorted(set(ranks))
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


def caveat_texts(caveats: list[Caveat]) -> list[str]:
    """Each caveat once: ranks whose caveat says the same thing (after its ``rank N: `` prefix) share one
    line naming them all (``ranks 0-7: ...``), in the order the first of them came."""
    bodies: dict[str, list[int]] = {}
    whole: dict[str, None] = {}
    for c in caveats:
        prefix = f"rank {c.rank}: "
        if c.text.startswith(prefix):
            bodies.setdefault(c.text[len(prefix):], []).append(c.rank)
            whole.setdefault(c.text[len(prefix):], None)
        else:
            whole.setdefault(c.text, None)
    out = []
    for text in whole:
        ranks = bodies.get(text)
        if ranks is None:
            out.append(text)
        else:
            out.append(f"rank{'s' if len(set(ranks)) > 1 else ''} {_rank_list(ranks)}: {text}")
    return out


def capture_caveats(con: duckdb.DuckDBPyConnection) -> list[Caveat]:
    """Caveats per rank: whole-graph capture, no NVTX/annotations, unmatched launches, a profiler capture that
    began after the process's first steps, reader notes."""
    caveats: list[Caveat] = []
    graph_sql = """
        WITH g AS (
            SELECT a.rank, a.pid, a.correlation_id FROM api_calls a
            WHERE NOT a.is_duplicate AND regexp_replace(a.name, '_v[0-9]+$', '') IN (SELECT unnest(?))
        )
        SELECT g.rank, count(DISTINCT (g.pid, g.correlation_id)) AS launches, count(k.correlation_id) AS kernels
        FROM g LEFT JOIN kernels k
          ON k.rank = g.rank AND k.pid = g.pid AND k.correlation_id = g.correlation_id
        GROUP BY g.rank ORDER BY g.rank
    """
    for rank, launches, kernels in con.execute(graph_sql, [list(GRAPH_LAUNCH_NAMES)]).fetchall():
        if kernels == 0:
            caveats.append(Caveat("graph_whole", rank, f"rank {rank}: {launches} CUDA/HIP graph launches but no "
                                  "kernels traced inside them (graphs captured whole; re-capture with "
                                  "nsys --cuda-graph-trace=node)"))
        else:
            caveats.append(Caveat("graph_nodes", rank, f"rank {rank}: {launches} graph launches carry {kernels} "
                                  "kernels (traced per node)"))
    no_ranges = con.execute("""
        SELECT t.rank FROM trace_info t
        WHERE NOT EXISTS (SELECT 1 FROM ranges r WHERE r.rank = t.rank AND r.source IN
                          ('nvtx', 'user_annotation', 'gpu_user_annotation'))
        ORDER BY t.rank
    """).fetchall()
    for (rank,) in no_ranges:
        caveats.append(Caveat("no_ranges", rank, f"rank {rank}: no NVTX ranges or user annotations "
                              "(no step markers or phase names)"))
    unmatched = con.execute("""
        SELECT k.rank, count(*) FROM kernels k ANTI JOIN
            (SELECT rank, pid, correlation_id FROM api_calls WHERE NOT is_duplicate) a
            ON k.rank = a.rank AND k.pid = a.pid AND k.correlation_id = a.correlation_id
        GROUP BY k.rank ORDER BY k.rank
    """).fetchall()
    for rank, n in unmatched:
        caveats.append(Caveat("unmatched_launch", rank, f"rank {rank}: {n} kernels without their launch call in "
                              "the capture (launched before it began, or API tracing off)"))
    late = con.execute(r"""
        SELECT rank, 'ProfilerStep#' || first_step FROM (
            SELECT rank, min(CAST(regexp_extract(name, '^ProfilerStep#(\d+)\n?$', 1) AS BIGINT)) AS first_step
            FROM ranges WHERE regexp_matches(name, '^ProfilerStep#\d+\n?$') GROUP BY rank)
        WHERE first_step > 0 ORDER BY rank
    """).fetchall()
    late += con.execute("""
        SELECT rank, 'a ' || coalesce(nullif(trigger, 'Immediate'), 'delayed') || ' start' FROM (
            SELECT rank, max(value) FILTER (WHERE key = 'START_TRIGGER') AS trigger,
                   max(TRY_CAST(value AS BIGINT)) FILTER (WHERE key = 'START_DELAY_MS') AS delay_ms
            FROM trace_meta GROUP BY rank)
        WHERE coalesce(trigger, 'Immediate') <> 'Immediate' OR coalesce(delay_ms, 0) > 0 ORDER BY rank
    """).fetchall()
    for rank, start in late:
        caveats.append(Caveat("late_start", rank, f"rank {rank}: the capture starts at {start}: kernels launched "
                              "before it are not in the trace, so an ncu --launch-skip counts from the capture's "
                              "first launch (profile from process start for exact skips)"))
    for rank, kind, count, detail in con.execute(
        "SELECT rank, kind, count, detail FROM read_notes ORDER BY rank, kind, detail"
    ).fetchall():
        if kind == "unmatched_launch" or kind in INFORMATIONAL_NOTES:
            continue  # counted above from the tables themselves, or no limit on what can be concluded
        if kind == "skipped_events" and detail in EXPECTED_SKIPS:
            continue
        if kind == NO_GPU_ACTIVITY:
            caveats.append(Caveat(kind, rank, f"rank {rank}: no GPU activity: {detail}"))
            continue
        caveats.append(Caveat(kind, rank, f"rank {rank}: {kind}: {count} ({detail})" if detail
                              else f"rank {rank}: {kind}: {count}"))
    return caveats
