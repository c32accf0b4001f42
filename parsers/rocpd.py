"""Reader of rocpd SQLite databases, rocprofv3's default output (rocprofiler-sdk schema 3.x), into the store.

rocprofv3 writes one database per process (``<host>/<pid>_results.db``): every table ``rocpd_<name>_<uuid>``
behind an unsuffixed view ``rocpd_<name>`` (DDL: ``shared/traces/rocprof/rocpd-schema``). A database that
lacks the views, or that holds the tables of several sessions (several uuids), is read table set by table
set. What is read:

- ``rocpd_kernel_dispatch`` with its ``rocpd_info_kernel_symbol`` (name), agent (device) and event: kernels.
  HSA's grid is in work-items; the store's, like CUDA's, in workgroups (blocks), so ``grid = ceil(grid_size /
  workgroup_size)``. Schema 3.0.2+ ``graph_exec_id``/``graph_node_id`` become ``graph_id``/``graph_node_id``.
- ``rocpd_region`` by its event's category: ``HIP_*`` API calls into ``api_calls`` (api 'runtime'), roctx
  ranges (``MARKER_CORE_RANGE_API``, the message in the event's ``extdata``) and ``RCCL_API`` calls into
  ``ranges`` of kind 'range'; other categories (HSA, KFD, rocDecode, the roctx API calls themselves) are
  counted in ``read_notes``.
- The join of a kernel (or copy) to its launch: the event's ``stack_id``, the internal correlation id the
  dispatch shares with the HIP call that enqueued it (``rocpd_event.correlation_id`` is the external one).
- ``rocpd_memory_copy`` into ``memops`` (copy kind from the operation name and the two agents).
- GPU agents into ``devices``: device id = the agent's ``type_index``, name = product name, CU count and
  memory (its memory banks) from the agent's ``extdata``, compute major/minor from ``gfx_target_version``,
  vendor from ``vendor_name`` (lower case; 'amd').
- The process's recorded environment (``RANK``, ``WORLD_SIZE`` and the MPI/Slurm equivalents) gives the rank
  and world size, ``rocpd_info_node`` the host. rocprofiler timestamps are not Unix-epoch: no wall-clock base.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import adbc_driver_manager
import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import InputError
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture

from .nsys_stream import Sqlite, one_line
from .rocpd_arrow import chunks, kernel_columns, read_symbols, region_columns, replaced

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
COPY_KINDS = {"MEMORY_COPY_HOST_TO_DEVICE": "HtoD", "MEMORY_COPY_DEVICE_TO_HOST": "DtoH",
              "MEMORY_COPY_DEVICE_TO_DEVICE": "DtoD", "MEMORY_COPY_HOST_TO_HOST": "HtoH"}
_TABLES = ("kernel_dispatch", "info_kernel_symbol", "info_agent", "event", "region", "string", "memory_copy",
           "info_process", "info_thread", "info_node", "metadata")


def read_rocpd(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one rocpd database into the store tables of ``con``: one rank (the recorded one, else NULL)."""
    path = Path(path)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    try:
        small = sqlite3.connect(uri, uri=True)
        small.text_factory = lambda b: b.decode("utf-8", "replace")
        sets = _table_sets(path, small)
        db = Sqlite(uri)
    except (sqlite3.Error, adbc_driver_manager.Error) as exc:
        raise InputError(f"{path}: cannot open as SQLite ({one_line(exc)})") from None
    try:
        _Loader(path, uri, small, db, con, sets).run()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: cannot read the rocpd database ({one_line(exc)})") from None
    finally:
        db.close()
        small.close()


def _table_sets(path: Path, small: sqlite3.Connection) -> list[dict[str, str]]:
    """Per session in the file, the name of each rocpd table: the views when the file has one session's,
    else each uuid's suffixed tables."""
    names = {r[0] for r in small.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    uuids = sorted({m.group(1) for n in names if (m := re.fullmatch(r"rocpd_metadata(_[0-9A-Za-z_]+)", n))})
    if "rocpd_kernel_dispatch" in names and len(uuids) <= 1:
        uuids = [""]
    sets = [{t: f"rocpd_{t}{u}" for t in _TABLES} for u in uuids]
    for s in sets:
        if lacking := [t for t in ("kernel_dispatch", "info_kernel_symbol", "event", "string", "info_agent",
                                   "info_process", "info_thread") if s[t] not in names]:
            raise InputError(f"{path}: rocpd database lacks table(s) {', '.join('rocpd_' + t for t in lacking)}; "
                             "give the database rocprofv3 wrote, whole")
        s["_columns"] = ",".join(r[1] for r in small.execute(f'PRAGMA table_info("{s["kernel_dispatch"]}")'))
        s["_has"] = ",".join(t for t in _TABLES if s[t] in names)
    return sets


class _Loader:
    def __init__(self, path: Path, uri: str, small: sqlite3.Connection, db: Sqlite, con: duckdb.DuckDBPyConnection,
                 sets: list[dict[str, str]]) -> None:
        self.path, self.uri, self.small, self.db, self.con, self.sets = path, uri, small, db, con, sets
        self.notes: list[tuple[str, int, str]] = []
        self.replaced = 0  # strings with invalid UTF-8, decoded with replacement (once per row that shows one)
        self.lock = threading.Lock()
        self.shorts: dict[str, str | None] = {}  # kernel name -> short name
        self.database = con.execute("SELECT current_database()").fetchall()[0][0]  # where the store tables are

    def run(self) -> None:
        self.rank, self.world_size, command = self._process()
        # DuckDB gets one thread fewer while the reader runs, the core its SQLite worker uses: on 2 busy cores
        # DuckDB's parallel inserts from Arrow cost ~1.7x the CPU of one thread's (docs/benchmarks.md, issue 22).
        threads = self.con.execute("SELECT current_setting('threads')").fetchall()[0][0]
        self.con.execute(f"SET threads = {max(1, threads - 1)}").fetchall()
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocpd") as pool:
                for s in self.sets:
                    self._session(s, pool)
                    self._devices(s)
            self._threads()
            self._finish(command)
        finally:
            self.con.execute(f"SET threads = {threads}").fetchall()

    # --- per-file facts ---------------------------------------------------------------------------

    def _process(self) -> tuple[int | None, int | None, str | None]:
        """The recorded rank and world size (process environment) and the command of the file's process."""
        rank = world = command = None
        self.processes: list[tuple[int, str]] = []
        for s in self.sets:
            if "info_process" not in s["_has"].split(","):
                continue
            for pid, cmd, env in self.small.execute(f'SELECT pid, command, environment FROM "{s["info_process"]}"'):
                try:
                    variables = json.loads(env) if env else {}
                except (json.JSONDecodeError, TypeError):
                    variables = {}
                if not isinstance(variables, dict):
                    variables = {}
                rank = rank if rank is not None else _first_int(variables, RANK_VARIABLES)
                world = world if world is not None else _first_int(variables, WORLD_VARIABLES)
                command = command or cmd
                self.processes.append((pid, Path(str(cmd or "").split(" ")[0]).name or None))
        return rank, world, command

    def _host(self) -> str | None:
        for s in self.sets:
            if "info_node" in s["_has"].split(","):
                row = self.small.execute(f'SELECT hostname FROM "{s["info_node"]}" LIMIT 1').fetchone()
                if row and row[0]:
                    return str(row[0])
        return None

    def _schema_version(self) -> str | None:
        for s in self.sets:
            if "metadata" in s["_has"].split(","):
                row = self.small.execute(f"SELECT value FROM \"{s['metadata']}\" WHERE tag = 'schema_version'"
                                         ).fetchone()
                if row:
                    return str(row[0])
        return None

    # --- tables -----------------------------------------------------------------------------------

    def _session(self, s: dict[str, str], pool: ThreadPoolExecutor) -> None:
        """One session's kernels, regions and copies, stored in the order SQLite reads them.

        SQLite joins each record to its event (a rowid lookup, about free there); other ids are looked up in
        Arrow in the info tables (kernel symbols: those named), so no text is decoded per record and DuckDB
        runs no join. The dispatches are read and stored on a worker thread, on their own SQLite connection
        (SQLite decodes on one thread per connection) and DuckDB cursor, while this thread does the rest.
        Records go through in chunks (``rocpd_arrow.CHUNK_BATCHES``). A read error names the table of the query
        that read the rows when every join ran in SQLite.
        """
        has, q = s["_has"].split(","), {name: f'"{table}"' for name, table in s.items() if not name.startswith("_")}
        agents = self._fetch(f"SELECT id, type_index FROM {q['info_agent']}", s["kernel_dispatch"])
        processes = self._fetch(f"SELECT id, pid FROM {q['info_process']}", s["kernel_dispatch"])
        graph = (", k.graph_exec_id AS graph_id, k.graph_node_id" if "graph_exec_id" in s["_columns"].split(",")
                 else "")
        kernels = pool.submit(self._kernels, f"""SELECT k.pid, k.agent_id, k.kernel_id, k.stream_id, k.start,
                k."end", k.grid_size_x, k.grid_size_y, k.grid_size_z, k.workgroup_size_x, k.workgroup_size_y,
                k.workgroup_size_z, e.stack_id AS correlation_id{graph}
            FROM {q['kernel_dispatch']} k LEFT JOIN {q['event']} e ON e.id = k.event_id""", s["kernel_dispatch"],
                              q["info_kernel_symbol"], agents, processes)
        try:
            if "region" in has:
                markers = ",".join(str(i) for (i,) in self.small.execute(
                    f"SELECT id FROM {q['string']} WHERE string LIKE 'MARKER%'"))
                message = (f"coalesce(CASE WHEN e.category_id IN ({markers}) THEN CAST(json_extract(e.extdata, "
                           "'$.message') AS TEXT) END, '')" if markers else "NULL")
                self._regions(f"""SELECT r.pid, r.tid, r.start, r."end", r.name_id, e.category_id,
                        e.stack_id AS correlation_id, {message} AS message
                    FROM {q['region']} r LEFT JOIN {q['event']} e ON e.id = r.event_id""", s["region"],
                              self._fetch(f"SELECT id, coalesce(string, '') AS string FROM {q['string']}", s["region"]),
                              processes, self._fetch(f"SELECT id, tid FROM {q['info_thread']}", s["region"]))
            if "memory_copy" in has:
                self._copies(s, q)
        except BaseException:
            kernels.result()  # the dispatches' read error first, as when they were read first
            raise
        kernels.result()

    def _fetch(self, sql: str, table: str) -> pa.Table:
        """A small table, whole."""
        return list(chunks(self.db, sql, f"{self.path}: cannot read {table}", None))[0]

    def _replaced(self, count: int) -> None:
        with self.lock:  # counted on both threads
            self.replaced += count

    def _insert(self, sql: str, table: pa.Table, con: duckdb.DuckDBPyConnection | None = None) -> list[tuple]:
        """Run ``sql`` on the store (or ``con``) with ``table`` registered as ``_rocpd``; its rows."""
        con = con or self.con
        con.register("_rocpd", table)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.unregister("_rocpd")

    def _kernels(self, sql: str, table: str, symbol: str, agents: pa.Table, processes: pa.Table) -> None:
        """Kernels, on the worker thread; names read for the symbols the dispatches name, as they come."""
        con, db, where, symbols = self.con.cursor(), Sqlite(self.uri), f"{self.path}: cannot read {table}", {}
        try:
            con.execute(f'USE "{self.database}"').fetchall()  # a cursor starts in the default database
            for kernels in chunks(db, sql, where):
                read_symbols(db, symbol, kernels["kernel_id"], where, symbols)
                kernels, bad = kernel_columns(kernels, symbols, agents, processes, self.shorts)
                self._replaced(bad)
                graph = ("nullif(graph_id, 0), CASE WHEN graph_id > 0 THEN graph_node_id END"
                         if "graph_id" in kernels.column_names else "NULL, NULL")
                self._insert(f"""INSERT INTO kernels (rank, pid, device_id, stream_id, start_ns, end_ns, dur_ns, name,
                        short_name, correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, graph_id,
                        graph_node_id)
                    SELECT {_sql_int(self.rank)}, pid, device_id, stream_id, start, "end", "end" - start,
                        nullif(name::VARCHAR, ''), short, correlation_id,
                        CAST(ceil(grid_size_x / greatest(workgroup_size_x, 1)) AS INTEGER),
                        CAST(ceil(grid_size_y / greatest(workgroup_size_y, 1)) AS INTEGER),
                        CAST(ceil(grid_size_z / greatest(workgroup_size_z, 1)) AS INTEGER),
                        workgroup_size_x, workgroup_size_y, workgroup_size_z, {graph}
                    FROM _rocpd""", kernels, con)
        finally:
            con.close()
            db.close()

    def _regions(self, sql: str, table: str, strings: pa.Table, processes: pa.Table, tids: pa.Table) -> None:
        view = """(SELECT pid, tid, start, "end", nullif(name::VARCHAR, '') AS name, nullif(category::VARCHAR, '')
            AS category, correlation_id, nullif(message::VARCHAR, '') AS message FROM _rocpd)"""
        rank, api = _sql_int(self.rank), "category LIKE 'HIP\\_%' ESCAPE '\\'"
        hip = [i for i, text in zip(strings["id"].to_pylist(), strings["string"].to_pylist(), strict=True)
               if isinstance(text, str) and text.startswith("HIP_")]
        skipped: dict[str, int] = {}
        for regions in chunks(self.db, sql, f"{self.path}: cannot read {table}"):
            regions, bad = region_columns(regions, strings, processes, tids)
            self._replaced(bad)
            self._insert(f"""INSERT INTO api_calls (rank, pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api,
                    correlation_id, is_duplicate)
                SELECT {rank}, pid, tid, start, "end", "end" - start, name, name, 'runtime', correlation_id, false
                FROM {view} WHERE {api}""", regions)
            # Ranges and skipped categories are among the rest, mostly few: only those go through DuckDB again.
            rest = regions.filter(pc.invert(pc.is_in(regions["category_id"],
                                                     pa.array(hip, regions["category_id"].type))))
            if not len(rest):
                continue
            self._insert(f"""INSERT INTO ranges (rank, pid, tid, start_ns, end_ns, dur_ns, name, domain, source,
                    style, end_tid, kind)
                SELECT {rank}, pid, tid, start, "end", "end" - start,
                    CASE WHEN category = 'RCCL_API' THEN name ELSE message END,
                    CASE WHEN category = 'RCCL_API' THEN 'RCCL' END,
                    CASE WHEN category = 'RCCL_API' THEN 'rccl_api' ELSE 'roctx' END,
                    CASE WHEN name = 'roctxProcessRangeA' THEN 'StartEnd' ELSE 'PushPop' END, tid, 'range'
                FROM {view}
                WHERE category = 'RCCL_API' OR (category = 'MARKER_CORE_RANGE_API' AND message IS NOT NULL)""", rest)
            for category, count in self._insert(f"""SELECT coalesce(category, '(none)'), count(*) FROM {view}
                    WHERE NOT ({api} OR category = 'RCCL_API'
                               OR (category = 'MARKER_CORE_RANGE_API' AND message IS NOT NULL))
                    GROUP BY ALL""", rest):
                skipped[category] = skipped.get(category, 0) + count
        self.notes += [("skipped_regions", count, f"{category} regions (not HIP API calls or roctx ranges)")
                       for category, count in sorted(skipped.items())]

    def _copies(self, s: dict[str, str], q: dict[str, str]) -> None:
        cases = " ".join(f"WHEN '{op}' THEN '{kind}'" for op, kind in COPY_KINDS.items())
        for m in chunks(self.db, f"""SELECT coalesce(p.pid, m.pid) AS pid, m.stream_id, m.start, m."end",
                    coalesce(n.string, '') AS operation, m.size, e.stack_id AS correlation_id,
                    coalesce(src.type, '') AS src_type, src.type_index AS src_index,
                    coalesce(dst.type, '') AS dst_type, dst.type_index AS dst_index
                FROM {q['memory_copy']} m
                LEFT JOIN {q['string']} n ON n.id = m.name_id
                LEFT JOIN {q['event']} e ON e.id = m.event_id
                LEFT JOIN {q['info_agent']} src ON src.id = m.src_agent_id
                LEFT JOIN {q['info_agent']} dst ON dst.id = m.dst_agent_id
                LEFT JOIN {q['info_process']} p ON p.id = m.pid""", f"{self.path}: cannot read {s['memory_copy']}"):
            self._replaced(replaced(m))
            if len(m):
                self._insert(f"""INSERT INTO memops (rank, pid, device_id, stream_id, start_ns, end_ns, dur_ns, kind,
                        copy_kind, bytes, correlation_id)
                    SELECT {_sql_int(self.rank)}, pid, CASE WHEN dst_type = 'GPU' THEN dst_index ELSE src_index END,
                        stream_id, start, "end", "end" - start, 'memcpy',
                        CASE WHEN operation = 'MEMORY_COPY_DEVICE_TO_DEVICE' AND src_index <> dst_index THEN 'PtoP'
                            ELSE CASE operation {cases} END END,
                        size, correlation_id
                    FROM _rocpd""", m)

    def _devices(self, s: dict[str, str]) -> None:
        rows = []
        for index, product, vendor, extdata in self.small.execute(
                f"SELECT type_index, product_name, vendor_name, extdata FROM \"{s['info_agent']}\" WHERE type = 'GPU'"
                " ORDER BY type_index"):
            try:
                ext = json.loads(extdata) if extdata else {}
            except (json.JSONDecodeError, TypeError):
                ext = {}
            ext = ext if isinstance(ext, dict) else {}
            banks = ext.get("mem_banks") if isinstance(ext.get("mem_banks"), list) else []
            memory = sum(b.get("size_in_bytes", 0) for b in banks if isinstance(b, dict)) or ext.get("local_mem_size")
            target = ext.get("gfx_target_version")
            major, minor = (target // 10000, target // 100 % 100) if isinstance(target, int) and target else (None,
                                                                                                              None)
            cus = ext.get("cu_count")
            rows.append((self.rank, index, (product or "").strip() or None, cus if isinstance(cus, int) else None,
                         memory if isinstance(memory, int) and memory else None, None, major, minor,
                         (vendor or "amd").strip().lower() or "amd"))
        if rows:
            self.con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def _threads(self) -> None:
        rows = []
        for s in self.sets:
            if "info_thread" in s["_has"].split(","):
                rows += [(self.rank, pid, tid, name) for pid, tid, name in
                         self.small.execute(f'SELECT pid, tid, name FROM "{s["info_thread"]}"')]
        if rows:
            self.con.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", rows)
        if self.processes:
            self.con.executemany("INSERT INTO processes VALUES (?, ?, ?)",
                                 [(self.rank, pid, name) for pid, name in self.processes])

    def _finish(self, command: str | None) -> None:
        own = "TRUE"
        counts = self.con.execute(
            """SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM kernels k WHERE NOT EXISTS (
                   SELECT 1 FROM api_calls a WHERE a.pid = k.pid AND a.correlation_id = k.correlation_id))"""
        ).fetchall()[0]
        if counts[0] == 0:
            self.notes.append((NO_GPU_ACTIVITY, 1, "rocpd database has no kernel dispatches; capture with "
                               "`rocprofv3 --kernel-trace` (or --runtime-trace)"))
        elif counts[1]:
            self.notes.append(("unmatched_launch", counts[1], "kernels whose HIP launch call is not in the database "
                               "(captured without --hip-trace, or launched before the capture)"))
        if self.replaced:
            self.notes.append(("invalid_utf8", self.replaced, "strings with invalid UTF-8, decoded with replacement"))
        if self.notes:
            self.con.executemany("INSERT INTO read_notes VALUES (?, ?, ?, ?)",
                                 [(self.rank, *n) for n in self.notes])
        per_table = " UNION ALL ".join(f"SELECT min(start_ns) AS s, max(end_ns) AS e FROM {t} WHERE {own}"
                                       for t in ("kernels", "memops", "api_calls"))
        start, end = self.con.execute(f"SELECT min(s), max(e) FROM ({per_table})").fetchall()[0]
        self.con.execute("INSERT INTO trace_info VALUES (?, ?, 'rocpd', ?, NULL, ?, ?, ?)",
                         [self.rank, str(self.path), self._schema_version(), command, start, end])
        host = self._host()
        meta = [("hostname", host), ("schema_version", self._schema_version())]
        self.con.executemany("INSERT INTO trace_meta VALUES (?, ?, ?)",
                             [(self.rank, k, v) for k, v in meta if v is not None])
        write_capture(self.con, self.rank, world_size=self.world_size, host=host,
                      rank_source="recorded" if self.rank is not None else None)


def _first_int(variables: dict, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = str(variables.get(key, "")).strip()
        if value.isdigit():
            return int(value)
    return None


def _sql_int(value: int | None) -> str:
    return "NULL::INTEGER" if value is None else str(int(value))
