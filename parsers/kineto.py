"""Reader for PyTorch profiler (Kineto) Chrome-trace JSON, ``.json`` or ``.json.gz``.

Why this shape: a Kineto file is one JSON object whose ``traceEvents`` list can reach GBs. ``json.load``
holds several copies of it as Python objects (HTA needs 4-5x the JSON size). Here the file's bytes are
held once; msgspec splits ``traceEvents`` into zero-copy ``Raw`` slices of that buffer, and each chunk of
events is decoded into small typed structs (only the fields the store needs), turned into Arrow columns
and appended to the store by DuckDB SQL. Peak memory is about 1.5x the JSON size (1 GB bench).

Times: ``ts``/``dur`` are microseconds, integers before PyTorch 2.4 and decimals with 3 places (ns)
after. They are kept as their JSON text and converted exactly by DuckDB's DECIMAL cast:
``start_ns = round(ts * 1000) (+ baseTimeNanoseconds)``, ``end_ns = round((ts + dur) * 1000) (+ base)``.
Going through float64 would lose ns on 2024 files whose ``ts`` are epoch us with 19 significant digits.
Format facts: ``shared/facts/kineto-trace-format.md``; the mapping is documented in ``docs/kineto.md``.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from tracekit.errors import InputError

CHUNK_EVENTS = 100_000
_READ_BLOCK_BYTES = 1 << 24

# Category -> (destination, subtype). 2021 files use the capitalised names.
_CATEGORIES: dict[str, tuple[str, str]] = {
    "kernel": ("gpu", "kernel"),
    "Kernel": ("gpu", "kernel"),
    "gpu_memcpy": ("gpu", "memcpy"),
    "Memcpy": ("gpu", "memcpy"),
    "gpu_memset": ("gpu", "memset"),
    "Memset": ("gpu", "memset"),
    "cuda_runtime": ("api", "runtime"),
    "Runtime": ("api", "runtime"),
    "cuda_driver": ("api", "driver"),
    "user_annotation": ("range", "user_annotation"),
    "gpu_user_annotation": ("range", "gpu_user_annotation"),
    "cpu_op": ("range", "cpu_op"),
    "Operator": ("range", "cpu_op"),
    "python_function": ("range", "python_function"),
}
_LEGACY_CATEGORIES = frozenset({"Kernel", "Memcpy", "Memset", "Runtime", "Operator"})
_PROFILER_STEP = re.compile(r"ProfilerStep#\d+$")
_STREAM_TID = re.compile(r"(?:stream\s*)?(\d+)\s*$")

# Decoding targets: only the fields the store needs; msgspec skips the rest without building them.


class _Args(msgspec.Struct, gc=False):
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    nbytes: int | None = msgspec.field(default=None, name="bytes")
    name: str | None = None  # process_name / thread_name metadata


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = msgspec.Raw()  # JSON number text, converted exactly in SQL
    dur: msgspec.Raw = msgspec.Raw()
    args: _Args | None = None


class _DeviceProperties(msgspec.Struct):
    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None  # noqa: N815 (JSON key)
    computeMajor: int | None = None  # noqa: N815
    computeMinor: int | None = None  # noqa: N815
    numSms: int | None = None  # noqa: N815


class _Times(msgspec.Struct, gc=False):
    """Only an event's times, as exact JSON text (see ``_decode_lenient``)."""

    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()


_EVENT_DECODER = msgspec.json.Decoder(_Event)
_LOOSE_DECODER = msgspec.json.Decoder(dict[str, Any])
_TIMES_DECODER = msgspec.json.Decoder(_Times)
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])

_TIME_COLUMNS = (("ts", pa.string()), ("dur", pa.string()))  # JSON number text
_SCHEMAS: dict[str, pa.Schema] = {
    "gpu": pa.schema([
        ("kind", pa.string()), ("name", pa.string()), *_TIME_COLUMNS, ("device", pa.int32()),
        ("stream", pa.int64()), ("correlation", pa.int64()), ("grid_x", pa.int32()),
        ("grid_y", pa.int32()), ("grid_z", pa.int32()), ("block_x", pa.int32()), ("block_y", pa.int32()),
        ("block_z", pa.int32()), ("nbytes", pa.int64()),
    ]),
    "api": pa.schema([
        ("api", pa.string()), ("name", pa.string()), ("pid", pa.int64()), ("tid", pa.int64()),
        *_TIME_COLUMNS, ("correlation", pa.int64()),
    ]),
    "range": pa.schema([
        ("source", pa.string()), ("name", pa.string()), ("pid", pa.int64()), ("tid", pa.int64()),
        *_TIME_COLUMNS, ("device", pa.int32()), ("stream", pa.int64()),
    ]),
}


# JSON number text (us) -> exact int64 ns, rounded to nearest; NULL when the text is not a number.
_START_NS_SQL = "TRY_CAST(TRY_CAST(ts AS DECIMAL(38, 9)) * 1000 AS BIGINT)"
_END_NS_SQL = "TRY_CAST((TRY_CAST(ts AS DECIMAL(38, 9)) + TRY_CAST(dur AS DECIMAL(38, 9))) * 1000 AS BIGINT)"


# Per destination: the INSERT run on each chunk (``_chunk``, with start ``s`` and end ``e`` in ns).
_INSERTS: dict[str, str] = {
    "gpu_kernel": """
        INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, dur_ns, name, short_name,
            correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z)
        SELECT $rank, device, stream, s + $base, e + $base, e - s, name, {short_name}, correlation,
            grid_x, grid_y, grid_z, block_x, block_y, block_z
        FROM _chunk WHERE kind = 'kernel' AND s IS NOT NULL AND e IS NOT NULL
    """,
    "gpu_memop": """
        INSERT INTO memops (rank, device_id, stream_id, start_ns, end_ns, dur_ns, kind, copy_kind, bytes,
            correlation_id)
        SELECT $rank, device, stream, s + $base, e + $base, e - s, kind,
            nullif(regexp_extract(name, '^Memcpy (\\w+)', 1), ''), nbytes, correlation
        FROM _chunk WHERE kind <> 'kernel' AND s IS NOT NULL AND e IS NOT NULL
    """,
    "api": """
        INSERT INTO api_calls (rank, pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api, correlation_id,
            is_duplicate)
        SELECT $rank, pid, tid, s + $base, e + $base, e - s, name, name, api, correlation, false
        FROM _chunk WHERE s IS NOT NULL AND e IS NOT NULL
    """,
    "range": """
        INSERT INTO ranges (rank, pid, tid, start_ns, end_ns, dur_ns, name, domain, source, style, end_tid,
            device_id, stream_id)
        SELECT $rank, pid, tid, s + $base, e + $base, e - s, name, NULL, source, 'PushPop', tid,
            device, stream
        FROM _chunk WHERE s IS NOT NULL AND e IS NOT NULL
    """,
}
# Unqualified kernel name: drop "void ", anonymous namespaces, template arguments and parameters.
_SHORT_NAME_SQL = (
    "coalesce(nullif(regexp_replace(regexp_extract(replace(name, '(anonymous namespace)::', ''),"
    " '^(?:void )?([^<(]*)', 1), '^.*::', ''), ''), name)"
)
_INSERTS["gpu_kernel"] = _INSERTS["gpu_kernel"].replace("{short_name}", _SHORT_NAME_SQL)
_INSERT_SQL = {
    key: sql.replace("FROM _chunk", f"FROM (SELECT *, {_START_NS_SQL} AS s, {_END_NS_SQL} AS e FROM _chunk)")
    for key, sql in _INSERTS.items()
}


def read_kineto(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one Kineto trace file into the store tables of ``con`` (see ``tracekit.parsers``).

    Raises InputError for truncated or invalid JSON, a corrupt gzip, JSON that is not a profiler trace,
    and a trace with no GPU events (the store then discards the half-written database).
    """
    path = Path(path)
    # Millions of short-lived tuples/lists per file: the cyclic GC would rescan them all, for no cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _Reader(path, con, _read_bytes(path)).run()
    finally:
        if gc_was_enabled:
            gc.enable()


def _read_bytes(path: Path) -> bytearray:
    """The file's JSON bytes, decompressed when gzip, in one buffer (no intermediate copies)."""
    try:
        with path.open("rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            if not gzipped:
                buffer = bytearray(path.stat().st_size)
                f.readinto(buffer)
                return buffer
            buffer = bytearray()
            with gzip.GzipFile(fileobj=f) as g:
                while block := g.read(_READ_BLOCK_BYTES):
                    buffer += block
            return buffer
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: corrupt gzip ({exc}); copy the file again") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None


def _as_int(value: object) -> int | None:
    """An id as int: ints pass, digit strings and 2021's "stream 7" parse, anything else is None."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        match = _STREAM_TID.fullmatch(value.strip()) if value else None
        return int(match.group(1)) if match else None
    return None


class _Reader:
    """One read: holds the per-file state between the chunks."""

    def __init__(self, path: Path, con: duckdb.DuckDBPyConnection, buffer: bytearray) -> None:
        self.path, self.con = path, con
        self.top, raw_events = self._split_top(buffer)
        self.raw_events: list[msgspec.Raw | None] = raw_events
        self.rank = _as_int(self._meta_object("distributedInfo").get("rank"))
        base = self._meta_value("baseTimeNanoseconds")
        self.base_ns = base if type(base) is int else 0
        self.skipped: Counter[str] = Counter()
        self.legacy = False
        self.float_ts: bool | None = None
        self.processes: dict[int, str] = {}
        self.threads: dict[tuple[int, int], str] = {}
        self.hip_api = False

    # ---- top level -------------------------------------------------------------------------------

    def _split_top(self, buffer: bytearray) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw | None]]:
        """Split the file into its top-level values and its events, all zero-copy slices of ``buffer``."""
        first = bytes(buffer[:64]).lstrip()[:1]
        try:
            if first == b"[":
                return {}, _RAW_LIST_DECODER.decode(buffer)
            if first != b"{":
                raise InputError(f"{self.path}: not a PyTorch profiler trace (not a JSON object or list); "
                                 "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
            top = msgspec.json.decode(buffer, type=dict[str, msgspec.Raw])
            if "traceEvents" not in top:
                raise InputError(f"{self.path}: not a PyTorch profiler trace (no traceEvents); "
                                 "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
            return top, _RAW_LIST_DECODER.decode(top["traceEvents"])
        except msgspec.ValidationError:
            raise InputError(f"{self.path}: not a PyTorch profiler trace (traceEvents is no list); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])") from None
        except msgspec.DecodeError as exc:
            problem = "truncated JSON" if "truncated" in str(exc) else "invalid JSON"
            raise InputError(f"{self.path}: {problem} ({exc}); copy the file again") from None

    def _meta_value(self, key: str) -> Any:
        """A top-level metadata value decoded, or None when absent or not JSON we can read."""
        raw = self.top.get(key)
        if raw is None:
            return None
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return None

    def _meta_object(self, key: str) -> dict[str, Any]:
        value = self._meta_value(key)
        return value if isinstance(value, dict) else {}

    # ---- events ----------------------------------------------------------------------------------

    def run(self) -> None:
        """Decode the events chunk by chunk, then write the per-file rows and derived columns."""
        if not self.raw_events:
            raise InputError(f"{self.path}: not a PyTorch profiler trace (no trace events); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        n_events = len(self.raw_events)
        recognised = 0
        for start in range(0, n_events, CHUNK_EVENTS):
            stop = min(start + CHUNK_EVENTS, n_events)
            events = [self._decode(raw) for raw in self.raw_events[start:stop]]
            self.raw_events[start:stop] = [None] * (stop - start)  # free the slices as we go
            recognised += self._load_chunk(events)
        if recognised == 0:
            raise InputError(f"{self.path}: not a PyTorch profiler trace (no trace events with a phase); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        n_gpu = sum(self.con.execute(f"SELECT count(*) FROM {t} WHERE rank IS NOT DISTINCT FROM $rank",
                                     {"rank": self.rank}).fetchone()[0] for t in ("kernels", "memops"))
        if n_gpu == 0:
            unreadable = self.skipped["(no readable ts/dur: gpu)"]
            if unreadable:
                raise InputError(f"{self.path}: no GPU event with readable times ({unreadable} with ts/dur missing or "
                                 "beyond int64 ns); the trace is damaged: export or capture it again")
            raise InputError(f"{self.path}: no GPU events (CPU-only trace: no kernel, memcpy or memset); profile "
                             "with torch.profiler.ProfilerActivity.CUDA")
        self._finish()

    def _decode(self, raw: msgspec.Raw | None) -> _Event | None:
        """One event, or None (counted as malformed) when it is not an event object we can read."""
        try:
            return _EVENT_DECODER.decode(raw)
        except msgspec.ValidationError:
            return self._decode_lenient(raw)

    def _decode_lenient(self, raw: msgspec.Raw | None) -> _Event | None:
        """Fallback for events with unexpected value types: keep what converts, drop what does not."""
        try:
            obj, times = _LOOSE_DECODER.decode(raw), _TIMES_DECODER.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            self.skipped["(malformed event)"] += 1
            return None
        args = obj.get("args") if isinstance(obj.get("args"), dict) else {}

        def triple(value: object) -> list[int] | None:
            ints = [_as_int(v) for v in value] if isinstance(value, list) else []
            return ints if len(ints) == 3 and None not in ints else None

        def text(value: object) -> str | None:
            return value if isinstance(value, str) else None

        return _Event(
            ph=text(obj.get("ph")) or "", cat=text(obj.get("cat")), name=text(obj.get("name")) or "",
            pid=obj.get("pid") if isinstance(obj.get("pid"), int | str) else None,
            tid=obj.get("tid") if isinstance(obj.get("tid"), int | str) else None,
            ts=times.ts, dur=times.dur,
            args=_Args(device=_as_int(args.get("device")), stream=_as_int(args.get("stream")),
                       correlation=_as_int(args.get("correlation")), grid=triple(args.get("grid")),
                       block=triple(args.get("block")), nbytes=_as_int(args.get("bytes")),
                       name=text(args.get("name"))),
        )

    def _load_chunk(self, events: list[_Event | None]) -> int:
        """Route one chunk's events to their tables; return how many had a phase."""
        buckets: dict[str, list[tuple[str, _Event]]] = {"gpu": [], "api": [], "range": []}
        recognised = 0
        for event in events:
            if event is None:
                continue
            if event.ph:
                recognised += 1
            if event.ph == "X":
                route = _CATEGORIES.get(event.cat) if event.cat else None
                if route is not None:
                    buckets[route[0]].append((route[1], event))
                    continue
            elif event.ph == "M":
                self._metadata(event)
                continue
            self.skipped[event.cat or f"(no category, ph {event.ph or '?'})"] += 1
        for destination, rows in buckets.items():
            if rows:
                self._insert(destination, rows)
        return recognised

    def _metadata(self, event: _Event) -> None:
        """process_name / thread_name metadata; other metadata events carry nothing the store keeps."""
        name = event.args.name if event.args else None
        pid, tid = _as_int(event.pid), _as_int(event.tid)
        if name is None or pid is None:
            return
        if event.name == "process_name":
            self.processes[pid] = name
        elif event.name == "thread_name" and tid is not None:
            self.threads[(pid, tid)] = name

    def _insert(self, destination: str, rows: list[tuple[str, _Event]]) -> None:
        """Append one chunk's rows of one destination through an Arrow table and DuckDB SQL."""
        events = [event for _, event in rows]
        self._note_vintage(rows)
        columns: dict[str, list[Any]] = {
            "name": [e.name for e in events],
            "ts": [bytes(e.ts) for e in events],
            "dur": [bytes(e.dur) for e in events],
        }
        args = [e.args or _EMPTY_ARGS for e in events]
        if destination == "gpu":
            columns["kind"] = [kind for kind, _ in rows]
            columns["device"] = [a.device if a.device is not None else _as_int(e.pid)
                                 for a, e in zip(args, events, strict=True)]
            columns["stream"] = [a.stream if a.stream is not None else _as_int(e.tid)
                                 for a, e in zip(args, events, strict=True)]
            columns["correlation"] = [a.correlation for a in args]
            grids = [a.grid if a.grid and len(a.grid) == 3 else _NO_DIMS for a in args]
            blocks = [a.block if a.block and len(a.block) == 3 else _NO_DIMS for a in args]
            for axis, index in (("x", 0), ("y", 1), ("z", 2)):
                columns[f"grid_{axis}"] = [g[index] for g in grids]
                columns[f"block_{axis}"] = [b[index] for b in blocks]
            columns["nbytes"] = [a.nbytes for a in args]
            self._insert_sql(("gpu_kernel", "gpu_memop"), destination, columns, len(rows))
            return
        columns["pid"] = [_as_int(e.pid) for e in events]
        columns["tid"] = [_as_int(e.tid) for e in events]
        if destination == "api":
            columns["api"] = [
                "driver" if kind == "driver" or (e.name.startswith("cu") and not e.name.startswith("cuda"))
                else "runtime" for kind, e in rows
            ]
            columns["correlation"] = [a.correlation for a in args]
            self.hip_api = self.hip_api or any(e.name.startswith("hip") for e in events)
            self._insert_sql(("api",), destination, columns, len(rows))
            return
        sources = [
            "user_annotation" if source == "cpu_op" and _PROFILER_STEP.match(e.name) else source
            for source, e in rows
        ]  # 2021 files record ProfilerStep#N as an Operator
        gpu_side = [source == "gpu_user_annotation" for source in sources]
        columns["source"] = sources
        columns["device"] = [(a.device if a.device is not None else _as_int(e.pid)) if gpu else None
                             for a, e, gpu in zip(args, events, gpu_side, strict=True)]
        columns["stream"] = [(a.stream if a.stream is not None else _as_int(e.tid)) if gpu else None
                             for a, e, gpu in zip(args, events, gpu_side, strict=True)]
        # A GPU-side annotation has no host thread: its pid is set to the launching process at the end.
        columns["pid"] = [None if gpu else pid for pid, gpu in zip(columns["pid"], gpu_side, strict=True)]
        columns["tid"] = [None if gpu else tid for tid, gpu in zip(columns["tid"], gpu_side, strict=True)]
        self._insert_sql(("range",), destination, columns, len(rows))

    def _note_vintage(self, rows: list[tuple[str, _Event]]) -> None:
        """Remember whether this is a 2021 file and whether timestamps are float (ns) or integer us."""
        if not self.legacy:
            self.legacy = any(e.cat in _LEGACY_CATEGORIES for _, e in rows[:100])
        if self.float_ts is None:
            self.float_ts = any(b"." in bytes(e.ts) for _, e in rows[:1000])

    def _insert_sql(self, statements: Iterable[str], destination: str, columns: dict[str, list[Any]],
                    n_rows: int) -> None:
        """Run the INSERTs of ``statements`` on the chunk; count rows dropped for unreadable times."""
        table = pa.Table.from_pydict(columns, schema=_SCHEMAS[destination])
        self.con.register("_chunk", table)
        try:
            inserted = sum(
                self.con.execute(_INSERT_SQL[key], {"rank": self.rank, "base": self.base_ns}).fetchone()[0]
                for key in statements
            )
        finally:
            self.con.unregister("_chunk")
        if inserted < n_rows:
            self.skipped[f"(no readable ts/dur: {destination})"] += n_rows - inserted

    # ---- per-file rows ---------------------------------------------------------------------------

    def _finish(self) -> None:
        """Launching pids, processes/threads, devices, metadata, notes and the trace_info row."""
        params = {"rank": self.rank}
        own = "rank IS NOT DISTINCT FROM $rank"
        main_pid = self.con.execute(
            f"""SELECT coalesce(
                    (SELECT pid FROM api_calls WHERE {own} AND pid IS NOT NULL GROUP BY pid
                     ORDER BY count(*) DESC, pid LIMIT 1),
                    (SELECT pid FROM ranges WHERE {own} AND pid IS NOT NULL GROUP BY pid
                     ORDER BY count(*) DESC, pid LIMIT 1))""",
            params,
        ).fetchone()[0]
        params_pid = {**params, "main_pid": main_pid}
        for table in ("kernels", "memops"):  # the launching process, found by correlation id
            self.con.execute(
                f"""UPDATE {table} SET pid = coalesce(
                        (SELECT min(a.pid) FROM api_calls AS a WHERE a.rank IS NOT DISTINCT FROM $rank
                         AND a.correlation_id = {table}.correlation_id), $main_pid)
                    WHERE {own}""",
                params_pid,
            )
        self.con.execute(f"UPDATE ranges SET pid = $main_pid WHERE {own} AND source = 'gpu_user_annotation'",
                         params_pid)
        self._write_processes()
        self._write_devices()
        self._write_meta()
        notes = [(self.rank, "skipped_events", n, category) for category, n in sorted(self.skipped.items())]
        if self.rank is None:
            notes.append((None, "no_rank", 1, "distributedInfo.rank is absent: the store assigns one"))
        if notes:
            self.con.executemany("INSERT INTO read_notes VALUES (?, ?, ?, ?)", notes)
        per_table = " UNION ALL ".join(f"SELECT min(start_ns) AS s, max(end_ns) AS e FROM {t} WHERE {own}"
                                       for t in ("kernels", "memops", "api_calls", "ranges"))
        start_ns, end_ns = self.con.execute(f"SELECT min(s), max(e) FROM ({per_table})", params).fetchone()
        self.con.execute(
            "INSERT INTO trace_info VALUES (?, ?, 'kineto', ?, NULL, NULL, ?, ?)",
            [self.rank, str(self.path), self._format_version(), start_ns, end_ns],
        )

    def _format_version(self) -> str:
        """schemaVersion plus a vintage tag: '2021-legacy', 'int-us' or 'float-ns'."""
        schema_version = self._meta_value("schemaVersion")
        vintage = "2021-legacy" if self.legacy else "float-ns" if self.float_ts else "int-us"
        return f"{schema_version if schema_version is not None else '?'}/{vintage}"

    def _write_processes(self) -> None:
        """Host processes and threads named by metadata events (GPU rows' pseudo-processes excluded)."""
        host_pids = {row[0] for row in self.con.execute(
            "SELECT DISTINCT pid FROM api_calls WHERE rank IS NOT DISTINCT FROM $rank UNION "
            "SELECT DISTINCT pid FROM ranges WHERE rank IS NOT DISTINCT FROM $rank AND tid IS NOT NULL",
            {"rank": self.rank}).fetchall()}
        processes = [(self.rank, pid, name) for pid, name in self.processes.items() if pid in host_pids]
        threads = [(self.rank, pid, tid, name)
                   for (pid, tid), name in self.threads.items() if pid in host_pids]
        if processes:
            self.con.executemany("INSERT INTO processes VALUES (?, ?, ?)", processes)
        if threads:
            self.con.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", threads)

    def _vendor(self) -> str:
        amd_keys = ("hip_runtime_version", "hip_driver_version", "roctracer_version")
        return "amd" if self.hip_api or any(key in self.top for key in amd_keys) else "nvidia"

    def _write_devices(self) -> None:
        """deviceProperties rows, plus bare rows for devices that ran work but have no properties."""
        try:
            properties = msgspec.json.decode(self.top["deviceProperties"], type=list[_DeviceProperties]) \
                if "deviceProperties" in self.top else []
        except (msgspec.ValidationError, msgspec.DecodeError):
            properties = []
            self.con.execute(
                "INSERT INTO read_notes VALUES (?, 'unreadable_metadata', 1, 'deviceProperties')",
                [self.rank])
        vendor = self._vendor()
        rows = {p.id: (self.rank, p.id, p.name or None, p.numSms, p.totalGlobalMem, None, p.computeMajor,
                       p.computeMinor, vendor) for p in properties if p.id is not None}
        for (device_id,) in self.con.execute(
            "SELECT DISTINCT device_id FROM kernels WHERE rank IS NOT DISTINCT FROM $rank"
            " UNION SELECT DISTINCT device_id FROM memops WHERE rank IS NOT DISTINCT FROM $rank",
            {"rank": self.rank}).fetchall():
            if device_id is None:
                continue
            rows.setdefault(device_id, (self.rank, device_id, None, None, None, None, None, None, vendor))
        if rows:
            self.con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 [rows[key] for key in sorted(rows)])

    def _write_meta(self) -> None:
        """Top-level scalars, distributedInfo fields and a deviceProperties summary into trace_meta."""
        meta: dict[str, str] = {}
        for key in self.top:
            if key in ("traceEvents", "deviceProperties", "distributedInfo"):
                continue
            value = self._meta_value(key)
            if isinstance(value, str | int | float | bool):
                meta[key] = str(value)
        for key, value in self._meta_object("distributedInfo").items():
            text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
            meta[f"distributedInfo.{key}"] = text
        devices = self._meta_value("deviceProperties")
        if isinstance(devices, list):
            names = sorted({str(d.get("name")) for d in devices if isinstance(d, dict) and d.get("name")})
            meta["deviceProperties.count"] = str(len(devices))
            meta["deviceProperties.names"] = ", ".join(names)
        if meta:
            self.con.executemany("INSERT INTO trace_meta VALUES (?, ?, ?)",
                                 [(self.rank, key, value) for key, value in meta.items()])


_EMPTY_ARGS = _Args()
_NO_DIMS = (None, None, None)
