"""Capture caveats: properties of a capture that limit what an analysis can conclude."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from tracekit.analysis.crossrank import RankMeta
from tracekit.analysis.steps import ENGINE_STEP_REGEX, STEP_MARKER_REGEX
from tracekit.analysis.verdict import ms
from tracekit.analysis.waits import waits_section
from tracekit.parsers.schema import ATTENTION_OP_REGEX, NO_GPU_ACTIVITY  # the ops whose shapes readers keep
from tracekit.store.captures import STREAM_CAPTURE_REGEX

#: Kernel launch calls (runtime and driver, CUDA and HIP); graph launches are not kernel launches.
KERNEL_LAUNCH_REGEX = (r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|ModuleLaunchKernel|"
                       r"ExtModuleLaunchKernel|ExtLaunchKernel|HccModuleLaunchKernel)(_v\d+)?$|"
                       r"^cuLaunch(Kernel|KernelEx|CooperativeKernel)(_ptsz)?$")
#: Caveats that leave nothing to judge: the verdict is inconclusive with their text as the reason.
BLOCKING_CAVEATS = frozenset({"graph_whole", "graph_capture_only"})
#: Host process names of serving engines, whose traces come from the engine's profiler endpoint.
ENGINE_PROCESS_REGEX = r"^(VLLM::|sglang::|TRTLLM|trtllm)"


# Reader notes that do not limit an analysis (still listed by `tracekit info` under "read notes").
INFORMATIONAL_NOTES = frozenset({"backtrace_duplicates", "invalid_utf8", "no_rank", "ranks_from_processes"})
# Kineto categories of accelerators tracekit does not read (unsupported_devices names them).
ACCELERATOR_CATEGORIES = ("mtia_", "xla", "tpu", "hpu")
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


def capture_caveats(con: duckdb.DuckDBPyConnection, step_regex: str | None = None) -> list[Caveat]:
    """Caveats per rank: an unsupported accelerator, whole-graph capture, graph replays without their capture
    trace, no NVTX/annotations or no step markers (unless ``step_regex`` names them), unmatched launches,
    dropped or unflushed events, missing shapes or stacks, a profiler capture that began after the process's
    first steps, clock domains without a wall-clock base, reader notes (`tracekit doctor` gives the fix of each)."""
    caveats: list[Caveat] = [Caveat("unsupported_device", rank, f"rank {rank}: {text}")
                             for rank, text in unsupported_devices(con)]
    graph_sql = """
        SELECT rank, count(*) AS launches, sum(kernels) AS kernels FROM graph_launches GROUP BY rank ORDER BY rank
    """
    for rank, launches, kernels in con.execute(graph_sql).fetchall():
        if kernels == 0:
            caveats.append(Caveat("graph_whole", rank, f"rank {rank}: {launches} CUDA/HIP graph launches but no "
                                  "kernels traced inside them (graphs captured whole; re-capture with "
                                  "nsys --cuda-graph-trace=node)"))
        else:
            caveats.append(Caveat("graph_nodes", rank, f"rank {rank}: {launches} graph launches carry {kernels} "
                                  "kernels (traced per node)"))
    no_ranges = con.execute("""
        SELECT t.rank FROM trace_info t
        WHERE NOT EXISTS (SELECT 1 FROM ranges r WHERE r.rank = t.rank AND r.kind IN ('range', 'gpu_range'))
        ORDER BY t.rank
    """).fetchall()
    for (rank,) in no_ranges:
        caveats.append(Caveat("no_ranges", rank, f"rank {rank}: no NVTX ranges or user annotations "
                              "(no step markers or phase names)"))
    unmatched = con.execute("""
        SELECT k.rank, count(*) FROM kernels k ANTI JOIN
            (SELECT rank, pid, correlation_id FROM launches) a
            ON k.rank = a.rank AND k.pid = a.pid AND k.correlation_id = a.correlation_id
        GROUP BY k.rank ORDER BY k.rank
    """).fetchall()
    for rank, n in unmatched:
        caveats.append(Caveat("unmatched_launch", rank, f"rank {rank}: {n} kernels without their launch call in "
                              "the capture (launched before it began, or API tracing off)"))
    caveats += _capture_only(con)
    caveats += capture_settings(con, step_regex)
    for rank, start in _late_starts(con):
        caveats.append(Caveat("late_start", rank, f"rank {rank}: the capture starts at {start}: kernels launched "
                              "before it are not in the trace, so a launch index (ncu --launch-skip, rocprofv3 "
                              "--kernel-iteration-range) counts from the capture's first launch (profile from process "
                              "start for exact indices)"))
    for rank, kind, count, detail in con.execute(
        "SELECT rank, kind, count, detail FROM read_notes ORDER BY rank, kind, detail"
    ).fetchall():
        if kind == "unmatched_launch" or kind in INFORMATIONAL_NOTES:
            continue  # counted above from the tables themselves, or no limit on what can be concluded
        if kind == "skipped_events" and detail in EXPECTED_SKIPS:
            continue
        if kind == NO_GPU_ACTIVITY and any(c.kind == "unsupported_device" and c.rank == rank for c in caveats):
            continue  # the accelerator is named above
        if kind == "skipped_events" and str(detail).startswith(ACCELERATOR_CATEGORIES):
            continue
        if kind == NO_GPU_ACTIVITY:
            caveats.append(Caveat(kind, rank, f"rank {rank}: no GPU activity: {detail}"))
            continue
        caveats.append(Caveat(kind, rank, f"rank {rank}: {kind}: {count} ({detail})" if detail
                              else f"rank {rank}: {kind}: {count}"))
    return caveats


def unsupported_devices(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str]]:
    """(rank, text) per rank whose capture holds an accelerator tracekit does not read (MTIA, TPU, Gaudi):
    named as such, never called CPU-only."""
    out = []
    rows = con.execute("""
        SELECT n.rank, n.category, sum(n.count), (SELECT string_agg(DISTINCT d.name, ', ') FROM devices d
                                                  WHERE d.rank = n.rank AND coalesce(d.name, '') <> '')
        FROM (SELECT rank, count, CASE WHEN starts_with(detail, 'mtia_') THEN 'MTIA'
                                       WHEN starts_with(detail, 'xla') OR starts_with(detail, 'tpu') THEN 'TPU'
                                       WHEN starts_with(detail, 'hpu') THEN 'Gaudi (HPU)' END AS category
              FROM read_notes WHERE kind = 'skipped_events') n
        WHERE n.category IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2
    """).fetchall()
    rows += con.execute("""
        SELECT rank, 'TPU', 0, string_agg(DISTINCT name, ', ') FROM devices WHERE regexp_matches(name, '(?i)\btpu')
        GROUP BY rank ORDER BY rank
    """).fetchall()
    for rank, category, events, devices in rows:
        if any(r == rank for r, _ in out):
            continue
        seen = f"{events:,} {category.split()[0]} events" if events else "its device"
        out.append((rank, f"{category} accelerator: not supported ({seen}{f' on device {devices}' if devices else ''}; "
                          "tracekit reads CUDA and HIP GPU activity)"))
    return out


def _matching(view: str, param: str) -> str:
    """SQL of the distinct names of ``view`` matching the regex parameter ``param``: the regex runs once per
    name, not once per row (millions of launch calls share a few dozen names)."""
    return f"(SELECT name FROM (SELECT DISTINCT name FROM {view}) WHERE regexp_matches(name, {param}))"


def _capture_only(con: duckdb.DuckDBPyConnection) -> list[Caveat]:
    """Graph-capture traces: stream capture calls, and more kernel launches captured into a graph (a launch
    call with no kernel) than kernels executed. Such a trace holds no step to judge or compare. Counted in
    SQL, and only on ranks with a stream capture call."""
    params = {"launch": KERNEL_LAUNCH_REGEX, "capture": STREAM_CAPTURE_REGEX}
    captures = con.execute(f"""
        SELECT rank, count(*) FROM launches WHERE name IN {_matching("launches", "$capture")} GROUP BY rank
    """, {"capture": STREAM_CAPTURE_REGEX}).fetchall()
    if not captures:
        return []
    rows = con.execute(f"""
        WITH kernel_launches AS (
            SELECT a.rank, count(*) AS n, count(*) FILTER (WHERE k.correlation_id IS NULL) AS captured
            FROM launches a
            LEFT JOIN (SELECT DISTINCT rank, pid, correlation_id FROM kernels) k
              ON k.rank = a.rank AND k.pid = a.pid AND k.correlation_id = a.correlation_id
            WHERE a.name IN {_matching("launches", "$launch")} GROUP BY a.rank),
        captures AS (SELECT rank, count(*) AS n FROM launches WHERE name IN {_matching("launches", "$capture")}
                     GROUP BY rank),
        executed AS (SELECT rank, count(*) AS n FROM kernels GROUP BY rank)
        SELECT c.rank, c.n, l.captured, coalesce(e.n, 0) FROM captures c JOIN kernel_launches l USING (rank)
        LEFT JOIN executed e USING (rank)
        WHERE l.captured > coalesce(e.n, 0) ORDER BY c.rank
    """, params).fetchall()
    return [Caveat("graph_capture_only", rank,
                   f"rank {rank}: a graph-capture trace: {captured} kernel launches were captured into CUDA/HIP "
                   f"graphs ({captures} stream capture{'s' if captures != 1 else ''}) and only {executed} kernels ran; "
                   "it holds no step to judge or compare: profile the graph replays (the serving loop), not "
                   "their capture")
            for rank, captures, captured, executed in rows]


def _late_starts(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str]]:
    """(rank, where the capture starts) for captures that did not start with the process: a ProfilerStep
    beyond #0, an nsys trigger or delay, a serving engine's profiler (its step annotations or process
    name), or graphs launched that were never instantiated in the capture. First reason per rank."""
    probes = [("""
        SELECT rank, 'ProfilerStep#' || min(step) FROM profiler_steps GROUP BY rank HAVING min(step) > 0""", {}), ("""
        SELECT rank, 'a ' || coalesce(nullif(trigger, 'Immediate'), 'delayed') || ' start' FROM (
            SELECT rank, max(start_trigger) AS trigger, max(start_delay_ns) AS delay_ns FROM capture GROUP BY rank)
        WHERE coalesce(trigger, 'Immediate') <> 'Immediate' OR coalesce(delay_ns, 0) > 0""", {}), ("""
        SELECT DISTINCT rank, 'a serving engine''s profiler start (its step annotations)' FROM user_ranges
        WHERE regexp_matches(name, $engine)""",
        {"engine": ENGINE_STEP_REGEX}), ("""
        SELECT DISTINCT rank, 'a serving engine''s profiler start (process ' || name || ')' FROM processes
        WHERE regexp_matches(name, $engine)""", {"engine": ENGINE_PROCESS_REGEX}), ("""
        SELECT rank, 'a point after its CUDA/HIP graphs were built (launched, never instantiated here)'
        FROM launches GROUP BY rank
        HAVING count(*) FILTER (WHERE is_graph_launch) > 0
           AND count(*) FILTER (WHERE contains(name, 'GraphInstantiate')) = 0""", {})]
    first: dict[int, str] = {}
    for sql, params in probes:
        for rank, where in con.execute(sql, params).fetchall():
            first.setdefault(rank, where)
    return sorted(first.items())


def wait_caveats(results: Sequence[Any]) -> list[Caveat]:
    """One caveat per wait on work outside the trace left out of a step (tracekit.analysis.waits): what
    waited, where, how long."""
    out = []
    for row in waits_section(results):
        what = (f"{row['api_call']} blocked" if row["kind"] == "blocking_call"
                else f"an operation launched by {row['api_call']} waited")
        out.append(Caveat("outside_wait", row["rank"], (
            f"rank {row['rank']} device {row['device']}: {what} {ms(row['dur_ns'])}, "
            f"{ms(row['step_offset_ns'])} into step {row['step']!r}, on GPU work the trace does not hold (the device "
            "ran nothing of the trace meanwhile: work launched before the capture began, or on another "
            "process); left out of the step, which is judged on the rest")))
    return out


def _ranks_where(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
    return con.execute(sql, params or {}).fetchall()


def capture_settings(con: duckdb.DuckDBPyConnection, step_regex: str | None) -> list[Caveat]:
    """What the capture was not set to record: graph replays without their capture trace (framework ops traced,
    graphs replayed, no stream capture among the inputs), input shapes (attention ops without shapes) or
    Python stacks (framework ops but no Python function), step markers (none of ProfilerStep, an engine's
    step annotation or graph launches, unless ``step_regex`` is given), GPU activity dropped or not flushed at
    the end, and clock domains without a wall-clock base (several files)."""
    out: list[Caveat] = []
    any_capture = con.execute(f"""
        SELECT (SELECT count(*) FROM launches WHERE name IN {_matching("launches", "$c")})
             + (SELECT count(*) FROM capture_api_calls WHERE regexp_matches(name, $c))""",
                              {"c": STREAM_CAPTURE_REGEX}).fetchone()[0] > 0  # capture_*: a capture trace beside
    if not any_capture:
        for rank, launches, kernels in _ranks_where(con, """
            SELECT g.rank, count(*), sum(g.kernels) FROM graph_launches g
            WHERE EXISTS (SELECT 1 FROM ranges r WHERE r.rank = g.rank AND r.kind = 'op')
            GROUP BY g.rank HAVING sum(g.kernels) > 0 ORDER BY 1"""):
            out.append(Caveat("graph_replay_no_capture", rank, f"rank {rank}: {launches} graph replays ({kernels} "
                              "kernels) without the trace of their capture among the inputs: the kernels inside "
                              "the graphs cannot be tied to the ops, shapes and stacks that captured them (pair "
                              "the replay trace with its graph-capture trace)"))
    for rank, attention, shapes, python in _ranks_where(con, """
        SELECT t.rank,
               (SELECT count(*) FROM ranges r WHERE r.rank = t.rank AND r.kind = 'op'
                AND regexp_matches(r.name, $attention)),
               (SELECT count(*) FROM op_shapes o WHERE o.rank = t.rank AND coalesce(o.input_dims, '') NOT IN
                ('', '[]')),
               (SELECT count(*) FROM ranges r WHERE r.rank = t.rank AND r.kind = 'python')
        FROM trace_info t WHERE EXISTS (SELECT 1 FROM ranges r WHERE r.rank = t.rank AND r.kind = 'op')
        ORDER BY 1""", {"attention": ATTENTION_OP_REGEX}):
        if attention and not shapes:
            out.append(Caveat("missing_shapes", rank, f"rank {rank}: no input shapes ({attention} attention ops "
                              "without them; record_shapes off): the operating point cannot be read from the ops"))
        if not python:
            out.append(Caveat("missing_stacks", rank, f"rank {rank}: no Python stacks (framework ops but no Python "
                              "function events; with_stack off): host time before a launch is named by op, not by "
                              "the Python code that ran"))
    if step_regex is None:
        for (rank,) in _ranks_where(con, f"""
            SELECT t.rank FROM trace_info t
            WHERE EXISTS (SELECT 1 FROM ranges r WHERE r.rank = t.rank AND r.kind IN ('range', 'gpu_range'))
              AND NOT EXISTS (SELECT 1 FROM profiler_steps p WHERE p.rank = t.rank)
              AND NOT EXISTS (SELECT 1 FROM graph_launches g WHERE g.rank = t.rank)
              AND NOT EXISTS (SELECT 1 FROM launches l WHERE l.rank = t.rank
                              AND l.name IN {_matching("launches", "$capture")})
              AND NOT EXISTS (SELECT 1 FROM ranges r WHERE r.rank = t.rank AND regexp_matches(r.name, $marker))
            ORDER BY 1""", {"marker": STEP_MARKER_REGEX, "capture": STREAM_CAPTURE_REGEX}):
            out.append(Caveat("no_step_markers", rank, f"rank {rank}: no step markers (no ProfilerStep#N, XLA "
                              "module, engine step annotation or graph launches): the whole capture is one step; "
                              "give --step REGEX (`tracekit info` lists candidates)"))
    for rank, n in _ranks_where(con, f"""
        WITH last AS (SELECT rank, pid, max(start_ns) AS t FROM kernels GROUP BY rank, pid),
             late AS (SELECT a.rank, a.pid, a.correlation_id FROM launches a
                      JOIN last l ON l.rank = a.rank AND l.pid = a.pid
                      WHERE a.start_ns > l.t AND a.name IN {_matching("launches", "$launch")}),
             -- the kernels of those launches alone (a filter on the correlation id, not a join of every kernel)
             ran AS (SELECT DISTINCT rank, pid, correlation_id FROM kernels
                     WHERE correlation_id IN (SELECT correlation_id FROM late))
        SELECT late.rank, count(*) FROM late ANTI JOIN ran
          ON ran.rank = late.rank AND ran.pid = late.pid AND ran.correlation_id = late.correlation_id
        GROUP BY late.rank ORDER BY 1""",
                              {"launch": KERNEL_LAUNCH_REGEX}):
        if not any_capture:
            out.append(Caveat("dropped_events", rank, f"rank {rank}: {n} kernel launches after the last recorded "
                              "kernel have no kernel: GPU activity was dropped or not flushed when the capture "
                              "stopped"))
    meta = RankMeta.load(con)
    files = sorted({path: min(r for r, p in meta.file_of.items() if p == path) for path in meta.file_of.values()}
                   .items(), key=lambda kv: kv[1])
    if len(files) > 1:
        for _, rank in files:
            if rank not in meta.wall_base_ns:
                out.append(Caveat("clock_domain", rank, f"rank {rank}: its file is a clock domain of its own with "
                                  "no wall-clock base: its offset comes from matched collectives alone"))
    return out
