"""Kineto events to the store's event tables: one Arrow table per destination and chunk, appended by SQL.

Columns are built with C-level passes over the decoded structs (``map(attrgetter(...))``) and Arrow
compute, not a Python loop per event; kernel short names are worked out once per distinct name. The
mapping itself is documented in ``docs/kineto.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat
from operator import attrgetter, is_not

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.kernel_names import function_name
from tracekit.parsers.kineto_events import (
    CPU_OP,
    DRIVER,
    EMPTY_ARGS,
    GPU_KINDS,
    GPU_USER_ANNOTATION,
    RANGE_KINDS,
    RANGE_SOURCES,
    USER_ANNOTATION,
    Event,
    as_int,
)
from tracekit.parsers.kineto_times import start_end_ns, texts
from tracekit.parsers.schema import PROFILER_STEP_REGEX

GPU_KINDS_CODE = {kind: code for code, kind in GPU_KINDS.items()}
_function_name = lru_cache(maxsize=1 << 16)(function_name)  # bounded: a long-lived process reads many files


def msgspec_text(value: object) -> str:
    """A non-text metadata value (an int group name, a list of ranks) as the text PyTorch would write."""
    return str(value) if not isinstance(value, list) else "[" + ", ".join(map(str, value)) + "]"

# Rows appended per INSERT: DuckDB appends far faster in large batches than per 100k-event chunk.
FLUSH_ROWS = 250_000
_TIMES = "s + $base, e + $base, e - s"
_READABLE = "s IS NOT NULL AND e IS NOT NULL"
_INSERT_SQL: dict[str, str] = {
    "kernels": f"""
        INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, dur_ns, name, short_name,
            correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, graph_node_id, annotation)
        SELECT $rank, device, stream, {_TIMES}, name, short_name, correlation,
            grid_x, grid_y, grid_z, block_x, block_y, block_z, nullif(graph_node, 0), module_fqn
        FROM _rows WHERE kind = 'kernel' AND {_READABLE}
    """,
    "memops": f"""
        INSERT INTO memops (rank, device_id, stream_id, start_ns, end_ns, dur_ns, kind, copy_kind, bytes,
            correlation_id)
        SELECT $rank, device, stream, {_TIMES}, kind,
            nullif(regexp_extract(name, '^Memcpy (\\w+)', 1), ''), nbytes, correlation
        FROM _rows WHERE kind <> 'kernel' AND {_READABLE}
    """,
    "api_calls": f"""
        INSERT INTO api_calls (rank, pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api, correlation_id,
            is_duplicate)
        SELECT $rank, pid, tid, {_TIMES}, name, name, api, correlation, false
        FROM _rows WHERE {_READABLE}
    """,
    "ranges": f"""
        INSERT INTO ranges (rank, pid, tid, start_ns, end_ns, dur_ns, name, domain, source, style, end_tid,
            device_id, stream_id, kind)
        SELECT $rank, pid, tid, {_TIMES}, name, NULL, source, 'PushPop', tid, device, stream,
            CASE source {" ".join(f"WHEN '{s}' THEN '{k}'" for s, k in RANGE_KINDS.items())} END
        FROM _rows WHERE {_READABLE}
    """,
}
_PARAM_COMMS = "record_param_comms"
_COLLECTIVES_SQL = """
    INSERT INTO collectives
    SELECT $rank, source, pid, tid, device, stream, s + $base, e + $base, correlation, collective, group_name,
        group_desc, group_ranks, group_size, seq, in_nelems, out_nelems, dtype
    FROM _rows WHERE s IS NOT NULL AND e IS NOT NULL
"""
class TableWriter:
    """Appends one file's events to the store tables of ``con``; keeps the per-file facts it meets."""

    def __init__(self, con: duckdb.DuckDBPyConnection, rank: int | None, base_ns: int,
                 skipped: Counter[str]) -> None:
        self.con, self.params = con, {"rank": rank, "base": base_ns}
        self.skipped = skipped  # the reader's per-category counts of what was not loaded
        self.hip_api = False
        self.gpu_annotations = False  # a GPU-side annotation was met (its pid is set at the end)
        self.stored = Counter[str]()  # rows appended per table
        # cpu ops with recorded input shapes, as Arrow per chunk (no event kept: its slices would keep the
        # file's bytes alive), appended at flush
        self._shapes: list[pa.Table] = []
        self._launch_kernels: list[pa.Table] = []  # (pid, correlation, kernel) of launch calls naming a kernel
        self._queued: dict[tuple[tuple[str, ...], str], list[pa.Table]] = {}

    def gpu(self, events: Sequence[Event], codes: np.ndarray) -> None:
        """Kernels, memcpy and memset (``codes``: KERNEL | MEMCPY | MEMSET per event)."""
        args = _args(events)
        names = _strings(events, "name")
        columns = {
            "kind": pc.take(pa.array([GPU_KINDS.get(c) for c in range(max(GPU_KINDS) + 1)]), codes),
            "name": names, "short_name": self._short(names),
            # Device and stream from args, else from pid/tid (2021's "stream 7").
            "device": _or_id(_ints(args, "device"), events, "pid"),
            "stream": _or_id(_ints(args, "stream"), events, "tid"),
            "correlation": _ints(args, "correlation"), "nbytes": _ints(args, "nbytes"),
            "graph_node": _ints(args, "graph_node"),
            "module_fqn": pa.array(list(map(attrgetter("module_fqn"), args)), pa.string()),
        }
        for dims in ("grid", "block"):
            triples = pa.array(list(map(attrgetter(dims), args)), pa.list_(pa.int64(), 3))
            for index, axis in enumerate("xyz"):
                columns[f"{dims}_{axis}"] = pc.list_element(triples, index)
        self._insert(("kernels", "memops"), "gpu", events, columns)

    def api(self, events: Sequence[Event], codes: np.ndarray) -> None:
        """Runtime and driver calls (``codes``: RUNTIME | DRIVER); ``cu*`` names are driver calls too."""
        names = _strings(events, "name")
        driver = pc.or_(pa.array(codes == DRIVER),
                        pc.and_not(pc.starts_with(names, "cu"), pc.starts_with(names, "cuda")))
        self.hip_api = self.hip_api or pc.any(pc.starts_with(names, "hip")).as_py()
        columns = {
            "name": names, "api": pc.if_else(driver, "driver", "runtime"),
            "pid": _ints(events, "pid"), "tid": _ints(events, "tid"),
            "correlation": _ints(_args(events), "correlation"),
        }
        self._insert(("api_calls",), "api", events, columns)
        kernels = pa.array(list(map(attrgetter("kernel"), _args(events))), pa.string())
        if kernels.null_count < len(kernels):
            named = pc.is_valid(kernels)
            self._launch_kernels.append(pa.table({"pid": columns["pid"], "correlation": columns["correlation"],
                                                  "kernel": kernels}).filter(named))

    def ranges(self, events: Sequence[Event], codes: np.ndarray) -> None:
        """Annotations, cpu ops and python functions (``codes``: USER_ANNOTATION ... PYTHON_FUNCTION)."""
        names = _strings(events, "name")
        sources = pc.take(pa.array([RANGE_SOURCES.get(c) for c in range(max(RANGE_SOURCES) + 1)]), codes)
        # 2021 files record ProfilerStep#N as an Operator: it is the step annotation all the same.
        step = pc.and_(pc.equal(sources, "cpu_op"), pc.match_substring_regex(names, PROFILER_STEP_REGEX))
        sources = pc.if_else(step, RANGE_SOURCES[USER_ANNOTATION], sources)
        gpu_side = pa.array(codes == GPU_USER_ANNOTATION)
        self.gpu_annotations = self.gpu_annotations or pc.any(gpu_side).as_py()
        host_side = pc.invert(gpu_side)
        args = _args(events)
        pids, tids = _ints(events, "pid"), _ints(events, "tid")
        # A GPU-side annotation has no host thread: its pid is set to the launching process at the end.
        columns = {
            "name": names, "source": sources,
            "pid": pc.if_else(host_side, pids, None), "tid": pc.if_else(host_side, tids, None),
            "device": pc.if_else(gpu_side, pc.coalesce(_ints(args, "device"), pids), None),
            "stream": pc.if_else(gpu_side, pc.coalesce(_ints(args, "stream"), tids), None),
        }
        self._insert(("ranges",), "range", events, columns)
        picked = (events[i] for i in np.flatnonzero(codes == CPU_OP).tolist())
        if shaped := [e for e in picked if e.args is not None and len(e.args.input_dims)]:
            start, end = start_end_ns(_texts(shaped, "ts"), _texts(shaped, "dur"))
            args = [e.args for e in shaped]
            self._shapes.append(pa.table({
                "pid": _ints(shaped, "pid"), "tid": _ints(shaped, "tid"), "s": start, "e": end,
                "name": _strings(shaped, "name"),
                **{f: pa.array([_compact(getattr(a, f)) for a in args], pa.string()) for f in _SHAPE_FIELDS}}))

    def collectives(self, gpu: Sequence[Event], gpu_codes: np.ndarray, ranges: Sequence[Event],
                    range_codes: np.ndarray) -> None:
        """Collective metadata: NCCL kernels that carry it, and ``record_param_comms`` host ops that do.
        Few events qualify, so only those are picked out (by C-level passes) and written at once."""
        kernel_args = _args(gpu)
        has = np.fromiter(map(is_not, map(attrgetter("collective"), kernel_args), repeat(None)), bool, len(gpu))
        picked = [(gpu[i], kernel_args[i], "kernel")
                  for i in np.flatnonzero(has & (gpu_codes == GPU_KINDS_CODE["kernel"])).tolist()]
        named = np.fromiter(map(_PARAM_COMMS.__eq__, map(attrgetter("name"), ranges)), bool, len(ranges))
        picked += [(ranges[i], ranges[i].args, _PARAM_COMMS) for i in np.flatnonzero(named & (range_codes == CPU_OP))
                   if ranges[i].args is not None and ranges[i].args.collective is not None]
        if not picked:
            return
        events = [p[0] for p in picked]
        args = [p[1] for p in picked]
        host = [p[2] == _PARAM_COMMS for p in picked]
        s, e = start_end_ns(_texts(events, "ts"), _texts(events, "dur"))

        def text(values: list[object]) -> pa.Array:
            return pa.array([None if v is None else v if isinstance(v, str) else msgspec_text(v) for v in values],
                            pa.string())

        table = pa.table({
            "source": [p[2] for p in picked],
            "pid": pa.array([as_int(ev.pid) if h else None for ev, h in zip(events, host, strict=True)], pa.int64()),
            "tid": pa.array([as_int(ev.tid) if h else None for ev, h in zip(events, host, strict=True)], pa.int64()),
            "device": pa.array([None if h else a.device for a, h in zip(args, host, strict=True)], pa.int64()),
            "stream": pa.array([None if h else a.stream for a, h in zip(args, host, strict=True)], pa.int64()),
            "correlation": pa.array([None if h else a.correlation for a, h in zip(args, host, strict=True)],
                                    pa.int64()),
            "s": s, "e": e,
            "collective": text([a.collective for a in args]), "group_name": text([a.group_name for a in args]),
            "group_desc": text([a.group_desc for a in args]), "group_ranks": text([a.group_ranks for a in args]),
            "group_size": pa.array([a.group_size for a in args], pa.int64()),
            "seq": pa.array([as_int(a.seq) for a in args], pa.int64()),
            "in_nelems": pa.array([a.in_nelems for a in args], pa.int64()),
            "out_nelems": pa.array([a.out_nelems for a in args], pa.int64()),
            "dtype": text([a.dtype for a in args]),
        })
        _insert_arrow(self.con, _COLLECTIVES_SQL, self.params, table)

    def _short(self, names: pa.StringArray) -> pa.Array:
        """Short names, each distinct name worked out once per process (the ranks of a job share them)."""
        encoded = pc.dictionary_encode(names)
        shorts = list(map(_function_name, encoded.dictionary.to_pylist()))
        return pc.take(pa.array(shorts, pa.string()), encoded.indices)

    def _insert(self, tables: tuple[str, ...], destination: str, events: Sequence[Event],
                columns: dict[str, pa.Array]) -> None:
        """Add the exact times and queue the chunk; append to ``tables`` once enough rows are queued."""
        columns["s"], columns["e"] = start_end_ns(_texts(events, "ts"), _texts(events, "dur"))
        queue = self._queued.setdefault((tables, destination), [])
        queue.append(pa.table(columns))
        if sum(map(len, queue)) >= FLUSH_ROWS:
            self._flush(tables, destination)

    def flush(self) -> None:
        """Append every queued row (call once after the last chunk)."""
        for tables, destination in list(self._queued):
            self._flush(tables, destination)
        if self._launch_kernels:
            _insert_arrow(self.con, "INSERT INTO launch_kernels SELECT $rank, pid, correlation, kernel "
                          "FROM _rows WHERE correlation IS NOT NULL", {"rank": self.params["rank"]},
                          pa.concat_tables(self._launch_kernels))
            self._launch_kernels = []
        if self._shapes:
            _insert_arrow(self.con, "INSERT INTO op_shapes SELECT $rank, pid, tid, s + $base, e + $base, name, "
                          f"{', '.join(_SHAPE_FIELDS)} FROM _rows WHERE s IS NOT NULL", self.params,
                          pa.concat_tables(self._shapes))
            self._shapes = []

    def _flush(self, tables: tuple[str, ...], destination: str) -> None:
        """One INSERT per table for the queued chunks; count rows dropped for unreadable times."""
        chunk = pa.concat_tables(self._queued.pop((tables, destination)), promote_options="default")
        inserted = 0
        for table in tables:
            added = _insert_arrow(self.con, _INSERT_SQL[table], self.params, chunk)
            self.stored[table] += added
            inserted += added
        if inserted < len(chunk):
            self.skipped[f"(no readable ts/dur: {destination})"] += len(chunk) - inserted


def _insert_arrow(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object], rows: pa.Table) -> int:
    """Run the INSERT ``sql``, which reads ``rows`` as ``_rows``; how many rows it added. DuckDB finds ``_rows``
    among this function's locals (its replacement scan), which saves a register/unregister pair: about 0.5 ms a
    statement, a tenth of a small trace's read."""
    _rows = rows  # noqa: F841 (read by name in ``sql``)
    return con.execute(sql, params).fetchone()[0]


_SHAPE_FIELDS = ("input_dims", "input_types", "input_strides", "concrete_inputs")  # op_shapes' JSON columns


def _compact(raw: msgspec.Raw) -> str | None:
    """A raw JSON value re-encoded without whitespace (None when absent or not JSON)."""
    if not len(raw):
        return None
    try:
        return msgspec.json.encode(msgspec.json.decode(raw)).decode()
    except msgspec.DecodeError:
        return None


def _args(events: Sequence[Event]) -> list:
    """Each event's args struct (an empty one where the event has none)."""
    args = list(map(attrgetter("args"), events))
    return [a or EMPTY_ARGS for a in args] if None in args else args


def _strings(events: Sequence[Event], field: str) -> pa.LargeStringArray:
    """A text field as an Arrow column (large_string: Arrow builds it about twice as fast as string)."""
    return pa.array(list(map(attrgetter(field), events)), pa.large_string())


def _texts(events: Sequence[Event], field: str) -> pa.StringArray:
    return texts(list(map(attrgetter(field), events)))


def _or_id(column: pa.Int64Array, events: Sequence[Event], field: str) -> pa.Int64Array:
    """``column``, its NULLs filled from the events' ``pid``/``tid`` (read only when there are NULLs)."""
    return pc.coalesce(column, _ints(events, field)) if column.null_count else column


def _ints(items: Sequence[object], field: str) -> pa.Int64Array:
    """An integer field as int64; ids given as strings ("7", "stream 7") parse, other values are NULL."""
    values = list(map(attrgetter(field), items))
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([as_int(v) for v in values], pa.int64())
