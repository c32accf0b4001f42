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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import adbc_driver_manager
import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import InputError
from tracekit.parsers.kernel_names import function_name
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture

from .nsys_stream import Sqlite, _valid, one_line, query

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

    def run(self) -> None:
        self.rank, self.world_size, command = self._process()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocpd") as pool:
            for s in self.sets:
                tables = self._read(s, pool)
                for name, table in tables.items():
                    self.con.register(f"_rocpd_{name}", table)
                try:
                    self._kernels(s, tables)
                    if "r" in tables:
                        self._regions(tables)
                    if "m" in tables:
                        self._copies()
                    self._count_replaced(tables)
                finally:
                    for name in tables:
                        self.con.unregister(f"_rocpd_{name}")
                self._devices(s)
        self._threads()
        self._finish(command)

    def _sql(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

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

    def _read(self, s: dict[str, str], pool: ThreadPoolExecutor) -> dict[str, pa.Table]:
        """The columns used of each table of one session, no join: the dispatches on a worker thread (its own
        connection: SQLite decodes on one thread per connection), the others on this one meanwhile. A read
        error names the table whose rows were being read when the joins ran in SQLite."""
        has, t = s["_has"].split(","), {name: f'"{table}"' for name, table in s.items() if not name.startswith("_")}
        k, r, m = s["kernel_dispatch"], s["region"], s["memory_copy"]
        graph = ", graph_exec_id, graph_node_id" if "graph_exec_id" in s["_columns"].split(",") else ""
        kernels = pool.submit(self._fetch_apart, f"""SELECT pid, agent_id, kernel_id, stream_id, start, "end",
            grid_size_x, grid_size_y, grid_size_z, workgroup_size_x, workgroup_size_y, workgroup_size_z,
            event_id{graph} FROM {t["kernel_dispatch"]}""", k)
        # Text columns come as '' for NULL: adbc types an all-NULL first batch as int64 (as parsers.nsys).
        queries = {"sym": (f"SELECT id, coalesce(display_name, kernel_name, '') AS name FROM {t['info_kernel_symbol']}",
                           k),
                   "agent": (f"SELECT id, type_index, coalesce(type, '') AS type FROM {t['info_agent']}", k),
                   "e": (f"SELECT id, category_id, stack_id FROM {t['event']}", k),
                   "p": (f"SELECT id, pid FROM {t['info_process']}", k)}
        strings = (f"SELECT id, coalesce(string, '') AS string FROM {t['string']}", r if "region" in has else m)
        if "region" in has:
            queries |= {"r": (f'SELECT pid, tid, start, "end", name_id, event_id FROM {t["region"]}', r),
                        "str": strings, "t": (f"SELECT id, tid FROM {t['info_thread']}", r)}
            markers = [i for (i,) in self.small.execute(f"SELECT id FROM {t['string']} WHERE string LIKE 'MARKER%'")]
        if "memory_copy" in has:
            queries |= {"m": (f"""SELECT pid, stream_id, start, "end", name_id, size, event_id, src_agent_id,
                dst_agent_id FROM {t['memory_copy']}""", m), "str": strings}
        try:
            tables = {name: self._fetch(self.db, sql, table) for name, (sql, table) in queries.items()}
            if "region" in has and markers:
                # A roctx range's message is in its event's extdata: parsed (by SQLite) for the marker events
                # of regions only, as when the joins ran there.
                events = tables["e"].filter(pc.is_in(tables["e"]["category_id"], pa.array(markers, pa.int64())))
                ids = events["id"].filter(pc.is_in(events["id"], tables["r"]["event_id"].combine_chunks()))
                if len(ids):
                    tables["msg"] = self._fetch(self.db, f"""SELECT id, CAST(json_extract(extdata, '$.message') AS TEXT)
                        AS message FROM {t['event']} WHERE id IN ({', '.join(map(str, ids.to_pylist()))})""", r)
        finally:
            kernels = kernels.result()  # the worker's error first, as the kernels were read first
        return {"k": kernels, **tables}

    def _fetch_apart(self, sql: str, table: str) -> pa.Table:
        db = Sqlite(self.uri)
        try:
            return self._fetch(db, sql, table)
        finally:
            db.close()

    def _fetch(self, db: Sqlite, sql: str, table: str) -> pa.Table:
        """The result of ``sql`` as an Arrow table; a string column with invalid UTF-8 decoded with replacement
        and flagged row by row in a column ``<name>_bad`` (counted per row that shows it: _count_replaced)."""
        try:
            reader, stmt = query(db, sql)
            try:
                result = reader.read_all()
            finally:
                reader.close()
                stmt.close()
        except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
            raise InputError(f"{self.path}: cannot read {table} ({one_line(exc)})") from None
        for i, name in enumerate(result.column_names):
            column = result.column(i)
            if not pa.types.is_string(column.type):
                continue
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                values = column.cast(pa.binary()).to_pylist()
                result = result.set_column(i, name, pa.array(
                    [None if v is None else v.decode("utf-8", "replace") for v in values], pa.string()))
                result = result.append_column(f"{name}_bad", pa.array(
                    [v is not None and not _valid(v) for v in values], pa.bool_()))
        return result

    def _kernels(self, s: dict[str, str], tables: dict[str, pa.Table]) -> None:
        """Kernels, short_name from the function name of each distinct name used (``kernel_names``)."""
        used = self.con.sql("""SELECT id, nullif(name::VARCHAR, '') AS name FROM _rocpd_sym
            WHERE id IN (SELECT kernel_id FROM _rocpd_k)""").to_arrow_table()
        shorts: dict[str, str] = {}
        names = used.column("name").to_pylist()
        short = [None if n is None else shorts.setdefault(n, function_name(n)) if n not in shorts else shorts[n]
                 for n in names]
        self.con.register("_rocpd_short", used.append_column("short", pa.array(short, pa.string())))
        graph = ("nullif(k.graph_exec_id, 0), CASE WHEN k.graph_exec_id > 0 THEN k.graph_node_id END"
                 if "graph_exec_id" in tables["k"].column_names else "NULL, NULL")
        try:
            self._sql(f"""INSERT INTO kernels (rank, pid, device_id, stream_id, start_ns, end_ns, dur_ns, name,
                    short_name, correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, graph_id,
                    graph_node_id)
                SELECT {_sql_int(self.rank)}, coalesce(p.pid, k.pid), a.type_index, k.stream_id, k.start, k."end",
                    k."end" - k.start, u.name, u.short, e.stack_id,
                    CAST(ceil(k.grid_size_x / greatest(k.workgroup_size_x, 1)) AS INTEGER),
                    CAST(ceil(k.grid_size_y / greatest(k.workgroup_size_y, 1)) AS INTEGER),
                    CAST(ceil(k.grid_size_z / greatest(k.workgroup_size_z, 1)) AS INTEGER),
                    k.workgroup_size_x, k.workgroup_size_y, k.workgroup_size_z, {graph}
                FROM _rocpd_k k
                LEFT JOIN _rocpd_short u ON u.id = k.kernel_id
                LEFT JOIN _rocpd_agent a ON a.id = k.agent_id
                LEFT JOIN _rocpd_e e ON e.id = k.event_id
                LEFT JOIN _rocpd_p p ON p.id = k.pid""")
        finally:
            self.con.unregister("_rocpd_short")

    def _regions(self, tables: dict[str, pa.Table]) -> None:
        has_message = "msg" in tables
        rank = _sql_int(self.rank)
        self._sql(f"""CREATE OR REPLACE TEMP TABLE _rocpd_regions AS
            SELECT coalesce(p.pid, r.pid) AS pid, coalesce(t.tid, r.tid) AS tid, r.start, r."end",
                nullif(n.string::VARCHAR, '') AS name, nullif(c.string::VARCHAR, '') AS category,
                e.stack_id AS correlation_id,
                {"nullif(m.message::VARCHAR, '')" if has_message else "NULL::VARCHAR"} AS message
            FROM _rocpd_r r
            LEFT JOIN _rocpd_str n ON n.id = r.name_id
            LEFT JOIN _rocpd_e e ON e.id = r.event_id
            LEFT JOIN _rocpd_str c ON c.id = e.category_id
            {"LEFT JOIN _rocpd_msg m ON m.id = r.event_id" if has_message else ""}
            LEFT JOIN _rocpd_p p ON p.id = r.pid
            LEFT JOIN _rocpd_t t ON t.id = r.tid""")
        self._sql(f"""INSERT INTO api_calls (rank, pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api,
                correlation_id, is_duplicate)
            SELECT {rank}, pid, tid, start, "end", "end" - start, name, name, 'runtime', correlation_id, false
            FROM _rocpd_regions WHERE category LIKE 'HIP\\_%' ESCAPE '\\'""")
        self._sql(f"""INSERT INTO ranges (rank, pid, tid, start_ns, end_ns, dur_ns, name, domain, source,
                style, end_tid, kind)
            SELECT {rank}, pid, tid, start, "end", "end" - start,
                CASE WHEN category = 'RCCL_API' THEN name ELSE message END,
                CASE WHEN category = 'RCCL_API' THEN 'RCCL' END,
                CASE WHEN category = 'RCCL_API' THEN 'rccl_api' ELSE 'roctx' END,
                CASE WHEN name = 'roctxProcessRangeA' THEN 'StartEnd' ELSE 'PushPop' END, tid, 'range'
            FROM _rocpd_regions
            WHERE category = 'RCCL_API' OR (category = 'MARKER_CORE_RANGE_API' AND message IS NOT NULL)""")
        for category, count in self.con.execute("""SELECT coalesce(category, '(none)'), count(*) FROM _rocpd_regions
                WHERE NOT (category LIKE 'HIP\\_%' ESCAPE '\\' OR category = 'RCCL_API'
                           OR (category = 'MARKER_CORE_RANGE_API' AND message IS NOT NULL))
                GROUP BY ALL ORDER BY 1""").fetchall():
            self.notes.append(("skipped_regions", count, f"{category} regions (not HIP API calls or roctx ranges)"))
        self._sql("DROP TABLE _rocpd_regions")

    def _copies(self) -> None:
        cases = " ".join(f"WHEN '{op}' THEN '{kind}'" for op, kind in COPY_KINDS.items())
        self._sql(f"""INSERT INTO memops (rank, pid, device_id, stream_id, start_ns, end_ns, dur_ns, kind,
                copy_kind, bytes, correlation_id)
            SELECT {_sql_int(self.rank)}, coalesce(p.pid, m.pid),
                CASE WHEN dst.type::VARCHAR = 'GPU' THEN dst.type_index ELSE src.type_index END,
                m.stream_id, m.start, m."end", m."end" - m.start, 'memcpy',
                CASE WHEN n.string::VARCHAR = 'MEMORY_COPY_DEVICE_TO_DEVICE' AND src.type_index <> dst.type_index
                    THEN 'PtoP' ELSE CASE n.string::VARCHAR {cases} END END,
                m.size, e.stack_id
            FROM _rocpd_m m
            LEFT JOIN _rocpd_str n ON n.id = m.name_id
            LEFT JOIN _rocpd_e e ON e.id = m.event_id
            LEFT JOIN _rocpd_agent src ON src.id = m.src_agent_id
            LEFT JOIN _rocpd_agent dst ON dst.id = m.dst_agent_id
            LEFT JOIN _rocpd_p p ON p.id = m.pid""")

    def _count_replaced(self, tables: dict[str, pa.Table]) -> None:
        """Strings decoded with replacement, counted once per kernel, region or copy that shows one (as when
        the joins ran in SQLite and every joined row was checked)."""
        flagged = {name for name, table in tables.items() for c in table.column_names if c.endswith("_bad")}
        if not flagged:
            return
        counts = [("sym", "name_bad", "_rocpd_k k JOIN _rocpd_sym x ON x.id = k.kernel_id"),
                  ("str", "string_bad", "_rocpd_r r JOIN _rocpd_str x ON x.id = r.name_id"),
                  ("str", "string_bad", "_rocpd_r r JOIN _rocpd_e e ON e.id = r.event_id "
                                        "JOIN _rocpd_str x ON x.id = e.category_id"),
                  ("msg", "message_bad", "_rocpd_r r JOIN _rocpd_msg x ON x.id = r.event_id"),
                  ("str", "string_bad", "_rocpd_m m JOIN _rocpd_str x ON x.id = m.name_id"),
                  ("agent", "type_bad", "_rocpd_m m JOIN _rocpd_agent x ON x.id = m.src_agent_id"),
                  ("agent", "type_bad", "_rocpd_m m JOIN _rocpd_agent x ON x.id = m.dst_agent_id")]
        for table, flag, joined in counts:
            if table in flagged and flag in tables[table].column_names and joined.split()[0][7:] in tables:
                self.replaced += self.con.execute(f"SELECT count(*) FROM {joined} WHERE x.{flag}").fetchall()[0][0]

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
