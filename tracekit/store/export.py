"""The store as partitioned Parquet: ``DIR/<table>/rank=<r>/*.parquet``, one folder per store table.

Written by DuckDB's ``COPY ... (FORMAT parquet, PARTITION_BY (rank))`` into a temporary folder beside
``DIR`` that is renamed into place once every table is written, so a reader never sees half an export.
A table without rows gets one zero-row file (``<table>/rank=<first rank>/data_0.parquet``) holding its
columns, so the documented reads of ``<table>/*/*.parquet`` find a file and return an empty table.
The ``rank`` column lives in the folder names (Hive partitioning), as DuckDB, polars, pyarrow and
Spark expect; ``docs/export.md`` shows the queries.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import duckdb

from tracekit.errors import InputError
from tracekit.files import short, writing
from tracekit.parsers.schema import TABLES
from tracekit.store.ingest import Store


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def export_parquet(store: Store, out_dir: Path) -> dict[str, int]:
    """Write every store table under ``out_dir`` partitioned by rank; return the rows written per table.

    ``out_dir`` must not exist yet (or be an empty folder): an export never mixes with older files."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError(f"--parquet {short(out_dir)}: already exists; remove it or name a new folder")
    parent = out_dir.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name[:200]}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise InputError(f"--parquet {short(out_dir)}: cannot write there ({exc.strerror}); name another "
                         "folder") from None
    rows: dict[str, int] = {}
    first_rank = min((f.rank for f in store.files), default=0)
    try:
        with writing(out_dir, "--parquet"):
            try:
                for table in TABLES:
                    rows[table] = store.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    if rows[table]:
                        store.con.execute(f"COPY (SELECT * FROM {table}) TO {_sql_string(str(tmp / table))} "
                                          "(FORMAT parquet, PARTITION_BY (rank))")
                    else:  # no rows: one empty file with the columns, so a read finds the table
                        part = tmp / table / f"rank={first_rank}"
                        part.mkdir(parents=True)
                        store.con.execute(f"COPY (SELECT * EXCLUDE (rank) FROM {table} LIMIT 0) TO "
                                          f"{_sql_string(str(part / 'data_0.parquet'))} (FORMAT parquet)")
            except duckdb.IOException as exc:  # DuckDB's own write failure (a full disk): an OSError for writing()
                raise OSError(0, str(exc).split("\n")[0][:160]) from None
            if out_dir.is_dir():
                out_dir.rmdir()  # the empty folder the user made: replaced by the finished export
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rows
