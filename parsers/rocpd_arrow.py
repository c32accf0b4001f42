"""Arrow tables out of a rocpd database (adbc-driver-sqlite), and lookups of ids in them, for ``parsers.rocpd``.

adbc does not validate UTF-8 (DuckDB rejects invalid strings): a string column with invalid UTF-8 is decoded
with replacement, and a column ``<name>_bad`` says which rows were, so that a string looked up per record is
counted once per record that shows it, as when SQLite joined it to every record.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .nsys_stream import Sqlite, _valid, query


def fetch(db: Sqlite, sql: str) -> pa.Table:
    """The result of ``sql`` on ``db`` as an Arrow table, invalid UTF-8 replaced and flagged (``<name>_bad``)."""
    reader, stmt = query(db, sql)
    try:
        result = reader.read_all()
    finally:
        reader.close()
        stmt.close()
    for i, name in enumerate(result.column_names):
        if not pa.types.is_string(result.column(i).type):
            continue
        try:
            result.column(i).validate(full=True)
        except pa.ArrowInvalid:
            values = result.column(i).cast(pa.binary()).to_pylist()
            result = result.set_column(i, name, pa.array(
                [None if v is None else v.decode("utf-8", "replace") for v in values], pa.string()))
            result = result.append_column(f"{name}_bad", pa.array([v is not None and not _valid(v) for v in values]))
    return result


def replaced(table: pa.Table) -> int:
    """How many strings of ``table`` were decoded with replacement."""
    return sum(pc.sum(table[c]).as_py() or 0 for c in table.column_names if c.endswith("_bad"))


def lookup(keys: pa.ChunkedArray, table: pa.Table, column: str) -> tuple[pa.ChunkedArray, int]:
    """``table[column]`` of the row whose id is each key, in the keys' order (a LEFT JOIN on a unique id), and
    how many of those values were decoded with replacement."""
    rows = pc.index_in(keys, table["id"])
    if f"{column}_bad" not in table.column_names:
        return table[column].take(rows), 0
    return table[column].take(rows), pc.sum(table[f"{column}_bad"].take(rows)).as_py() or 0
