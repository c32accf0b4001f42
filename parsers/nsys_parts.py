"""The large tables of an Nsight Systems export read in rowid ranges on worker threads, stored in rowid order.

SQLite decodes rows on one thread per connection, so the kernel and runtime-API tables are cut into
contiguous rowid ranges, each read on its own adbc connection and streamed into DuckDB on its own cursor,
inside its own transaction. DuckDB appends a transaction's rows to a table when it commits, so each range
commits only after the range before it of the same table: the stored rows come out in the order one
``SELECT`` over the whole table gives, whatever order the threads finish in. adbc and DuckDB both run
without the GIL, so the threads read and insert at the same time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import adbc_driver_manager
import duckdb

from tracekit.errors import InputError

from .nsys_stream import Sqlite, first_row, one_line

PART_ROWS = 500_000  # rowids per range: about 1 s of one core's reading and inserting
MAX_WORKERS = 4


def workers() -> int:
    """Threads for the ranges: the cores this process may run on, at most ``MAX_WORKERS``."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def rowid_ranges(db: Sqlite, table: str) -> list[tuple[int, int] | None]:
    """Contiguous inclusive rowid ranges covering ``table``, about ``PART_ROWS`` rowids each; ``[None]`` (the
    whole table, one query) when it is small, empty or has no rowid to cut it by."""
    try:
        # Two subqueries, not one SELECT of both: SQLite reads a lone min() or max() of the rowid from the
        # b-tree's edge, but scans the whole table for the pair (about 60 ms per million rows).
        low, high = first_row(db, f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")')
    except (adbc_driver_manager.Error, TypeError, ValueError):
        return [None]  # e.g. a WITHOUT ROWID table: read whole, as one query
    if not isinstance(low, int) or not isinstance(high, int) or high - low < PART_ROWS:
        return [None]
    n = -(-(high - low + 1) // PART_ROWS)
    step = -(-(high - low + 1) // n)
    return [(start, min(start + step - 1, high)) for start in range(low, high + 1, step)]


def range_filter(part: tuple[int, int] | None) -> str:
    """The WHERE clause of one range (empty for the whole table)."""
    return "" if part is None else f" WHERE rowid BETWEEN {part[0]} AND {part[1]}"


class OrderedParts:
    """Runs range inserts on a thread pool; each range of a table commits after the range before it.

    ``insert(con, db)`` streams one range into DuckDB on cursor ``con`` (adbc connection ``db``, both this
    range's own). A failed range makes every later range of its table roll back; ``wait`` raises the first
    error once every range has ended.
    """

    def __init__(self, uri: str, path: object, con: duckdb.DuckDBPyConnection, database: str) -> None:
        self.uri, self.path, self.con, self.database = uri, path, con, database
        self.pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="nsys-part")
        self.futures: list[Future] = []
        self.last: dict[str, threading.Event] = {}  # the latest range of each table: done committing
        self.failed: set[str] = set()

    def submit(self, table: str, insert: Callable[[duckdb.DuckDBPyConnection, object], None]) -> None:
        """Queue one range of ``table``, in rowid order (ranges of one table are submitted in order)."""
        before, done = self.last.get(table), threading.Event()
        self.last[table] = done
        self.futures.append(self.pool.submit(self._run, table, insert, before, done))

    def _run(self, table: str, insert: Callable, before: threading.Event | None, done: threading.Event) -> None:
        try:
            try:
                db = Sqlite(self.uri)
            except adbc_driver_manager.Error as exc:
                raise InputError(f"{self.path}: cannot open as SQLite ({one_line(exc)})") from None
            con = self.con.cursor()
            try:
                con.execute(f'USE "{self.database}"')  # a cursor starts in the default database
                con.execute("BEGIN TRANSACTION")
                try:
                    insert(con, db)
                except BaseException:
                    self.failed.add(table)
                    raise
                finally:
                    if before is not None:
                        before.wait()  # the pool runs ranges in submission order: that one has started
                    if table in self.failed:
                        con.execute("ROLLBACK")
                    else:
                        con.execute("COMMIT")
            finally:
                con.close()
                db.close()
        except BaseException:
            self.failed.add(table)
            raise
        finally:
            done.set()

    def wait(self) -> None:
        """Wait for every range; raise the first error met (an InputError before any other)."""
        self.pool.shutdown(wait=True)
        errors = [f.exception() for f in self.futures if f.exception() is not None]
        if errors:
            raise next((e for e in errors if isinstance(e, InputError)), errors[0])
