"""The Nsight Systems SQLite reader on the real exports of shared/traces/nsys and on small synthetic ones.

The real files cover the three schema generations and the pitfalls P1-P5 of
shared/facts/nsys-sqlite-schema.md; the synthetic exports cover what no real file shows (NULL range
ends, start/end ranges, domains per process, bad input).
"""

from __future__ import annotations

import shutil
import sqlite3
from functools import cache
from pathlib import Path

import duckdb
import pytest
from conftest import SHARED_TRACES

from tracekit.errors import InputError
from tracekit.parsers import registry, schema
from tracekit.parsers.nsys import read_nsys
from tracekit.store import summaries

NSYS = SHARED_TRACES / "nsys"
needs_traces = pytest.mark.usefixtures("shared_traces")  # skips (fails under CI) without the folder

MFU = "nsys-ai__mfu_2gpu_before"
H100 = "nsys-ai__h100_2gpu_1s"
MOCK = "nsys-ai__mock"
S16 = "extrap__concurrent_example__concurrent.s16__profile16"
S1 = "extrap__concurrent_example__concurrent.s1__profile1"
CON_KERNEL = "extrap__nsys_db__con_kernel"
PRE2 = "extrap__sampled_callchains__ex-gpu.s10__ex-gpu.s10"


def new_store() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    schema.create_tables(con)
    return con


@cache
def store(name: str) -> duckdb.DuckDBPyConnection:
    """The store of one real export (read once per test session; tests only query it)."""
    con = new_store()
    read_nsys(NSYS / f"{name}.sqlite", con)
    return con


def one(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> object:
    return con.execute(sql, params).fetchall()[0][0]


def notes(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return dict(con.execute("SELECT kind, count FROM read_notes").fetchall())


# --- real exports ------------------------------------------------------------------------------

# kernels, API rows, NVTX ranges, memcpy + memset: the row counts of SOURCES.md (NVTX rows minus the
# one domain-create row of the concurrent files).
COUNTS = {
    MOCK: (2, 9, 0, 1),
    H100: (3442, 5796, 16782, 904 + 22),
    MFU: (4010, 7466, 19118, 1020 + 269),
    S16: (12, 184, 76, 30 + 17),
    S1: (12, 184, 76, 30 + 17),
    CON_KERNEL: (9, 71, 0, 11 + 1),
    PRE2: (6, 36, 0, 0),
}


@needs_traces
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_export_loads_all_rows(name: str) -> None:
    con = store(name)
    got = tuple(one(con, f"SELECT count(*) FROM {t}") for t in ("kernels", "api_calls", "ranges", "memops"))
    assert got == COUNTS[name]
    # One rank per GPU process: the two-process exports hold ranks 0 and 1 (numbered by CUDA device, as
    # they record no rank); single-process ones leave the rank to the store.
    ranks = 2 if name in (H100, MFU) else 1
    assert one(con, "SELECT count(*) FROM trace_info") == ranks
    for table in ("kernels", "memops"):
        expected = [(0, 0), (1, 1)] if ranks == 2 else [(None, d) for (d,) in con.execute(
            f"SELECT DISTINCT device_id FROM {table} ORDER BY 1").fetchall()]
        assert con.execute(f"SELECT DISTINCT rank, device_id FROM {table} ORDER BY 1, 2").fetchall() == expected
    if ranks == 1:
        for table in schema.EVENT_TABLES:
            assert one(con, f"SELECT count(*) FROM {table} WHERE rank IS NOT NULL") == 0
    # Every kernel has a name, a decoded pid that names a process, and a duration.
    assert one(con, "SELECT count(*) FROM kernels WHERE name IS NULL OR short_name IS NULL") == 0
    assert one(con, "SELECT count(*) FROM kernels WHERE dur_ns <> end_ns - start_ns OR dur_ns < 0") == 0
    assert one(con, "SELECT count(*) FROM kernels WHERE pid NOT IN (SELECT pid FROM processes)") == 0


@needs_traces
@pytest.mark.parametrize(
    ("name", "version", "product"),
    [(MFU, "3.25.0", "2026.2.1.210"), (MOCK, "3.24.14", "2026.1.1.204"), (S16, "2.9.1", "2022.1.1.61"),
     (PRE2, "pre-2.x", None)],
)  # fmt: skip
def test_trace_info(name: str, version: str, product: str | None) -> None:
    con = store(name)
    row = con.execute(  # one row per rank: together they span the whole capture
        "SELECT source_format, format_version, product_version, min(start_ns), max(end_ns) FROM trace_info GROUP BY ALL"
    ).fetchall()[0]
    span = con.execute(
        """SELECT min(s), max(e) FROM (SELECT start_ns s, end_ns e FROM kernels UNION ALL
           SELECT start_ns, end_ns FROM memops UNION ALL SELECT start_ns, end_ns FROM api_calls)"""
    ).fetchall()[0]
    assert row == ("nsys", version, product, *span)


@needs_traces
def test_capture_command_and_metadata() -> None:
    con = store(MFU)
    command = one(con, "SELECT capture_command FROM trace_info")
    assert command.startswith("torchrun --nnodes=1 --nproc_per_node=2")
    meta = dict(con.execute("SELECT key, value FROM trace_meta").fetchall())
    assert meta["EXPORT_SCHEMA_VERSION"] == "3.25.0"
    assert meta["DERIVED_WINDOW_NS"] == "60111418026-60411418026"
    assert meta["NvDriverVersion"] == "580.95.05"  # TARGET_INFO_SYSTEM_ENV
    assert one(store(PRE2), "SELECT capture_command FROM trace_info") is None


@needs_traces
def test_p1_correlation_ids_repeat_across_processes() -> None:
    con = store(MFU)
    # The trap: joining on the correlation id alone pairs kernels with the other process's calls.
    assert one(con, "SELECT count(*) FROM kernels k JOIN api_calls a USING (correlation_id)") == 4280
    matched = one(
        con,
        """SELECT count(*) FROM kernels k JOIN api_calls a
           ON a.pid = k.pid AND a.correlation_id = k.correlation_id AND NOT a.is_duplicate""",
    )
    assert matched == 3986
    assert notes(con)["unmatched_launch"] == 4010 - 3986
    assert notes(store(H100))["unmatched_launch"] == 3442 - 1632


@needs_traces
def test_p2_driver_api_launches() -> None:
    con = store(MFU)
    launches = dict(
        con.execute(
            """SELECT a.api, count(*) FROM kernels k JOIN api_calls a
               ON a.pid = k.pid AND a.correlation_id = k.correlation_id GROUP BY a.api"""
        ).fetchall()
    )
    assert launches["driver"] == 399
    nccl = con.execute(
        """SELECT DISTINCT a.name, a.raw_name, a.api FROM kernels k JOIN api_calls a
           ON a.pid = k.pid AND a.correlation_id = k.correlation_id
           WHERE k.short_name = 'ncclDevKernel_SendRecv'"""
    ).fetchall()
    assert nccl == [("cuLaunchKernelEx", "cuLaunchKernelEx", "driver")]
    assert one(con, "SELECT count(*) FROM kernels WHERE short_name = 'ncclDevKernel_SendRecv'") == 66


@needs_traces
def test_api_display_names_strip_only_four_character_versions() -> None:
    names = dict(store(MFU).execute("SELECT DISTINCT raw_name, name FROM api_calls").fetchall())
    assert names["cudaLaunchKernel_v7000"] == "cudaLaunchKernel"
    assert names["cudaEventRecordWithFlags_v11010"] == "cudaEventRecordWithFlags_v11010"
    assert names["cudaStreamGetCaptureInfo_v2_v11030"] == "cudaStreamGetCaptureInfo_v2_v11030"
    assert names["cuLaunchKernelEx"] == "cuLaunchKernelEx"


@needs_traces
def test_p3_backtrace_duplicates() -> None:
    con = store(PRE2)
    assert one(con, "SELECT count(*) FROM api_calls WHERE is_duplicate") == 18
    assert notes(con)["backtrace_duplicates"] == 18
    # A duplicate takes the API kind of the call it repeats.
    assert con.execute("SELECT DISTINCT api FROM api_calls").fetchall() == [("runtime",)]
    default = summaries.api_summary(con)
    compat = summaries.api_summary(con, nsys_compat=True)
    assert default.filter(name="cudaMalloc")["instances"].to_list() == [4]
    assert compat.filter(name="cudaMalloc")["instances"].to_list() == [4, 4]
    assert compat["total_ns"].sum() > 1.99 * default["total_ns"].sum()
    # Duplicates are not launches: every kernel pairs with exactly one real call.
    assert one(
        con,
        """SELECT count(*) FROM kernels k JOIN api_calls a
           ON a.pid = k.pid AND a.correlation_id = k.correlation_id AND NOT a.is_duplicate""",
    ) == 6  # fmt: skip


@needs_traces
@pytest.mark.parametrize("name", [S16, S1, CON_KERNEL])
def test_p4_latin1_metadata(name: str) -> None:
    con = store(name)
    assert one(con, "SELECT value FROM trace_meta WHERE key = 'EXPORT_USER'") == "Alexander Gei\ufffd"
    assert notes(con)["invalid_utf8"] >= 1


@needs_traces
def test_p5_absent_tables() -> None:
    mfu = store(MFU)  # no TARGET_INFO_GPU
    assert one(mfu, "SELECT count(*) FROM devices") == 0
    assert one(mfu, "SELECT detail FROM read_notes WHERE kind = 'missing_table'") == "TARGET_INFO_GPU"
    assert one(store(CON_KERNEL), "SELECT count(*) FROM ranges") == 0  # no NVTX_EVENTS
    assert one(store(MOCK), "SELECT count(*) FROM memops WHERE kind = 'memset'") == 0  # no MEMSET
    assert "missing_table" not in notes(store(MOCK))


@needs_traces
def test_devices_across_generations() -> None:
    # Windows 2.x: the Intel iGPU and "Microsoft Basic Render Driver" are not CUDA devices.
    assert store(S16).execute("SELECT device_id, name, sm_count, compute_major FROM devices").fetchall() == [
        (0, "GeForce GTX 1060 with Max-Q Design", 10, 6)
    ]
    pre2 = (
        store(PRE2)
        .execute(
            "SELECT device_id, sm_count, memory_bytes, mem_bw_bytes_per_s, compute_major FROM devices "
            "ORDER BY 1"
        )
        .fetchall()
    )
    assert pre2 == [(d, 108, 42505273344, 1.5552e12, 8) for d in range(4)]
    mock = store(MOCK).execute("SELECT name, sm_count, compute_major, compute_minor FROM devices").fetchall()
    assert mock == [("NVIDIA GeForce RTX 3080", 68, 8, 6)]


@needs_traces
def test_nvtx_names_and_domains() -> None:
    mfu = store(MFU)
    # NCCL names live in textId (domain 1); the window dropped the domain-create row, so no domain.
    nccl = mfu.execute(
        "SELECT name, count(*) FROM ranges WHERE name IN ('ncclGroupStart', 'ncclRecv') GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert nccl == [("ncclGroupStart", 66), ("ncclRecv", 132)]
    assert one(mfu, "SELECT count(*) FROM ranges WHERE name IS NULL OR domain IS NOT NULL") == 0
    s16 = store(S16)
    assert s16.execute("SELECT DISTINCT domain, style, source FROM ranges").fetchall() == [
        ("de.tu-darmstadt.parallel.extra_prof", "PushPop", "nvtx")
    ]


@needs_traces
def test_processes_and_threads() -> None:
    mfu = store(MFU)
    assert mfu.execute("SELECT pid, name FROM processes ORDER BY pid").fetchall() == [
        (144, "python3"),
        (145, "python3"),
    ]
    # Windows exports list every process of the machine; only those with events are kept.
    assert one(store(S16), "SELECT count(*) FROM processes") == 1
    assert one(mfu, "SELECT count(*) FROM threads WHERE pid NOT IN (144, 145)") == 0
    callers = one(
        mfu,
        "SELECT count(*) FROM (SELECT DISTINCT pid, tid FROM api_calls) ANTI JOIN threads USING (pid, tid)",
    )
    assert callers == 0


@needs_traces
def test_registered_as_the_nsys_reader() -> None:
    assert registry.spec("nsys").reader() is read_nsys


@needs_traces
def test_input_is_untouched(tmp_path: Path) -> None:
    src = tmp_path / "in" / "trace.sqlite"
    src.parent.mkdir()
    shutil.copy(NSYS / f"{MOCK}.sqlite", src)
    src.chmod(0o444)
    before = src.read_bytes()
    read_nsys(src, new_store())
    assert [p.name for p in src.parent.iterdir()] == ["trace.sqlite"]
    assert src.read_bytes() == before


# --- synthetic exports -------------------------------------------------------------------------

DDL = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": """start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
        streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
        shortName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,
        blockY INTEGER, blockZ INTEGER""",
    "CUPTI_ACTIVITY_KIND_RUNTIME": """start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
        globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER""",
    "NVTX_EVENTS": """start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
        globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER""",
    "META_DATA_EXPORT": "name TEXT, value TEXT",
    "META_DATA_CAPTURE": "name TEXT, value TEXT",
}
G = 1 << 48  # the VM bits of a Linux globalPid


def gpid(pid: int) -> int:
    return G | pid << 24


def make_export(path: Path, tables: dict[str, list[tuple]]) -> Path:
    """A minimal 3.x-like export holding the given rows (tables not named are absent)."""
    db = sqlite3.connect(path)
    for name, rows in tables.items():
        db.execute(f"CREATE TABLE {name} ({DDL[name]})")
        if rows:
            db.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    db.commit()
    db.close()
    return path


def kernel(start: int, dur: int, corr: int, pid: int = 7, name: int = 1) -> tuple:
    return (start, start + dur, 0, 7, corr, gpid(pid), name, name, 1, 1, 1, 32, 1, 1)


BASE: dict[str, list[tuple]] = {
    "StringIds": [(1, "k1"), (2, "cudaLaunchKernel_v7000"), (3, "cuFoo_vABCD"), (4, "msg")],
    "META_DATA_EXPORT": [("EXPORT_SCHEMA_VERSION", "3.25.0")],
    "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(100, 10, 1), kernel(200, 30, 2), kernel(300, 5, 1, pid=8)],
    "CUPTI_ACTIVITY_KIND_RUNTIME": [
        (90, 95, 0, gpid(7) | 7, 1, 2, 0, None),
        (190, 195, 0, gpid(7) | 7, 2, 2, 0, None),
        (290, 295, 1, gpid(8) | 9, 1, 3, 0, None),
        (400, 410, 77, gpid(8) | 9, 3, 3, 0, None),
    ],
}


def load(path: Path) -> duckdb.DuckDBPyConnection:
    con = new_store()
    read_nsys(path, con)
    return con


def test_synthetic_export_round_trip(tmp_path: Path) -> None:
    con = load(make_export(tmp_path / "t.sqlite", BASE))
    got = con.execute("SELECT pid, start_ns, dur_ns, name, correlation_id FROM kernels ORDER BY 2").fetchall()
    assert got == [
        (7, 100, 10, "k1", 1), (7, 200, 30, "k1", 2), (8, 300, 5, "k1", 1)
    ]  # fmt: skip
    calls = con.execute("SELECT pid, tid, name, api FROM api_calls ORDER BY start_ns").fetchall()
    assert calls == [
        (7, 7, "cudaLaunchKernel", "runtime"), (7, 7, "cudaLaunchKernel", "runtime"),
        (8, 9, "cuFoo", "driver"), (8, 9, "cuFoo", None),
    ]  # fmt: skip
    # Two processes ran kernels: two ranks (the export records none, so numbered by device, then pid).
    assert notes(con) == {"unknown_api_event_class": 1, "missing_table": 1, "ranks_from_processes": 2}
    assert con.execute("SELECT DISTINCT pid, rank FROM kernels ORDER BY 1").fetchall() == [(7, 0), (8, 1)]
    assert one(con, "SELECT format_version FROM trace_info") == "3.25.0"
    assert con.execute("SELECT pid, tid, name FROM threads ORDER BY 1, 2").fetchall() == [
        (7, 7, None), (8, 9, None)
    ]  # fmt: skip


def test_unmatched_launch_counts_kernels_without_their_call(tmp_path: Path) -> None:
    tables = BASE | {"CUPTI_ACTIVITY_KIND_RUNTIME": BASE["CUPTI_ACTIVITY_KIND_RUNTIME"][1:]}
    assert notes(load(make_export(tmp_path / "t.sqlite", tables)))["unmatched_launch"] == 1
    without_runtime = {k: v for k, v in BASE.items() if k != "CUPTI_ACTIVITY_KIND_RUNTIME"}
    con = load(make_export(tmp_path / "u.sqlite", without_runtime))
    assert notes(con)["unmatched_launch"] == 3
    assert one(con, "SELECT detail FROM read_notes WHERE kind = 'missing_table'") == (
        "CUPTI_ACTIVITY_KIND_RUNTIME, TARGET_INFO_GPU"
    )


def test_nvtx_ranges_domains_and_open_ends(tmp_path: Path) -> None:
    t7, t8 = gpid(7) | 7, gpid(8) | 8
    nvtx = [
        (10, None, 75, "dom7", t7, None, None, 1),  # domain 1 of process 7
        (10, None, 75, "dom8", t8, None, None, 1),  # domain 1 of process 8: another name
        (20, 50, 59, "a", t7, None, None, 1),
        (20, 60, 59, None, t8, None, 4, 1),  # message from textId
        (30, None, 59, "open", t7, None, None, 0),  # never ended
        (40, 90, 60, "se", t7, t7 + 1, None, 0),  # start/end range ending on another thread
        (95, None, 34, "mark", t7, None, None, 0),  # a mark: not a range
    ]
    con = load(make_export(tmp_path / "t.sqlite", BASE | {"NVTX_EVENTS": nvtx}))
    rows = con.execute(
        "SELECT pid, name, domain, style, end_ns, dur_ns, end_tid FROM ranges ORDER BY start_ns, pid"
    ).fetchall()
    assert rows == [
        (7, "a", "dom7", "PushPop", 50, 30, None),
        (8, "msg", "dom8", "PushPop", 60, 40, None),
        (7, "open", None, "PushPop", None, None, None),
        (7, "se", None, "StartEnd", 90, 50, 8),
    ]
    summary = {
        (r["name"], r["style"]): r["total_ns"] for r in summaries.nvtx_summary(con).iter_rows(named=True)
    }
    # The open range lasts until the last range timestamp (90), the domain prefixes the name.
    assert summary == {("dom7:a", "PushPop"): 30, ("dom8:msg", "PushPop"): 40, ("open", "PushPop"): 60,
                       ("se", "StartEnd"): 50}  # fmt: skip


def test_null_text_first_rows_do_not_confuse_type_inference(tmp_path: Path) -> None:
    """adbc infers column types from the first batch: a long run of NULL `text` must still read."""
    t7 = gpid(7) | 7
    nvtx = [(i, i + 1, 59, None, t7, None, 4, 0) for i in range(70_000)] + [
        (80_000, 80_001, 59, "x", t7, None, None, 0)
    ]
    con = load(make_export(tmp_path / "t.sqlite", BASE | {"NVTX_EVENTS": nvtx}))
    assert con.execute("SELECT name, count(*) FROM ranges GROUP BY 1 ORDER BY 1").fetchall() == [
        ("msg", 70_000), ("x", 1)
    ]  # fmt: skip


# --- bad input ---------------------------------------------------------------------------------


def expect_error(path: Path, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        read_nsys(path, new_store())
    message = str(err.value)
    assert str(path) in message and fragment in message and "\n" not in message


def test_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    path.write_text("hello")
    expect_error(path, "not an SQLite file")


def test_sqlite_but_not_nsys(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE foo (a INTEGER)")
    db.commit()
    db.close()
    expect_error(path, "not an Nsight Systems export")


def test_export_without_kernels_is_read_with_a_note(tmp_path: Path) -> None:
    """An empty or absent kernel table: the rest is read (``info`` describes it), with the note by which the
    analysis refuses it."""
    no_table = {k: v for k, v in BASE.items() if k != "CUPTI_ACTIVITY_KIND_KERNEL"}
    for path in (make_export(tmp_path / "a.sqlite", BASE | {"CUPTI_ACTIVITY_KIND_KERNEL": []}),
                 make_export(tmp_path / "b.sqlite", no_table)):
        con = load(path)
        assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM api_calls").fetchone()[0] > 0
        (detail,) = con.execute("SELECT detail FROM read_notes WHERE kind = 'no_gpu_activity'").fetchone()
        assert "no CUDA kernels" in detail


def big_export(path: Path, n: int = 100_000) -> Path:
    make_export(path, BASE)
    db = sqlite3.connect(path)
    db.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL WITH RECURSIVE r(i) AS (
            SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < {n - 1})
            SELECT i * 10, i * 10 + 5, 0, 7, i, {gpid(7)}, 1, 1, 1, 1, 1, 32, 1, 1 FROM r"""
    )
    db.commit()
    db.close()
    return path


def test_truncated(tmp_path: Path) -> None:
    path = big_export(tmp_path / "t.sqlite")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    expect_error(path, "truncated")


@pytest.mark.parametrize("where", [0.05, 0.5, 0.95], ids=["early", "middle", "late"])
def test_corrupt_pages(tmp_path: Path, where: float) -> None:
    """Garbage in the kernel table's pages: found while streaming, reported as bad input."""
    path = big_export(tmp_path / "t.sqlite")
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    pages = len(data) // page
    for p in range(int(pages * where), int(pages * where) + 4):
        data[p * page : (p + 1) * page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    expect_error(path, "malformed")


def test_summaries_statistics_and_rank_pooling(tmp_path: Path) -> None:
    """nsys statistics on known durations; two ranks pool into one summary."""
    strings = BASE["StringIds"] + [(5, "k2")]
    tables = BASE | {"StringIds": strings}
    tables["CUPTI_ACTIVITY_KIND_KERNEL"] = [*BASE["CUPTI_ACTIVITY_KIND_KERNEL"], kernel(500, 7, 9, name=5)]
    path = make_export(tmp_path / "t.sqlite", tables)
    con = new_store()
    for rank in (0, 1):
        read_nsys(path, con)
        for table in schema.TABLES:
            con.execute(f"UPDATE {table} SET rank = ? WHERE rank IS NULL", [rank])
    by_name = {r["name"]: r for r in summaries.kernel_summary(con).iter_rows(named=True)}
    k1 = by_name["k1"]  # durations 10, 30, 5 on each rank
    assert (k1["instances"], k1["total_ns"], k1["min_ns"], k1["max_ns"], k1["med_ns"]) == (6, 90, 5, 30, 10.0)
    assert k1["avg_ns"] == 15.0 and k1["stddev_ns"] == pytest.approx((2 * (25 + 225 + 100) / 5) ** 0.5)
    assert by_name["k2"]["stddev_ns"] == 0.0  # n = 2 identical values
    assert k1["time_pct"] == pytest.approx(100 * 90 / 104)
    single = summaries.kernel_summary(_one_rank(con), by="short_name")
    assert single.filter(name="k2")["stddev_ns"].to_list() == [0.0]  # n = 1 prints 0, not NULL
    grid = summaries.kernel_summary(con, by="name_grid_block")
    assert grid.columns[:7] == ["name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    with pytest.raises(ValueError):
        summaries.kernel_summary(con, by="grid")  # type: ignore[arg-type]


def _one_rank(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A store holding rank 0 of ``con`` only."""
    single = new_store()
    for table in schema.TABLES:
        rows = con.execute(f"SELECT * FROM {table} WHERE rank = 0").fetchall()
        if rows:
            single.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return single


def test_a_rank_in_the_launched_process_environment_names_the_export(tmp_path: Path) -> None:
    """``torchrun ... nsys profile`` records each rank's RANK: a one-process export takes it as its rank."""
    tables = {**BASE, "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(100, 10, 1), kernel(200, 30, 2)],
              "META_DATA_CAPTURE": [("PROCESS_0:COMMAND", "python3"),
                                    ("PROCESS_0:ENVIRONMENT_VARIABLE", 'LOCAL_RANK="1"'),
                                    ("PROCESS_0:ENVIRONMENT_VARIABLE", 'RANK="5"')]}
    con = load(make_export(tmp_path / "r.sqlite", tables))
    assert con.execute("SELECT DISTINCT rank FROM kernels").fetchall() == [(5,)]
    assert con.execute("SELECT rank FROM trace_info").fetchall() == [(5,)]
    assert "ranks_from_processes" not in notes(con)
