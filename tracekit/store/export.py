"""The store as partitioned Parquet: ``DIR/<table>/rank=<r>/*.parquet``, one folder per store table.

Written by DuckDB's ``COPY ... (FORMAT parquet, PARTITION_BY (rank))`` into a temporary folder beside
``DIR`` that is renamed into place once every table is written, so a reader never sees half an export.
The ``rank`` column lives in the folder names (Hive partitioning), as DuckDB, polars, pyarrow and
Spark expect; ``docs/export.md`` shows the queries.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tracekit.errors import InputError
from tracekit.parsers.schema import TABLES
from tracekit.store.ingest import Store


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def export_parquet(store: Store, out_dir: Path) -> dict[str, int]:
    """Write every store table under ``out_dir`` partitioned by rank; return the rows written per table.

    ``out_dir`` must not exist yet (or be an empty folder): an export never mixes with older files."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError(f"--parquet {out_dir}: already exists; remove it or name a new folder")
    parent = out_dir.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise InputError(f"--parquet {out_dir}: cannot write there ({exc.strerror})") from None
    rows: dict[str, int] = {}
    try:
        for table in TABLES:
            rows[table] = store.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            store.con.execute(f"COPY (SELECT * FROM {table}) TO {_sql_string(str(tmp / table))} "
                              "(FORMAT parquet, PARTITION_BY (rank))")
        if out_dir.is_dir():
            out_dir.rmdir()  # the empty folder the user made: replaced by the finished export
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rows
