"""Arrow batches streamed out of an Nsight Systems SQLite export (adbc-driver-sqlite), safe for DuckDB.

adbc neither validates UTF-8 nor surfaces a read error where DuckDB can report it; this module does both:
invalid strings are decoded with replacement (and counted), and read errors are kept to be raised as
InputError once DuckDB has consumed the stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_manager
import pyarrow as pa

from tracekit.errors import InputError

BATCH_ROWS = 65536  # rows per Arrow batch: also the window in which adbc infers column types


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (or its type name)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _valid(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ArrowStream:
    """Streams queries on one export as Arrow batches; read errors and replaced strings are kept here."""

    def __init__(self, path: Path, db: adbc_driver_manager.dbapi.Connection, replaced: int = 0) -> None:
        self.path, self.db = path, db
        self.errors: list[str] = []  # read errors met while DuckDB pulled batches
        self.lock = threading.Lock()
        self.replaced = replaced  # strings decoded with replacement

    def _stream(
        self, sql: str, table: str, db: adbc_driver_manager.dbapi.Connection | None = None
    ) -> pa.RecordBatchReader:
        """Stream a query's result as Arrow batches, invalid UTF-8 replaced; read errors -> InputError.

        An error raised while DuckDB pulls batches would surface as a DuckDB error; it is kept in
        ``self.errors`` instead and re-raised as InputError once the insert returns.
        """
        cur = (db or self.db).cursor()
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        try:
            cur.execute(sql)
            reader = cur.fetch_record_batch()
        except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
            cur.close()
            raise InputError(f"{self.path}: cannot read {table} ({one_line(exc)})") from None

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                for batch in reader:
                    yield self._fix_utf8(batch)
            except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
                self.errors.append(f"{self.path}: cannot read {table} ({one_line(exc)})")
            finally:
                cur.close()

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def _fix_utf8(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Replace invalid UTF-8 in string columns (adbc does not validate it; DuckDB rejects it)."""
        for i, column in enumerate(batch.columns):
            if not pa.types.is_string(column.type):
                continue
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                values = column.view(pa.binary()).to_pylist()
                with self.lock:
                    self.replaced += sum(v is not None and not _valid(v) for v in values)
                fixed = pa.array([None if v is None else v.decode("utf-8", "replace") for v in values])
                batch = batch.set_column(i, batch.schema.field(i), fixed)
        return batch
