"""The runtime and driver API calls of an Nsight Systems export (``CUPTI_ACTIVITY_KIND_RUNTIME``).

Each call's display name drops a version suffix as nsys does; a backtrace row (eventClass 67) repeating a
real call is kept with ``is_duplicate`` and takes that call's API kind (facts P3).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .nsys_parts import OrderedParts

EVENT_CLASS_RUNTIME, EVENT_CLASS_DRIVER, EVENT_CLASS_BACKTRACE = 0, 1, 67
RUNTIME_COLUMNS = ["start", "end", "eventClass", "globalTid", "correlationId", "nameId"]


def read_api_calls(reader: Any, parts: OrderedParts, pid_sql: str, tid_sql: str) -> None:
    """Stream the runtime and driver API calls into ``api_calls`` in rowid ranges (``reader``: the nsys reader)."""
    found = reader._columns("CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLUMNS, RUNTIME_COLUMNS)
    if found is None:
        reader.missing.append("CUPTI_ACTIVITY_KIND_RUNTIME")
        return
    table, select = found
    reader._in_ranges(
        parts, table, select,
        f"""INSERT INTO api_calls (pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api,
                correlation_id, is_duplicate)
            SELECT {pid_sql.format(g="r.globalTid")}, {tid_sql.format(g="r.globalTid")}, r.start, r."end",
                r."end" - r.start, s.name, s.value,
                CASE r.eventClass WHEN {EVENT_CLASS_RUNTIME} THEN 'runtime'
                    WHEN {EVENT_CLASS_DRIVER} THEN 'driver' END,
                r.correlationId, r.eventClass = {EVENT_CLASS_BACKTRACE}
            FROM _nsys_x r LEFT JOIN _nsys_api_names s ON s.id = r.nameId""",
        {"_nsys_api_names": _api_names(reader)},
    )  # fmt: skip


def _api_names(reader: Any) -> pa.Table:
    """StringIds with each string's API display name: nsys strips a version suffix only when it is `_v`
    plus exactly four characters (worked out once per string, not once per call)."""
    con = reader.con.cursor()
    try:
        con.register("_nsys_strings", reader.strings)
        return con.sql(
            r"""SELECT id, CASE WHEN value LIKE '%\_v____' ESCAPE '\' THEN value[:-7] ELSE value END AS name,
                   value FROM _nsys_strings"""
        ).to_arrow_table()
    finally:
        con.close()


def api_call_notes(reader: Any) -> None:
    """Backtrace duplicates take their call's API kind; notes on them and on calls of no known kind."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in reader.missing:
        return
    counts = reader.con.execute(
        "SELECT count(*) FILTER (is_duplicate), count(*) FILTER (api IS NULL AND NOT is_duplicate) "
        "FROM api_calls"
    ).fetchall()[0]
    duplicates, unknown = counts
    if duplicates:
        # A backtrace row repeats a real call (same thread and correlation id): take its API kind.
        reader._run(
            """UPDATE api_calls d SET api = p.api FROM api_calls p
               WHERE d.is_duplicate AND NOT p.is_duplicate AND p.pid = d.pid AND p.tid = d.tid
                 AND p.correlation_id = d.correlation_id"""
        )
        reader.notes.append((
            "backtrace_duplicates", duplicates,
            "CUDA backtrace rows (eventClass 67) repeating real API calls: kept with is_duplicate, "
            "excluded from analyses",
        ))  # fmt: skip
    if unknown:
        reader.notes.append((
            "unknown_api_event_class", unknown,
            "CUPTI_ACTIVITY_KIND_RUNTIME rows neither runtime nor driver calls: kept with api NULL",
        ))  # fmt: skip
