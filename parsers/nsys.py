"""Reader of Nsight Systems SQLite exports (schema pre-2.x, 2.x and 3.x) into the trace store.

The large activity tables are read with adbc-driver-sqlite straight into Arrow record batches and
streamed into DuckDB, where the StringIds joins and the ``globalPid``/``globalTid`` decoding happen in
SQL (``(g >> 24) & 16777215``: DuckDB reads ``0x1000000`` as an alias, facts P7). Nothing is read
row by row in Python, and only the needed columns leave SQLite. The small metadata tables are read in
``nsys_meta`` with the stdlib module. See ``shared/facts/nsys-sqlite-schema.md`` for the tables and the
pitfalls P1-P12 handled here.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import adbc_driver_manager
import duckdb
import pyarrow as pa

from tracekit import progress
from tracekit.errors import InputError
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture

from .nsys_api import api_call_notes, read_api_calls
from .nsys_graphs import read_graph_nodes
from .nsys_meta import KERNEL_TABLE, ExportInfo, capture_facts, inspect_export
from .nsys_parts import OrderedParts, range_filter, rowid_ranges
from .nsys_ranks import assign_process_ranks
from .nsys_shapes import read_nvtx_shapes
from .nsys_stream import ArrowStream, Sqlite, one_line

PID = "(({g} >> 24) & 16777215)"  # the pid in a globalPid/globalTid (facts §2.10)
TID = "({g} & 16777215)"
# ENUM_CUDA_MEMCPY_OPER (facts §2.4); index = copyKind.
COPY_KINDS = [
    "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
    "Unified HtoD", "Unified DtoH", "Unified DtoD",
]  # fmt: skip
NVTX_RANGE_TYPES = (59, 60, 70, 71)  # push/pop 59, 70; start/end 60, 71 (70/71: NVTXT variants)
NVTX_DOMAIN_CREATE = 75
# The columns read of the kernel table (bench/bench_ingest.py reads the same for its bare read).
KERNEL_COLUMNS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "graphId", "graphNodeId"]  # fmt: skip


def read_nsys(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one Nsight Systems SQLite export into the store tables of ``con`` (rank NULL)."""
    path = Path(path)
    info = inspect_export(path)
    try:
        db = Sqlite(info.uri)
    except adbc_driver_manager.Error as exc:
        raise InputError(f"{path}: cannot open as SQLite ({one_line(exc)})") from None
    try:
        _Loader(path, info, db, con).run()
    finally:
        db.close()



class _Loader(ArrowStream):
    """One export's ingest: streams each activity table from SQLite into a store table."""

    def __init__(
        self, path: Path, info: ExportInfo, db: Sqlite,
        con: duckdb.DuckDBPyConnection,
    ) -> None:  # fmt: skip
        super().__init__(path, db, info.replaced_strings)
        self.info, self.con = info, con
        self.database = con.execute("SELECT current_database()").fetchall()[0][0]  # where the store tables are
        self.strings = pa.table({"id": pa.array([], pa.int64()), "value": pa.array([], pa.string())})
        self.notes: list[tuple[str, int, str]] = []
        self.missing: list[str] = []
        self.rank_source: str | None = None  # 'recorded' or 'process_order' when the file's rows carry ranks

    def _columns(self, base: str, wanted: list[str], required: list[str]) -> tuple[str, str] | None:
        """The export's table name and a SELECT list of the wanted columns it has (None: no table)."""
        table = self.info.table(base)
        if table is None:
            return None
        have = set(self.info.tables[table])
        if lacking := [c for c in required if c not in have]:
            raise InputError(f"{self.path}: table {table} lacks column(s) {', '.join(lacking)}")
        return table, ", ".join(f'"{c}"' for c in wanted if c in have)

    def _insert(
        self,
        sql: str,
        sources: dict[str, pa.RecordBatchReader | pa.Table],
        params: dict | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        """Run an INSERT ... SELECT over registered Arrow sources (and the StringIds as
        ``_nsys_strings``), then surface any read error."""
        con = con or self.con
        sources = {"_nsys_strings": self.strings, **sources}
        for name, source in sources.items():
            con.register(name, source)
        try:
            con.execute(sql, params).fetchall()
        except duckdb.Error:
            if self.errors:
                raise InputError(self.errors[0]) from None
            raise
        finally:
            for name in sources:  # after a failed insert on a range's cursor its transaction is aborted, and
                with contextlib.suppress(duckdb.TransactionException):  # the insert's error is the one to raise
                    con.unregister(name)
        if self.errors:
            raise InputError(self.errors[0])

    def _run(self, sql: str, params: dict | None = None) -> None:
        """Execute a statement and consume its result (DuckDB keeps unfinished results open)."""
        self.con.execute(sql, params).fetchall()

    # --- tables ------------------------------------------------------------------------------

    def run(self) -> None:
        """Load every table, then the derived rows (processes, devices, notes, trace_info).

        The kernel and runtime-API tables, the largest, stream in rowid ranges on worker threads (each range
        on its own SQLite and DuckDB connections, stored in rowid order: ``nsys_parts``) while this thread
        reads the others: SQLite decoding is single-threaded per connection.
        """
        self.strings = self._strings()
        parts = OrderedParts(self.info.uri, self.path, self.con, self.database)
        try:
            self._kernels(parts)
            read_api_calls(self, parts, PID, TID)
            for fraction, stage in ((0.4, self._memops), (0.6, self._ranges),
                                    (0.65, lambda: read_graph_nodes(self, PID, TID))):
                stage()
                progress.report(self.path, fraction)
        finally:
            parts.wait()
        progress.report(self.path, 0.9)
        api_call_notes(self)
        self._threads()
        self._processes()
        self._devices()
        local_ranks = self._process_ranks()
        self._notes()
        self._trace_info(sorted(set(local_ranks.values())) or [None])

    def _strings(self) -> pa.Table:
        reader = self._stream("SELECT id, value FROM StringIds", "StringIds")
        table = reader.read_all()
        if self.errors:
            raise InputError(self.errors[0])
        # An empty StringIds comes back from adbc with untyped (int64) columns: keep the typed empty table.
        return table if table.num_rows else self.strings

    def _in_ranges(self, parts: OrderedParts, table: str, select: str, insert: str,
                   sources: dict[str, pa.Table] | None = None) -> None:
        """``insert`` (reading ``_nsys_x``) over ``SELECT {select} FROM {table}``, one rowid range at a time."""
        for part in rowid_ranges(self.db, table):
            query = f"SELECT {select} FROM {table}{range_filter(part)}"

            def one(con: duckdb.DuckDBPyConnection, db: Sqlite,
                    query: str = query) -> None:
                self._insert(insert, {"_nsys_x": self._stream(query, table, db), **(sources or {})}, con=con)

            parts.submit(table, one)

    def _kernels(self, parts: OrderedParts) -> None:
        wanted = KERNEL_COLUMNS
        found = self._columns(KERNEL_TABLE, wanted, wanted[:8])
        if found is None:  # no kernel table: a capture without CUDA tracing (noted by _notes)
            return
        table, select = found
        have = set(self.info.tables[table])
        opt = {c: (f'k."{c}"' if c in have else "NULL") for c in wanted}
        self._in_ranges(parts, table, select,
            f"""INSERT INTO kernels (pid, device_id, stream_id, start_ns, end_ns, dur_ns, name,
                    short_name, correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, graph_id,
                    graph_node_id)
                SELECT {PID.format(g="k.globalPid")}, k.deviceId, k.streamId, k.start, k."end",
                    k."end" - k.start, dn.value, sn.value, k.correlationId, {opt["gridX"]}, {opt["gridY"]},
                    {opt["gridZ"]}, {opt["blockX"]}, {opt["blockY"]}, {opt["blockZ"]}, {opt["graphId"]},
                    {opt["graphNodeId"]}
                FROM _nsys_x k
                LEFT JOIN _nsys_strings dn ON dn.id = k.demangledName
                LEFT JOIN _nsys_strings sn ON sn.id = k.shortName""",
        )  # fmt: skip

    def _memops(self) -> None:
        common = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"]
        for base, extra, kind in (
            ("CUPTI_ACTIVITY_KIND_MEMCPY", ["copyKind", "graphNodeId"], "memcpy"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", ["graphNodeId"], "memset"),
        ):
            found = self._columns(base, common + extra, common)
            if found is None:  # absent when empty (facts P5)
                continue
            table, select = found
            have = set(self.info.tables[table])
            copy_kind = "list_extract($kinds, m.copyKind + 1)" if "copyKind" in have else "NULL::VARCHAR"
            node = "m.graphNodeId" if "graphNodeId" in have else "NULL"
            self._insert(
                f"""INSERT INTO memops (pid, device_id, stream_id, start_ns, end_ns, dur_ns, kind, copy_kind,
                        bytes, correlation_id, graph_node_id)
                    SELECT {PID.format(g="m.globalPid")}, m.deviceId, m.streamId, m.start, m."end",
                        m."end" - m.start, $kind, {copy_kind}, m.bytes, m.correlationId, {node}
                    FROM _nsys_m m""",
                {"_nsys_m": self._stream(f"SELECT {select} FROM {table}", table)},
                {"kind": kind} | ({"kinds": COPY_KINDS} if "copyKind" in have else {}),
            )

    def _ranges(self) -> None:
        cols = ["start", "end", "eventType", "globalTid", "endGlobalTid", "textId", "domainId"]
        found = self._columns("NVTX_EVENTS", cols, cols)
        if found is None:  # absent when the capture has no NVTX (facts P5)
            return
        table, select = found
        # `text` is coalesced to '' plus a NULL flag: adbc types an all-NULL first batch as int64.
        types = ", ".join(str(t) for t in (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE))
        sql = (
            f"SELECT {select}, coalesce(text, '') AS text, text IS NULL AS text_null "
            f"FROM {table} WHERE eventType IN ({types})"
        )
        if (events := _rows_or_none(self._stream(sql, table))) is None:
            return  # no NVTX rows (adbc would type the empty table's text column int64)
        # Domain name: the type-75 row of the same domainId in the same process (facts §2.6).
        self._insert(
            f"""INSERT INTO ranges (pid, tid, start_ns, end_ns, dur_ns, name, domain, source, style, end_tid, kind)
                WITH ev AS (
                    SELECT e.*, {PID.format(g="e.globalTid")} AS pid,
                        coalesce(CASE WHEN e.text_null THEN NULL ELSE e.text END, s.value) AS message
                    FROM _nsys_n e LEFT JOIN _nsys_strings s ON s.id = e.textId),
                domains AS (
                    SELECT pid, domainId, min(message) AS domain FROM ev
                    WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY pid, domainId)
                SELECT ev.pid, {TID.format(g="ev.globalTid")}, ev.start, ev."end", ev."end" - ev.start,
                    ev.message, d.domain, 'nvtx',
                    CASE WHEN ev.eventType IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END,
                    {TID.format(g="ev.endGlobalTid")}, 'range'
                FROM ev LEFT JOIN domains d
                    ON d.pid = ev.pid AND d.domainId = ev.domainId AND ev.domainId <> 0
                WHERE ev.eventType <> {NVTX_DOMAIN_CREATE}""",
            {"_nsys_n": events},
        )
        read_nvtx_shapes(self.con)  # PyTorch's op ranges with sizes (--pytorch=autograd-shapes-nvtx): cpu ops

    def _threads(self) -> None:
        """Threads of the processes with events: named ones from ThreadNames, plus unnamed callers."""
        found = self._columns("ThreadNames", ["nameId", "globalTid"], ["nameId", "globalTid"])
        named = "SELECT NULL::BIGINT AS pid, NULL::BIGINT AS tid, NULL::VARCHAR AS name WHERE false"
        sources = {}
        if found is not None:
            table, select = found
            sources["_nsys_t"] = self._stream(f"SELECT {select} FROM {table}", table)
            named = f"""SELECT {PID.format(g="t.globalTid")} AS pid, {TID.format(g="t.globalTid")} AS tid,
                    min(s.value) AS name
                FROM _nsys_t t LEFT JOIN _nsys_strings s ON s.id = t.nameId GROUP BY ALL"""
        self._insert(
            f"""INSERT INTO threads (pid, tid, name)
                WITH named AS ({named}),
                seen AS (SELECT pid, tid FROM api_calls UNION SELECT pid, tid FROM ranges),
                pids AS ({_EVENT_PIDS})
                SELECT pid, tid, named.name FROM named FULL JOIN seen USING (pid, tid)
                WHERE pid IN (SELECT pid FROM pids)""",
            sources,
        )

    def _processes(self) -> None:
        """Processes with events, named from PROCESSES, else from their main thread (tid == pid)."""
        names = pa.table(
            {"pid": list(self.info.process_names), "name": list(self.info.process_names.values())},
            schema=pa.schema([("pid", pa.int64()), ("name", pa.string())]),
        )
        self._insert(
            f"""INSERT INTO processes (pid, name)
                SELECT p.pid, coalesce(n.name, t.name) FROM ({_EVENT_PIDS}) p
                LEFT JOIN _nsys_p n ON n.pid = p.pid
                LEFT JOIN threads t ON t.pid = p.pid AND t.tid = p.pid
                ORDER BY p.pid""",
            {"_nsys_p": names},
        )

    def _devices(self) -> None:
        """CUDA devices: those used by events or with CUDA properties (not e.g. Windows' Intel iGPU)."""
        if self.info.gpus is None:
            self.missing.append("TARGET_INFO_GPU")
            return
        used = {r[0] for r in self.con.execute(
            "SELECT DISTINCT device_id FROM kernels UNION SELECT DISTINCT device_id FROM memops"
        ).fetchall()}  # fmt: skip
        rows = [
            (g.device_id, g.name, g.sm_count, g.memory_bytes, g.mem_bw_bytes_per_s, g.compute_major,
             g.compute_minor, "NVIDIA")
            for g in self.info.gpus
            if g.has_cuda_properties or g.device_id in used
        ]  # fmt: skip
        if rows:
            self.con.executemany(
                "INSERT INTO devices (device_id, name, sm_count, memory_bytes, mem_bw_bytes_per_s, "
                "compute_major, compute_minor, vendor) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def _process_ranks(self) -> dict[int, int]:
        """One rank per GPU process (``nsys_ranks``); notes how they were numbered."""
        ranks, self.rank_source, note = assign_process_ranks(self.con, self.info.recorded_rank)
        if note:
            self.notes.append(note)
        return ranks

    def _notes(self) -> None:
        """read_notes: kernels without their launch call, absent tables, replaced bytes."""
        row = self.con.execute(
            """SELECT (SELECT count(*) FROM kernels) - count(*) FROM kernels k SEMI JOIN api_calls a
               ON a.pid = k.pid AND a.correlation_id = k.correlation_id AND NOT a.is_duplicate"""
        ).fetchall()[0]
        if row[0]:
            self.notes.append((
                "unmatched_launch", row[0],
                "kernels whose launch call is not in the file (e.g. launched before a time-sliced window)",
            ))  # fmt: skip
        if self.missing:
            self.notes.append(("missing_table", len(self.missing), ", ".join(self.missing)))
        if self.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0] == 0:
            self.notes.append((NO_GPU_ACTIVITY, 1, "Nsight Systems export has no CUDA kernels; capture with "
                               "`nsys profile -t cuda`"))
        if self.replaced:
            self.notes.append((
                "invalid_utf8", self.replaced, "strings with invalid UTF-8, decoded with replacement",
            ))  # fmt: skip
        if self.notes:
            self.con.executemany("INSERT INTO read_notes (kind, count, detail) VALUES (?, ?, ?)", self.notes)

    def _trace_info(self, ranks: list[int | None]) -> None:
        """trace_info (span of GPU and API activity) and trace_meta (the export's key/values), one row set per
        rank of the file (``ranks``: [None] for a file that names no rank)."""
        meta = list(self.info.meta)
        if self.rank_source:
            meta.append(("rank_source", self.rank_source))
        for rank in ranks:
            own = "rank IS NOT DISTINCT FROM $rank" if rank is not None else "TRUE"
            self._run(
                f"""INSERT INTO trace_info (rank, source_path, source_format, format_version, product_version,
                       capture_command, start_ns, end_ns)
                   SELECT $rank, $path, 'nsys', $version, $product, $command, min(s), max(e) FROM (
                       SELECT min(start_ns) AS s, max(end_ns) AS e FROM kernels WHERE {own}
                       UNION ALL SELECT min(start_ns), max(end_ns) FROM memops WHERE {own}
                       UNION ALL SELECT min(start_ns), max(end_ns) FROM api_calls WHERE {own})""",
                {
                    "rank": rank, "path": str(self.path), "version": self.info.format_version,
                    "product": self.info.product_version, "command": self.info.capture_command,
                },
            )  # fmt: skip
            write_capture(self.con, rank, **capture_facts(self.info.meta), rank_source=self.rank_source)
            if meta:
                table = pa.table({"rank": pa.array([rank] * len(meta), pa.int32()), "key": [k for k, _ in meta],
                                  "value": [v for _, v in meta]})
                self._insert("INSERT INTO trace_meta (rank, key, value) SELECT rank, key, value FROM _nsys_meta",
                             {"_nsys_meta": table})



# The pids of every process with events in the store.
_EVENT_PIDS = """SELECT pid FROM kernels UNION SELECT pid FROM memops UNION SELECT pid FROM api_calls
    UNION SELECT pid FROM ranges"""


def _rows_or_none(source: pa.RecordBatchReader | pa.Table) -> pa.RecordBatchReader | pa.Table | None:
    """The source, or None when it holds no row: a stream is read up to its first non-empty batch and
    handed on whole (that batch put back in front)."""
    if isinstance(source, pa.Table):
        return source if source.num_rows else None
    for batch in source:
        if batch.num_rows:
            return pa.RecordBatchReader.from_batches(source.schema, itertools.chain([batch], source))
    return None

