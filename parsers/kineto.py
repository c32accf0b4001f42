"""Reader for PyTorch profiler (Kineto) Chrome-trace JSON, ``.json`` or ``.json.gz``: the entry point.

Why this shape: a Kineto file is one JSON object whose ``traceEvents`` list can reach GBs. ``json.load``
holds several copies of it as Python objects (HTA needs 4-5x the JSON size). Here the file's bytes are
held once; msgspec splits ``traceEvents`` into zero-copy ``Raw`` slices of that buffer, and each chunk of
events is decoded into small typed structs (``kineto_events``), turned into Arrow columns and appended to
the store by DuckDB SQL (``kineto_tables``). This module holds the container: the file, its top-level
metadata, the chunk loop and the per-file rows (processes, devices, trace_meta, read_notes, trace_info).

Times: ``ts``/``dur`` are microseconds, integers before PyTorch 2.4 and decimals with 3 places (ns)
after; ``kineto_times`` converts their JSON text exactly to int64 ns (never through float64).
Format facts: ``shared/facts/kineto-trace-format.md``; the mapping is documented in ``docs/kineto.md``.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from tracekit import progress
from tracekit.errors import InputError
from tracekit.files import check_decompressed
from tracekit.parsers.kineto_events import Event, as_int, decode, route
from tracekit.parsers.kineto_stream import EventBlocks, NotStreamable, TailMismatch
from tracekit.parsers.kineto_tables import TableWriter
from tracekit.parsers.registry import UTF8_BOM
from tracekit.parsers.schema import NO_GPU_ACTIVITY, TABLES, write_capture

EPOCH_NS = 10**18  # a timeline past 2001 in ns is a wall clock (PyTorch's epoch microseconds)

CHUNK_EVENTS = 100_000
# Files from this size (on disk; a gzip file: its size times GZIP_RATIO) are read in blocks (kineto_stream),
# never held whole; smaller ones are held whole, split into event slices and decoded chunk by chunk.
STREAM_MIN_BYTES = 32 << 20
GZIP_RATIO = 10
_BLOCK_DECODER = msgspec.json.Decoder(list[Event])
Events = tuple[list[Event], float, Counter[str]]  # a chunk's events, how far the file is read, what was skipped
_READ_BLOCK_BYTES = 1 << 24
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_LEADING_SPACE = re.compile(rb"[ \t\r\n]*")


class _DeviceProperties(msgspec.Struct):
    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None  # noqa: N815 (JSON key)
    computeMajor: int | None = None  # noqa: N815
    computeMinor: int | None = None  # noqa: N815
    numSms: int | None = None  # noqa: N815


def read_kineto(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one Kineto trace file into the store tables of ``con`` (see ``tracekit.parsers``).

    Raises InputError for truncated or invalid JSON, a corrupt gzip, JSON that is not a profiler trace,
    and a trace whose GPU events are all unreadable (the store then discards the half-written database). A
    CPU-only trace (no GPU events at all) is read, with a ``no_gpu_activity`` note that the analysis refuses.
    """
    path = Path(path)
    # Millions of short-lived tuples/lists per file: the cyclic GC would rescan them all, for no cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    # Each chunk's Arrow columns are freed before the next: the system allocator returns that memory, Arrow's
    # default (mimalloc) keeps it, which raised the peak by about 60 MB on a 250 MB trace (bench_kineto.py).
    # Buffers remember their pool, so the default is simply restored afterwards.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        if not _read_in_blocks(path, con):
            _Reader(path, con, *_split_top(path, _read_bytes(path))).run()
    finally:
        pa.set_memory_pool(pool)
        if gc_was_enabled:
            gc.enable()


def _read_in_blocks(path: Path, con: duckdb.DuckDBPyConnection) -> bool:
    """Read a large file in bounded blocks; False when it is small or its start or end is not the usual
    shape (then it is read whole, which says what is wrong, and nothing was written)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    if size * (GZIP_RATIO if gzipped else 1) < STREAM_MIN_BYTES:
        return False
    try:
        blocks = EventBlocks(path, _BLOCK_DECODER)
    except NotStreamable:
        return False
    reader = _Reader(path, con, blocks.top, _blocked_events(blocks))
    try:
        reader.run()
    except TailMismatch:  # the end read ahead was not the end: forget this file's rows, read it whole
        for table, columns in TABLES.items():
            if columns.lstrip().startswith("rank INTEGER"):
                con.execute(f"DELETE FROM {table} WHERE rank IS NOT DISTINCT FROM $rank", {"rank": reader.rank})
        return False
    return True


def _blocked_events(blocks: EventBlocks) -> Iterator[Events]:
    """The events of a file read in blocks, in chunks of ``CHUNK_EVENTS`` (as a file held whole is cut, so
    both store the same rows in the same order); events of unexpected shape are decoded one by one."""
    pending: list[Event] = []
    skipped = Counter[str]()
    for block in blocks.blocks():
        pending += decode(block, skipped) if block and isinstance(block[0], msgspec.Raw) else block
        while len(pending) >= CHUNK_EVENTS:
            yield pending[:CHUNK_EVENTS], blocks.fraction(), skipped
            del pending[:CHUNK_EVENTS]
            skipped = Counter()
    if pending or skipped:
        yield pending, 1.0, skipped


def _whole_events(raw_events: list[msgspec.Raw | None]) -> Iterator[Events]:
    """The events of a file held whole, chunk by chunk, each chunk's slices freed once decoded."""
    n_events = len(raw_events)
    for start in range(0, n_events, CHUNK_EVENTS):
        stop = min(start + CHUNK_EVENTS, n_events)
        skipped = Counter[str]()
        events = decode(raw_events[start:stop], skipped)
        raw_events[start:stop] = [None] * (stop - start)  # free the slices as we go
        yield events, stop / n_events, skipped


def _read_bytes(path: Path) -> bytearray:
    """The file's JSON bytes, decompressed when gzip, in one buffer (no intermediate copies)."""
    try:
        with path.open("rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            if not gzipped:
                check_decompressed(path, path.stat().st_size, path.stat().st_size)  # held whole in memory
                buffer = bytearray(path.stat().st_size)
                f.readinto(buffer)
                return buffer
            buffer = bytearray()
            compressed = path.stat().st_size
            with gzip.GzipFile(fileobj=f) as g:
                while block := g.read(_READ_BLOCK_BYTES):
                    buffer += block
                    check_decompressed(path, len(buffer), compressed)  # a bomb stops here, memory bounded
            return buffer
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: corrupt gzip ({exc}); copy the file again") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None


def _split_top(path: Path, buffer: bytearray) -> tuple[dict[str, msgspec.Raw], Iterator[Events]]:
    """Split the file into its top-level values and its events (zero-copy slices of ``buffer``, decoded chunk
    by chunk)."""
    if buffer.startswith(UTF8_BOM):
        del buffer[:len(UTF8_BOM)]  # a byte-order mark some editors and Windows tools write
    start = _LEADING_SPACE.match(buffer).end()
    first = bytes(buffer[start:start + 1])
    try:
        if first == b"[":
            return {}, _whole_events(_RAW_LIST_DECODER.decode(buffer))
        if first != b"{":
            raise InputError(f"{path}: not a PyTorch profiler trace (not a JSON object or list); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        top = msgspec.json.decode(buffer, type=dict[str, msgspec.Raw])
        if "traceEvents" not in top:
            raise InputError(f"{path}: not a PyTorch profiler trace (no traceEvents); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        return top, _whole_events(_RAW_LIST_DECODER.decode(top["traceEvents"]))
    except msgspec.ValidationError:
        raise InputError(f"{path}: not a PyTorch profiler trace (traceEvents is no list); "
                         "give the file torch.profiler wrote (*.pt.trace.json[.gz])") from None
    except msgspec.DecodeError as exc:
        problem = "truncated JSON" if "truncated" in str(exc) else "invalid JSON"
        raise InputError(f"{path}: {problem} ({exc}); copy the file again") from None


class _Reader:
    """One read: holds the per-file state between the chunks."""

    def __init__(self, path: Path, con: duckdb.DuckDBPyConnection, top: dict[str, msgspec.Raw],
                 events: Iterator[Events]) -> None:
        self.path, self.con = path, con
        self.top, self.events = top, events
        self.rank = as_int(self._meta_object("distributedInfo").get("rank"))
        base = self._meta_value("baseTimeNanoseconds")
        self.base_ns = base if type(base) is int else 0
        self.skipped: Counter[str] = Counter()
        self.tables = TableWriter(con, self.rank, self.base_ns, self.skipped)
        self.legacy = False
        self.float_ts: bool | None = None
        self.processes: dict[int, str] = {}
        self.threads: dict[tuple[int, int], str] = {}
        self.notes: list[tuple[int | None, str, int, str]] = []  # read_notes rows, written once at the end

    # ---- top level -------------------------------------------------------------------------------

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
        n_events = recognised = 0
        for events, fraction, skipped in self.events:
            self.skipped.update(skipped)
            n_events += len(events)
            recognised += self._load_chunk(events)
            progress.report(self.path, 0.9 * fraction)  # the per-file rows take the rest
        if n_events == 0 and not self.skipped:
            raise InputError(f"{self.path}: not a PyTorch profiler trace (no trace events); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        self.tables.flush()
        if recognised == 0:
            raise InputError(f"{self.path}: not a PyTorch profiler trace (no trace events with a phase); "
                             "give the file torch.profiler wrote (*.pt.trace.json[.gz])")
        if self.tables.stored["kernels"] + self.tables.stored["memops"] == 0:
            unreadable = self.skipped["(no readable ts/dur: gpu)"]
            if unreadable:
                raise InputError(f"{self.path}: no GPU event with readable times ({unreadable} with ts/dur missing or "
                                 "beyond int64 ns); the trace is damaged: export or capture it again")
            # A CPU-only trace: stored, so `info` can describe it; the analysis refuses it with this note.
            self.notes.append((self.rank, NO_GPU_ACTIVITY, 1, (
                "no GPU events (CPU-only trace: no kernel, memcpy or memset); profile with "
                "torch.profiler.ProfilerActivity.CUDA")))
        self._finish()

    def _load_chunk(self, events: list[Event]) -> int:
        """Route one chunk's events to their tables; return how many had a phase."""
        routed = route(events, self.skipped)
        for event in routed.metadata:
            self._metadata(event)
        self.legacy = self.legacy or routed.legacy
        for write, rows, codes in ((self.tables.gpu, routed.gpu, routed.gpu_codes),
                                   (self.tables.api, routed.api, routed.api_codes),
                                   (self.tables.ranges, routed.ranges, routed.range_codes)):
            if rows:
                if self.float_ts is None:  # integer us before PyTorch 2.4, three decimals (ns) after
                    self.float_ts = any(b"." in bytes(e.ts) for e in rows[:1000])
                write(rows, codes)
        self.tables.collectives(routed.gpu, routed.gpu_codes, routed.ranges, routed.range_codes)
        return routed.recognised

    def _metadata(self, event: Event) -> None:
        """process_name / thread_name metadata; other metadata events carry nothing the store keeps."""
        name = event.args.name if event.args else None
        pid, tid = as_int(event.pid), as_int(event.tid)
        if name is None or pid is None:
            return
        if event.name == "process_name":
            self.processes[pid] = name
        elif event.name == "thread_name" and tid is not None:
            self.threads[(pid, tid)] = name

    # ---- per-file rows ---------------------------------------------------------------------------

    def _finish(self) -> None:
        """Launching pids, processes/threads, devices, metadata, notes and the trace_info row.

        A small trace's read is mostly fixed cost per DuckDB statement (planning), so what the per-file rows
        need from the stored events is one query, and each small table gets one INSERT."""
        params = {"rank": self.rank}
        own = "rank IS NOT DISTINCT FROM $rank"
        per_table = " UNION ALL ".join(f"SELECT min(start_ns) AS s, max(end_ns) AS e FROM {t} WHERE {own}"
                                       for t in ("kernels", "memops", "api_calls", "ranges"))
        main_pid, host_pids, device_ids, start_ns, end_ns = self.con.execute(
            f"""SELECT coalesce(
                    (SELECT pid FROM api_calls WHERE {own} AND pid IS NOT NULL GROUP BY pid
                     ORDER BY count(*) DESC, pid LIMIT 1),
                    (SELECT pid FROM ranges WHERE {own} AND pid IS NOT NULL GROUP BY pid
                     ORDER BY count(*) DESC, pid LIMIT 1)),
                (SELECT list(DISTINCT pid) FROM (SELECT pid FROM api_calls WHERE {own}
                     UNION ALL SELECT pid FROM ranges WHERE {own} AND tid IS NOT NULL)),
                (SELECT list(DISTINCT device_id) FROM (SELECT device_id FROM kernels WHERE {own}
                     UNION ALL SELECT device_id FROM memops WHERE {own})),
                span.s, span.e
            FROM (SELECT min(s) AS s, max(e) AS e FROM ({per_table})) AS span""",
            params,
        ).fetchone()
        params_pid = {**params, "main_pid": main_pid}
        for table in ("kernels", "memops"):  # the launching process, found by correlation id
            if self.tables.stored[table]:
                self.con.execute(
                    f"""UPDATE {table} SET pid = coalesce(
                            (SELECT min(a.pid) FROM api_calls AS a WHERE a.rank IS NOT DISTINCT FROM $rank
                             AND a.correlation_id = {table}.correlation_id), $main_pid)
                        WHERE {own}""",
                    params_pid,
                )
        if self.tables.gpu_annotations:  # GPU-side annotations have no host process: the main one's
            self.con.execute(f"UPDATE ranges SET pid = $main_pid WHERE {own} AND source = 'gpu_user_annotation'",
                             params_pid)
        self._write_processes(set(host_pids or ()))
        self._write_devices([device_id for device_id in device_ids or () if device_id is not None])
        self._write_meta()
        self.notes += [(self.rank, "skipped_events", n, category) for category, n in sorted(self.skipped.items())]
        if self.rank is None:
            self.notes.append((None, "no_rank", 1, "distributedInfo.rank is absent: the store assigns one"))
        _insert_rows(self.con, "read_notes", self.notes)
        self.con.execute(
            "INSERT INTO trace_info VALUES (?, ?, 'kineto', ?, NULL, NULL, ?, ?)",
            [self.rank, str(self.path), self._format_version(), start_ns, end_ns],
        )
        world = str(self._meta_object("distributedInfo").get("world_size", ""))
        host = self._meta_value("Hostname")
        write_capture(self.con, self.rank, world_size=int(world) if world.isdigit() else None,
                      host=str(host) if host else None,
                      wall_clock_base_ns=0 if start_ns is not None and start_ns >= EPOCH_NS else None,
                      rank_source="recorded" if self.rank is not None else None)

    def _format_version(self) -> str:
        """schemaVersion plus a vintage tag: '2021-legacy', 'int-us' or 'float-ns'."""
        schema_version = self._meta_value("schemaVersion")
        vintage = "2021-legacy" if self.legacy else "float-ns" if self.float_ts else "int-us"
        return f"{schema_version if schema_version is not None else '?'}/{vintage}"

    def _write_processes(self, host_pids: set[int]) -> None:
        """Host processes and threads named by metadata events (GPU rows' pseudo-processes excluded)."""
        processes = [(self.rank, pid, name) for pid, name in self.processes.items() if pid in host_pids]
        threads = [(self.rank, pid, tid, name)
                   for (pid, tid), name in self.threads.items() if pid in host_pids]
        _insert_rows(self.con, "processes", processes)
        _insert_rows(self.con, "threads", threads)

    def _vendor(self) -> str:
        amd_keys = ("hip_runtime_version", "hip_driver_version", "roctracer_version")
        return "amd" if self.tables.hip_api or any(key in self.top for key in amd_keys) else "nvidia"

    def _write_devices(self, device_ids: list[int]) -> None:
        """deviceProperties rows, plus bare rows for devices that ran work but have no properties."""
        try:
            properties = msgspec.json.decode(self.top["deviceProperties"], type=list[_DeviceProperties]) \
                if "deviceProperties" in self.top else []
        except (msgspec.ValidationError, msgspec.DecodeError):
            properties = []
            self.notes.append((self.rank, "unreadable_metadata", 1, "deviceProperties"))
        vendor = self._vendor()
        rows = {p.id: (self.rank, p.id, p.name or None, p.numSms, p.totalGlobalMem, None, p.computeMajor,
                       p.computeMinor, vendor) for p in properties if p.id is not None}
        for device_id in device_ids:
            rows.setdefault(device_id, (self.rank, device_id, None, None, None, None, None, None, vendor))
        _insert_rows(self.con, "devices", [rows[key] for key in sorted(rows)])

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
        _insert_rows(self.con, "trace_meta", [(self.rank, key, value) for key, value in meta.items()])


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """``rows`` appended to ``table`` by one INSERT (``executemany`` runs one statement per row)."""
    if rows:
        values = ", ".join(["(" + ", ".join(["?"] * len(rows[0])) + ")"] * len(rows))
        con.execute(f"INSERT INTO {table} VALUES {values}", [value for row in rows for value in row])
