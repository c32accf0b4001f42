"""Arrow batches streamed out of an Nsight Systems SQLite export (adbc-driver-sqlite), safe for DuckDB.

adbc neither validates UTF-8 nor surfaces a read error where DuckDB can report it; this module does both:
invalid strings are decoded with replacement (and counted), and read errors are kept to be raised as
InputError once DuckDB has consumed the stream. Queries run on adbc's low-level statements (``Sqlite``):
its DB-API module imports polars when installed, about 0.1 s of every ingest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import adbc_driver_manager
import adbc_driver_sqlite
import pyarrow as pa

from tracekit.errors import InputError

if TYPE_CHECKING:
    from adbc_driver_manager.dbapi import Connection

BATCH_ROWS = 65536  # rows per Arrow batch: also the window in which adbc infers column types


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (or its type name)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Sqlite:
    """One ADBC connection to a SQLite file (``uri``), without the DB-API layer."""

    def __init__(self, uri: str) -> None:
        self.database = adbc_driver_sqlite.connect(uri)
        try:
            self.adbc_connection = adbc_driver_manager.AdbcConnection(self.database)
        except BaseException:
            self.database.close()
            raise

    def close(self) -> None:
        """Close the connection and its database."""
        self.adbc_connection.close()
        self.database.close()


def query(
    db: Sqlite | Connection, sql: str, batch_rows: int = BATCH_ROWS
) -> tuple[pa.RecordBatchReader, adbc_driver_manager.AdbcStatement]:
    """Run ``sql`` on ``db`` (a ``Sqlite`` or an adbc DB-API connection): its result as a stream of Arrow
    batches of ``batch_rows`` rows, and the statement to close once the stream is consumed."""
    stmt = adbc_driver_manager.AdbcStatement(db.adbc_connection)
    try:
        stmt.set_options(**{adbc_driver_sqlite.StatementOptions.BATCH_ROWS.value: str(batch_rows)})
        stmt.set_sql_query(sql)
        handle, _ = stmt.execute_query()
        return pa.RecordBatchReader._import_from_c(handle.address), stmt
    except BaseException:
        stmt.close()
        raise


def first_row(db: Sqlite | Connection, sql: str) -> tuple:
    """The first row of ``sql``'s result on ``db`` (IndexError when there is none)."""
    reader, stmt = query(db, sql)
    try:
        table = reader.read_all()
    finally:
        reader.close()
        stmt.close()
    return tuple(column[0].as_py() for column in table.columns)


def _valid(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def repaired_utf8(column: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, list[bool]] | None:
    """A string ``column`` with invalid UTF-8 decoded with replacement, and per value whether it was invalid;
    None when every value is valid (adbc does not validate UTF-8; DuckDB rejects it)."""
    try:
        column.validate(full=True)
        return None
    except pa.ArrowInvalid:
        values = column.cast(pa.binary()).to_pylist()
    return (pa.array([None if v is None else v.decode("utf-8", "replace") for v in values], pa.string()),
            [v is not None and not _valid(v) for v in values])


class ArrowStream:
    """Streams queries on one export as Arrow batches; read errors and replaced strings are kept here."""

    def __init__(self, path: Path, db: Sqlite | Connection, replaced: int = 0) -> None:
        self.path, self.db = path, db
        self.errors: list[str] = []  # read errors met while DuckDB pulled batches
        self.lock = threading.Lock()
        self.replaced = replaced  # strings decoded with replacement

    def _stream(self, sql: str, table: str, db: Sqlite | Connection | None = None) -> pa.RecordBatchReader:
        """Stream a query's result as Arrow batches, invalid UTF-8 replaced; read errors -> InputError.

        An error raised while DuckDB pulls batches would surface as a DuckDB error; it is kept in
        ``self.errors`` instead and re-raised as InputError once the insert returns.
        """
        try:
            reader, stmt = query(db or self.db, sql)
        except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
            raise InputError(f"{self.path}: cannot read {table} ({one_line(exc)})") from None

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                for batch in reader:
                    yield self._fix_utf8(batch)
            except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
                self.errors.append(f"{self.path}: cannot read {table} ({one_line(exc)})")
            finally:
                reader.close()
                stmt.close()

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def _fix_utf8(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Replace invalid UTF-8 in string columns (adbc does not validate it; DuckDB rejects it)."""
        for i, column in enumerate(batch.columns):
            if pa.types.is_string(column.type) and (repair := repaired_utf8(column)) is not None:
                fixed, bad = repair
                with self.lock:
                    self.replaced += sum(bad)
                batch = batch.set_column(i, batch.schema.field(i), fixed)
        return batch
