"""The nsys reader's rowid ranges (parsers/nsys_parts.py): reading the large tables in ranges on worker threads
stores exactly the rows one query over each table stores, on a real export and on a synthetic one whose
rowids have gaps; a damaged page in any range is one line of bad input."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import adbc_driver_sqlite.dbapi as adbc_sqlite
import duckdb
import pytest
from conftest import SHARED_TRACES
from test_nsys_reader import BASE, expect_error, gpid, make_export

from tracekit.parsers import nsys_parts, schema
from tracekit.parsers.nsys import read_nsys
from tracekit.parsers.nsys_meta import sqlite_uri


def stored(path: Path) -> dict[str, list[tuple]]:
    """Every store table's rows, sorted (a table's stored order is not part of the store)."""
    con = duckdb.connect()
    schema.create_tables(con)
    read_nsys(path, con)
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def gappy_export(path: Path, n: int = 6_000) -> Path:
    """BASE plus ``n`` kernels and ``n`` launch calls whose rowids skip every seventh value."""
    make_export(path, BASE)
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (rowid, start, end, deviceId, streamId, correlationId, globalPid, "
        "demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ) "
        "VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, 1, 1, 1, 32, 1, 1)",
        [(10 + i + i // 6, 1000 + i * 10, 1005 + i * 10, 7 + i % 3, 100 + i, gpid(7), 1 + i % 2, 1) for i in range(n)],
    )
    db.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (rowid, start, end, eventClass, globalTid, correlationId, nameId) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(10 + i + i // 6, 995 + i * 10, 998 + i * 10, i % 2, gpid(7) | 7, 100 + i, 2 + i % 2) for i in range(n)],
    )
    db.commit()
    db.close()
    return path


def test_rowid_ranges_are_contiguous_and_cover_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gappy_export(tmp_path / "t.sqlite")
    monkeypatch.setattr(nsys_parts, "PART_ROWS", 1_000)
    with adbc_sqlite.connect(sqlite_uri(path)) as db:
        ranges = nsys_parts.rowid_ranges(db, "CUPTI_ACTIVITY_KIND_KERNEL")
        assert nsys_parts.rowid_ranges(db, "StringIds") == [None]  # small: one query
    low, high = sqlite3.connect(path).execute(
        "SELECT min(rowid), max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    assert len(ranges) == 8 and ranges[0][0] == low and ranges[-1][1] == high
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_ranges_store_the_rows_of_one_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gappy_export(tmp_path / "t.sqlite")
    whole = stored(path)
    monkeypatch.setattr(nsys_parts, "PART_ROWS", 700)
    assert stored(path) == whole
    assert len(whole["kernels"]) == 6_003 and len(whole["api_calls"]) == 6_004


def test_ranges_on_a_real_export(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED_TRACES / "nsys" / "nsys-ai__mfu_2gpu_before.sqlite"
    whole = stored(path)
    part_rows = len(whole["kernels"]) // 4 + 1  # four ranges of the kernel table, more of the API table
    monkeypatch.setattr(nsys_parts, "PART_ROWS", part_rows)
    monkeypatch.setattr(nsys_parts, "MAX_WORKERS", 3)
    with adbc_sqlite.connect(sqlite_uri(path)) as db:
        assert len(nsys_parts.rowid_ranges(db, "CUPTI_ACTIVITY_KIND_KERNEL")) == 4
    assert stored(path) == whole


def test_a_damaged_page_in_a_later_range_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gappy_export(tmp_path / "t.sqlite", n=20_000)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    pages = len(data) // page
    for p in range(int(pages * 0.7), int(pages * 0.7) + 3):
        data[p * page : (p + 1) * page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    monkeypatch.setattr(nsys_parts, "PART_ROWS", 2_000)
    expect_error(path, "malformed")


def test_reading_an_export_loads_neither_adbc_dbapi_nor_polars() -> None:
    """The reader queries through adbc's low-level statements: its DB-API module would import polars."""
    probe = ("import json, sys, duckdb\nfrom tracekit.parsers import schema\n"
             "from tracekit.parsers.nsys import read_nsys\ncon = duckdb.connect()\nschema.create_tables(con)\n"
             "read_nsys(sys.argv[1], con)\n"
             "print(json.dumps([con.execute('SELECT count(*) FROM kernels').fetchall()[0][0],"
             " sorted(m for m in ('adbc_driver_manager.dbapi', 'polars') if m in sys.modules)]))")
    sample = Path(__file__).resolve().parents[1] / "fixtures" / "sample_decode.sqlite"
    run = subprocess.run([sys.executable, "-c", probe, str(sample)], capture_output=True, text=True, check=True)
    kernels, loaded = json.loads(run.stdout)
    assert kernels > 0
    assert loaded == []
