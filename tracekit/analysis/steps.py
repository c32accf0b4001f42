"""Step windows on one device's GPU timeline, found in SQL without reading the operations into memory.

Sources, in order: a user regex over range names (``--step``); a serving engine's own step annotation
(vLLM's ``execute_context_N(...)_generation_M(...)`` family, SGLang's ``step[DECODE bs=N]``, TRT-LLM's
``_forward_step`` NVTX range: ``ENGINE_STEP_PATTERNS``); ``ProfilerStep#N`` annotations; CUDA/HIP graph
launches grouped by host step (all launches between two synchronising host calls of the launching
process form one step, so the 25 piecewise graphs of one vLLM forward are one step); else the whole
capture as one window. A host-side step range is projected onto the
GPU through the launch calls it contains: step i starts where its first GPU operation starts and
lasts until step i+1's first operation starts (the last step ends with its last operation), so the
idle time between steps is charged to the step before it, as a time-per-output-token measurement
would charge it. A launch belongs to the latest-starting step range at or before it, if that range
(same process) is still open at the launch.

The database returns one row per step (first start, last end); only the window list is kept. The
device is scanned in time chunks of about ``max_rows`` operations (evenly spread), so that the launch
lookup and the per-step groups of one query stay bounded too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pyarrow as pa

from tracekit.analysis.ops import SYNC_API_REGEX, launch_start_sql
from tracekit.analysis.waits import OutsideWait, outside_waits
from tracekit.errors import InputError
from tracekit.parsers.schema import PROFILER_STEP_REGEX

#: Serving engines' per-forward annotations (name -> regex), tried together before ProfilerStep#N.
ENGINE_STEP_PATTERNS = {
    # vLLM workers: execute_model, execute_new_N_cached_M, execute_N, and the token-count forms
    # execute_context_1(888_788544)_generation_0(0) / execute_32_context_0(sq0sk0...)_generation_32(sq32sk...).
    "vLLM": r"^execute_(model|\d+|new_\d+_cached_\d+|(\d+_)?context_\d+\(.*\)_generation_\d+\(.*\))$",
    # SGLang forward modes as in TraceLens's SGLang traces: step[DECODE bs=32], step[EXTEND bs=15 toks=15360].
    "SGLang": r"^step\[(DECODE|EXTEND|PREFILL|MIXED|IDLE|TARGET_VERIFY|DRAFT_EXTEND)( [a-z_]+=\d+)*\]$",
    # TensorRT-LLM PyTorch backend: @nvtx_range("_forward_step") on the model engine's forward.
    "TRT-LLM": r"^_forward_step$",
}
ENGINE_STEP_REGEX = "|".join(f"({r})" for r in ENGINE_STEP_PATTERNS.values())
#: One execution of a jitted XLA program (``jax.jit``'s module on the host plane, ``jit_train_step:XLA GPU
#: module``): the step of a JAX capture, as ProfilerStep#N is PyTorch's.
XLA_MODULE_REGEX = r":XLA (GPU|TPU) module$"
#: Ranges that mark steps (never busy host time): ProfilerStep#N, XLA module executions and the engines' step
#: annotations.
STEP_MARKER_REGEX = f"({PROFILER_STEP_REGEX})|({XLA_MODULE_REGEX})|{ENGINE_STEP_REGEX}"


@dataclass(frozen=True)
class StepWindow:
    """One step on one device: [start_ns, end_ns), less ``excluded`` (waits on work outside the trace,
    ``tracekit.analysis.waits``: (start, end) pairs inside the window, left out of the step)."""

    index: int
    label: str
    start_ns: int
    end_ns: int
    excluded: tuple[tuple[int, int], ...] = ()

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns - self.excluded_ns

    @property
    def excluded_ns(self) -> int:
        return sum(e - s for s, e in self.excluded)


@dataclass(frozen=True)
class StepSource:
    """How steps were found: 'regex', 'engine_annotation', 'profiler_step', 'graph_launch' or 'whole_capture'."""

    kind: str
    detail: str
    waits: tuple[OutsideWait, ...] = ()  # waits on work outside the trace, left out of the windows


@dataclass(frozen=True)
class DeviceExtent:
    """How many operations a device has, and the span they cover."""

    n_ops: int
    start_ns: int
    end_ns: int


def device_extent(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> DeviceExtent:
    row = con.execute("""
        SELECT count(*), min(start_ns), max(end_ns) FROM gpu_ops WHERE rank = $rank AND device_id = $device
    """, {"rank": rank, "device": device_id}).fetchall()[0]
    return DeviceExtent(int(row[0]), int(row[1] or 0), int(row[2] or 0))


def step_ranges(con: duckdb.DuckDBPyConnection, rank: int, regex: str) -> list[tuple[int, int, int, str]]:
    """Host ranges of ``rank`` whose name matches ``regex``: (pid, start_ns, end_ns, name), by start."""
    return [tuple(r) for r in con.execute("""
        SELECT pid, start_ns, coalesce(end_ns, start_ns), name FROM user_ranges
        WHERE rank = ? AND regexp_matches(name, ?)
        ORDER BY start_ns, coalesce(end_ns, start_ns), pid, name
    """, [rank, regex]).fetchall()]


def _outermost(ranges: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """The ranges not inside an earlier one of the same process: an engine's step annotation nested in
    another (SGLang's step[DECODE] inside execute_...) marks the same step, not a second one."""
    out: list[tuple[int, int, int, str]] = []
    open_until: dict[int, int] = {}
    for r in sorted(ranges, key=lambda r: (r[1], -r[2])):
        if r[1] < open_until.get(r[0], r[1]):
            continue
        out.append(r)
        open_until[r[0]] = r[2]
    return sorted(out, key=lambda r: (r[1], r[2], r[0], r[3]))


def _chunks(extent: DeviceExtent, max_rows: int) -> list[tuple[int, int]]:
    """Spans [a, b) of operation starts covering the device, each about ``max_rows`` operations if spread evenly."""
    n = max(1, -(-extent.n_ops // max(max_rows, 1)))
    span = extent.end_ns + 1 - extent.start_ns
    edges = sorted({extent.start_ns + span * k // n for k in range(n + 1)})
    return list(zip(edges[:-1], edges[1:], strict=True))


def _grouped(con: duckdb.DuckDBPyConnection, sql: str, rank: int, device_id: int,
             chunks: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(key, first start, last end) per key over all chunks; ``sql`` groups one chunk's ops ($a <= start < $b)."""
    merged: dict[int, tuple[int, int]] = {}
    for a, b in chunks:
        for key, first, last in con.execute(sql, {"rank": rank, "device": device_id, "a": a, "b": b}).fetchall():
            old = merged.get(key)
            merged[key] = (first, last) if old is None else (min(old[0], first), max(old[1], last))
    return [(k, *merged[k]) for k in sorted(merged)]


CHUNK = "start_ns >= $a AND start_ns < $b"


def _tile(starts: np.ndarray, last_end: int, labels: list[str]) -> list[StepWindow]:
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    labels = [labels[i] for i in order]
    ends = np.append(s[1:], last_end)
    return [StepWindow(i, labels[i], int(a), int(b)) for i, (a, b) in enumerate(zip(s, ends, strict=True))
            if b > a]


def _from_groups(rows: list[tuple[int, int, int]], label: dict[int, str]) -> list[StepWindow]:
    """Tile windows from (group key, first start, last end) rows in key order; the last group ends the last."""
    if not rows:
        return []
    first = np.array([r[1] for r in rows], dtype=np.int64)
    return _tile(first, int(rows[-1][2]), [label[r[0]] for r in rows])


def _project(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, chunks: list[tuple[int, int]],
             ranges: list[tuple[int, int, int, str]]) -> list[StepWindow]:
    """Project host ranges onto the device through the launches each contains."""
    if not ranges:
        return []
    # Of ranges starting at the same time the last (in order) is the latest-starting one.
    latest = {start: i for i, (_, start, _, _) in enumerate(ranges)}
    keep = sorted(latest.values())
    table = pa.table({"i": np.array(keep, dtype=np.int64),
                      "pid": np.array([ranges[i][0] for i in keep], dtype=np.int64),
                      "r_start": np.array([ranges[i][1] for i in keep], dtype=np.int64),
                      "r_end": np.array([ranges[i][2] for i in keep], dtype=np.int64)})
    con.register("step_range_list", table)
    try:  # the range is found on start alone, then checked (its end, its process) against a second copy
        rows = _grouped(con, f"""
            WITH o AS (SELECT start_ns, end_ns, pid, launch_start_ns FROM ({launch_start_sql(CHUNK)})
                       WHERE launch_start_ns >= 0),
                 m AS (SELECT o.*, r.i FROM o ASOF JOIN step_range_list r ON o.launch_start_ns >= r.r_start)
            SELECT m.i, min(m.start_ns), max(m.end_ns) FROM m JOIN step_range_list c ON c.i = m.i
            WHERE m.launch_start_ns <= c.r_end AND m.pid = c.pid
            GROUP BY m.i
        """, rank, device_id, chunks)
    finally:
        con.unregister("step_range_list")
    return _joined(rows, ranges)


def _joined(rows: list[tuple[int, int, int]], ranges: list[tuple[int, int, int, str]]) -> list[StepWindow]:
    """Windows of projected host ranges, each joined with its host step: a step starts where its range starts
    if the GPU sat idle then (not before the previous step's GPU work has ended), else at its first operation;
    the last step ends at its last operation or its range's end, whichever is later. So host time before a
    step's first kernel (data loading, host code, a sync) is the step's, with its cause."""
    if not rows:
        return []
    starts: list[int] = []
    prev_end: int | None = None
    for i, first, last in rows:
        host = ranges[i][1] if prev_end is None else max(ranges[i][1], prev_end)
        starts.append(min(first, host))
        prev_end = last if prev_end is None else max(prev_end, last)
    last_end = max(int(rows[-1][2]), int(ranges[rows[-1][0]][2]))
    return _tile(np.array(starts, dtype=np.int64), last_end, [ranges[r[0]][3] for r in rows])


def _exclude(windows: list[StepWindow], waits: list[OutsideWait]) -> list[StepWindow]:
    """Each window less the waits on outside work inside it."""
    if not waits:
        return windows
    out = []
    for w in windows:
        cut = tuple((max(x.start_ns, w.start_ns), min(x.end_ns, w.end_ns)) for x in waits
                    if x.start_ns < w.end_ns and x.end_ns > w.start_ns)
        out.append(replace(w, excluded=cut) if cut else w)
    return out


def _graph_steps(con: duckdb.DuckDBPyConnection, rank: int, device_id: int,
                 chunks: list[tuple[int, int]]) -> list[StepWindow]:
    """One step per host step of graph launches: the graph launches of a process between two of its
    synchronising calls (a forward ends by reading its sampled tokens back), keyed by the end of the sync
    before them (-1 before the first)."""
    if not con.execute("""
        SELECT EXISTS (SELECT 1 FROM kernels WHERE rank = $rank AND device_id = $device
                       AND (graph_id IS NOT NULL OR graph_node_id IS NOT NULL))
            OR EXISTS (SELECT 1 FROM launches WHERE rank = $rank AND is_graph_launch)
    """, {"rank": rank, "device": device_id}).fetchall()[0][0]:
        return []  # no operation ran in a graph
    syncs = con.sql("""
        SELECT DISTINCT pid, end_ns FROM launches
        WHERE rank = $rank AND regexp_matches(name, $sync) ORDER BY pid, end_ns
    """, params={"rank": rank, "sync": SYNC_API_REGEX}).to_arrow_table()
    con.register("step_sync_ends", syncs)
    try:
        rows = _grouped(con, f"""
            WITH g AS (SELECT pid, launch_start_ns, start_ns, end_ns FROM ({launch_start_sql(CHUNK)})
                       WHERE in_graph AND launch_start_ns >= 0)
            SELECT coalesce(s.end_ns, -1), min(g.start_ns), max(g.end_ns)
            FROM g ASOF LEFT JOIN step_sync_ends s ON g.pid = s.pid AND g.launch_start_ns >= s.end_ns
            GROUP BY ALL
        """, rank, device_id, chunks)
    finally:
        con.unregister("step_sync_ends")
    return _from_groups(rows, {r[0]: f"graph step {k}" for k, r in enumerate(rows)})


def find_steps(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, extent: DeviceExtent,
               step_regex: str | None, max_rows: int) -> tuple[list[StepWindow], StepSource]:
    """The step windows of one device, and how they were found (reading about ``max_rows`` ops at a time);
    waits on work outside the trace are left out of them (``StepWindow.excluded``)."""
    windows, source = _find_windows(con, rank, device_id, extent, step_regex, max_rows)
    waits = outside_waits(con, rank, device_id) if windows else []
    return _exclude(windows, waits), replace(source, waits=tuple(waits))


def _find_windows(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, extent: DeviceExtent,
                  step_regex: str | None, max_rows: int) -> tuple[list[StepWindow], StepSource]:
    if extent.n_ops == 0:
        return [], StepSource("whole_capture", "no GPU operations")
    chunks = _chunks(extent, max_rows)
    if step_regex:
        windows = _project(con, rank, device_id, chunks, step_ranges(con, rank, step_regex))
        if not windows:
            raise InputError(f"--step {step_regex!r}: no range on rank {rank} matches it and contains "
                             "a kernel launch")
        return windows, StepSource("regex", step_regex)
    engine = _outermost(step_ranges(con, rank, ENGINE_STEP_REGEX))
    windows = _project(con, rank, device_id, chunks, engine)
    if windows:
        names = engine_names(con, [e[3] for e in engine])
        return windows, StepSource("engine_annotation", f"{'/'.join(names)} step annotations")
    windows = _project(con, rank, device_id, chunks, step_ranges(con, rank, PROFILER_STEP_REGEX))
    if windows:
        return windows, StepSource("profiler_step", "ProfilerStep#N annotations")
    windows = _project(con, rank, device_id, chunks, _outermost(step_ranges(con, rank, XLA_MODULE_REGEX)))
    if windows:
        return windows, StepSource("xla_module", "XLA module executions (one jitted program run each)")
    windows = _graph_steps(con, rank, device_id, chunks)
    if windows:
        return windows, StepSource("graph_launch", "CUDA/HIP graph launches between two host syncs, one step each")
    whole = StepWindow(0, "whole capture", extent.start_ns, extent.end_ns)
    return [whole], StepSource("whole_capture", "no step markers: the whole capture is one window")


#: What names the engine beside the form of its step annotation (vLLM's execute_..._context_... form is also
#: written under SGLang, as TraceLens's SGLang traces show): its own process, module or op names.
ENGINE_EVIDENCE = {"SGLang": "sglang", "vLLM": "vllm", "TRT-LLM": "tensorrt_llm"}


def engine_names(con: duckdb.DuckDBPyConnection, annotations: list[str]) -> list[str]:
    """The serving engine(s) that wrote these step annotations: SGLang where its own step[...] form is among
    them; else the one engine whose name the trace's processes, Python frames or ops carry; else the engines
    whose annotation form they match."""
    forms = sorted({n for n, r in ENGINE_STEP_PATTERNS.items() if any(re.search(r, a) for a in annotations)})
    if "SGLang" in forms:
        return ["SGLang"]
    row = con.execute("""
        WITH n AS (SELECT DISTINCT lower(name) AS name FROM processes
                   UNION SELECT DISTINCT lower(name) FROM ranges WHERE kind IN ('python', 'op'))
        SELECT bool_or(contains(name, $sglang)), bool_or(contains(name, $vllm)), bool_or(contains(name, $trt)) FROM n
    """, {"sglang": ENGINE_EVIDENCE["SGLang"], "vllm": ENGINE_EVIDENCE["vLLM"],
          "trt": ENGINE_EVIDENCE["TRT-LLM"]}).fetchall()[0]
    seen = [e for e, hit in zip(ENGINE_EVIDENCE, row, strict=True) if hit]
    return seen if len(seen) == 1 else forms


@dataclass(frozen=True)
class Batch:
    """Consecutive steps read together, or one long step read in time pieces: ``edges`` cut it (each the
    start of an operation of positive length, so no host gap spans an edge)."""

    windows: list[StepWindow]
    edges: tuple[int, ...] = ()

    def pieces(self) -> list[tuple[int, int]]:
        """The time pieces [a, b) of a one-step batch, in order (the whole step when it is not cut)."""
        w = self.windows[0]
        cuts = [w.start_ns, *self.edges, w.end_ns]
        return list(zip(cuts[:-1], cuts[1:], strict=True))


def _edges(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, window: StepWindow, n_ops: int,
           max_rows: int) -> tuple[int, ...]:
    """Where to cut a step of ``n_ops`` operations into pieces of about ``max_rows``: the starts of operations
    of positive length at evenly spaced ranks inside the step (a busy instant: no gap straddles it)."""
    k = -(-n_ops // max(max_rows, 1))
    if k <= 1:
        return ()
    row = con.execute("""
        SELECT quantile_disc(start_ns, $q) FROM gpu_ops
        WHERE rank = $rank AND device_id = $device AND start_ns > $lo AND start_ns < $hi AND end_ns > start_ns
    """, {"rank": rank, "device": device_id, "lo": window.start_ns, "hi": window.end_ns,
          "q": [j / k for j in range(1, k)]}).fetchall()[0][0]
    return tuple(sorted({int(t) for t in row or ()}))


def batches(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, extent: DeviceExtent,
            windows: list[StepWindow], max_rows: int) -> list[Batch]:
    """Consecutive windows grouped so that the operations starting in each group stay within ``max_rows``
    (counted in the database); a window with more operations forms a batch of its own, read in time pieces
    of about ``max_rows`` operations (a whole capture without step markers is one such window)."""
    if not windows:
        return []
    starts = pa.table({"w": np.arange(len(windows)), "lo": np.array([w.start_ns for w in windows], dtype=np.int64)})
    counts = np.zeros(len(windows), dtype=np.int64)
    con.register("step_window_starts", starts)
    try:
        for a, b in _chunks(extent, max_rows):
            rows = con.execute(f"""
                WITH o AS (SELECT start_ns FROM gpu_ops WHERE rank = $rank AND device_id = $device AND {CHUNK})
                SELECT w.w, count(*) FROM o ASOF JOIN step_window_starts w ON o.start_ns >= w.lo
                WHERE o.start_ns < $hi GROUP BY w.w
            """, {"rank": rank, "device": device_id, "a": a, "b": b, "hi": windows[-1].end_ns}).fetchall()
            for w, n in rows:
                counts[w] += n
    finally:
        con.unregister("step_window_starts")
    groups: list[Batch] = []
    rows_in_group = 0
    for w, n in zip(windows, counts.tolist(), strict=True):
        if n > max_rows:
            groups.append(Batch([w], _edges(con, rank, device_id, w, n, max_rows)))
            rows_in_group = max_rows + 1  # nothing joins a cut step
        elif groups and rows_in_group + n <= max_rows:
            groups[-1].windows.append(w)
            rows_in_group += n
        else:
            groups.append(Batch([w]))
            rows_in_group = n
    return groups


PLACEHOLDER = "<n>"  # stands for a run of digits in a step-candidate pattern
# PyTorch's emit_nvtx names one range per aten op ("aten::mm, seq = 3, op_id = 17"): never a step.
PER_OP_RANGE_REGEX = r", (seq|op_id) = \d+"


def regex_literal(text: str) -> str:
    """``text`` as a regex matching it literally: only the metacharacters escaped (Python's and RE2's alike)."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)


def step_candidates(con: duckdb.DuckDBPyConnection, limit: int = 10) -> list[dict[str, object]]:
    """The most frequent host range names (NVTX ranges and user annotations) over all ranks, with digit runs
    folded to ``<n>`` (ProfilerStep#<n>): count, median duration, an example, the ``--step`` regex that
    selects them, and which of them the automatic step search picks ('engine', 'ProfilerStep'). PyTorch's
    per-op ranges (emit_nvtx) are left out."""
    rows = con.execute(f"""
        SELECT regexp_replace(name, '[0-9]+', '{PLACEHOLDER}', 'g') AS pattern, count(*) AS count,
               count(DISTINCT rank) AS ranks, median(dur_ns)::BIGINT AS median_ns, min(name) AS example,
               bool_or(regexp_matches(name, $engine)) AS engine, bool_or(regexp_matches(name, $profiler)) AS profiler
        FROM user_ranges WHERE end_ns IS NOT NULL
          AND NOT regexp_matches(name, $per_op)
        GROUP BY pattern ORDER BY count DESC, median_ns DESC, pattern LIMIT $limit
    """, {"engine": ENGINE_STEP_REGEX, "profiler": PROFILER_STEP_REGEX, "per_op": PER_OP_RANGE_REGEX,
          "limit": limit}).fetchall()
    return [{"pattern": pattern, "count": count, "ranks": ranks, "median_ns": median_ns, "example": example,
             "auto": "engine" if engine else "ProfilerStep" if profiler else "",
             "step_regex": "^" + regex_literal(pattern).replace(PLACEHOLDER, r"\d+") + "$"}
            for pattern, count, ranks, median_ns, example, engine, profiler in rows]
