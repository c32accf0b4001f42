"""`tracekit export --parquet DIR`: the store partitioned by rank, readable by DuckDB and polars; `--perfetto`."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.parsers.schema import TABLES
from tracekit.store.ingest import open_store

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = [str(SAMPLES / "sample_decode_rank0.json.gz"), str(SAMPLES / "sample_decode_rank1.json.gz")]


def export(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", *FILES, "--no-cache", *args])
    return result.exit_code, result.output


def test_parquet_export_holds_every_table_by_rank(tmp_path: Path) -> None:
    out = tmp_path / "pq"
    code, output = export("--parquet", str(out), "--format", "json")
    assert code == 0, output
    rows = {r["table"]: r["rows"] for r in json.loads(output)[f"parquet in {out}"]}
    assert set(rows) == set(TABLES) and rows["kernels"] > 0
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["rank=0", "rank=1"]
    with open_store([Path(f) for f in FILES], cache_dir=tmp_path / "cache") as store:
        want = store.con.execute("SELECT rank, count(*), sum(dur_ns) FROM kernels GROUP BY ALL ORDER BY 1").fetchall()
    got = duckdb.sql(f"SELECT rank, count(*), sum(dur_ns) FROM read_parquet('{out}/kernels/*/*.parquet', "
                     "hive_partitioning = true) GROUP BY rank ORDER BY rank").fetchall()
    assert got == want
    frame = pl.scan_parquet(out / "kernels", hive_partitioning=True).group_by("rank").len().sort("rank").collect()
    assert frame.rows() == [(r, n) for r, n, _ in want]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_parquet_export_never_mixes_with_an_existing_folder(tmp_path: Path) -> None:
    out = tmp_path / "pq"
    out.mkdir()
    (out / "old.parquet").write_text("x")
    code, output = export("--parquet", str(out))
    assert code == 2 and "already exists" in output
    assert [p.name for p in out.iterdir()] == ["old.parquet"]


def test_export_needs_a_target_and_perfetto_is_wired(tmp_path: Path) -> None:
    code, output = export()
    assert code == 2 and "--parquet" in output
    trace = tmp_path / "timeline.json"
    code, output = export("--perfetto", str(trace))
    assert code == 0, output
    assert json.loads(trace.read_text())  # a JSON trace that Perfetto opens


def test_every_table_reads_back_even_when_it_has_no_rows(tmp_path: Path) -> None:
    """An empty table is one zero-row file with its columns: the documented DuckDB and polars reads return
    an empty table (an empty folder made both fail), and every table's rows and columns come back."""
    out = tmp_path / "pq"
    code, output = export("--parquet", str(out), "--format", "json")
    assert code == 0, output
    rows = {r["table"]: r["rows"] for r in json.loads(output)[f"parquet in {out}"]}
    assert [t for t, n in rows.items() if n == 0], "the fixture should have an empty table to check"
    with open_store([Path(f) for f in FILES], cache_dir=tmp_path / "cache") as store:
        for table in TABLES:
            columns = [r[0] for r in store.con.execute(f"DESCRIBE {table}").fetchall()]
            got = duckdb.sql(f"SELECT * FROM read_parquet('{out}/{table}/*/*.parquet', hive_partitioning = true)")
            assert len(got.fetchall()) == rows[table] and sorted(got.columns) == sorted(columns), table
            frame = pl.scan_parquet(out / table, hive_partitioning=True).collect()
            assert frame.height == rows[table] and sorted(frame.columns) == sorted(columns), table
