"""Arrow tables out of a rocpd database (adbc-driver-sqlite), and lookups of ids in them, for ``parsers.rocpd``.

adbc does not validate UTF-8 (DuckDB rejects invalid strings): a string column with invalid UTF-8 is decoded
with replacement, and a column ``<name>_bad`` says which rows were, so that a string looked up per record is
counted once per record that shows it, as when SQLite joined it to every record.
"""

from __future__ import annotations

from collections.abc import Iterator

import adbc_driver_manager
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import InputError
from tracekit.parsers.kernel_names import function_name

from .nsys_stream import Sqlite, one_line, query, repaired_utf8

CHUNK_BATCHES = 8  # adbc batches (65,536 rows each) per chunk: what is held in memory of a large table


def chunks(db: Sqlite, sql: str, where: str, batches: int | None = CHUNK_BATCHES) -> Iterator[pa.Table]:
    """The result of ``sql`` on ``db`` as Arrow tables of ``batches`` batches each (all in one if None), at
    least one, invalid UTF-8 replaced and flagged (``<name>_bad``); a read error: InputError ``where (why)``."""
    try:
        reader, stmt = query(db, sql)
    except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
        raise InputError(f"{where} ({one_line(exc)})") from None
    try:
        more, first = True, True
        while more:
            got = []
            try:
                while batches is None or len(got) < batches:
                    got.append(reader.read_next_batch())
            except StopIteration:
                more = False
            except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
                raise InputError(f"{where} ({one_line(exc)})") from None
            if got or first:
                yield _repaired(pa.Table.from_batches(got, reader.schema))
            first = False
    finally:
        reader.close()
        stmt.close()


def _repaired(table: pa.Table) -> pa.Table:
    """``table`` with invalid UTF-8 decoded with replacement, each repaired column flagged by ``<name>_bad``."""
    for i, name in enumerate(table.column_names):
        if pa.types.is_string(table.column(i).type) and (repair := repaired_utf8(table.column(i))) is not None:
            fixed, bad = repair
            table = table.set_column(i, name, fixed).append_column(f"{name}_bad", pa.array(bad, pa.bool_()))
    return table


def replaced(table: pa.Table) -> int:
    """How many strings of ``table`` were decoded with replacement."""
    return sum(pc.sum(table[c]).as_py() or 0 for c in table.column_names if c.endswith("_bad"))


def lookup(keys: pa.ChunkedArray, table: pa.Table, column: str, keep: bool = False) -> tuple[pa.ChunkedArray, int]:
    """``table[column]`` of the row whose id is each key, in the keys' order (a LEFT JOIN on a unique id; with
    ``keep``, the key itself where no row has it), and how many of the values were decoded with replacement."""
    rows = pc.index_in(keys, table["id"])
    values = pc.coalesce(table[column].take(rows), keys) if keep else table[column].take(rows)
    if f"{column}_bad" not in table.column_names:
        return values, 0
    return values, pc.sum(table[f"{column}_bad"].take(rows)).as_py() or 0


Symbols = dict[int, tuple[str, bool] | None]  # a kernel symbol's id -> its name and whether it was replaced


def read_symbols(db: Sqlite, table: str, ids: pa.ChunkedArray, where: str, symbols: Symbols) -> None:
    """Add to ``symbols`` the names of the symbols of ``ids`` it lacks (None: no such symbol), read from
    ``table``: the symbols dispatches name, not the whole table (rocprofv3 lists every kernel of every code
    object loaded)."""
    if new := [int(i) for i in pc.unique(ids).to_pylist() if i is not None and i not in symbols]:
        # Text columns come as '' for NULL: adbc types an all-NULL first batch as int64 (as parsers.nsys).
        found = list(chunks(db, f"SELECT id, coalesce(display_name, kernel_name, '') AS name FROM {table} "
                                f"WHERE id IN ({', '.join(map(str, new))})", where, None))[0]
        bad = found["name_bad"] if "name_bad" in found.column_names else pa.nulls(len(found), pa.bool_())
        symbols |= dict.fromkeys(new)
        symbols |= {i: (name, replaced) for i, name, replaced in zip(
            found["id"].to_pylist(), found["name"].to_pylist(), bad.to_pylist(), strict=True)}


def kernel_columns(kernels: pa.Table, symbols: Symbols, agents: pa.Table, processes: pa.Table,
                   shorts: dict[str, str | None]) -> tuple[pa.Table, int]:
    """A chunk of dispatches with their process's pid, device (agent type_index), name (``symbols``: id ->
    name, replaced) and short name (the function name, ``kernel_names``, once per name: ``shorts``); and how
    many names were replaced."""
    ids = [i for i in pc.unique(kernels["kernel_id"]).to_pylist() if symbols.get(i) is not None]
    names = [symbols[i][0] for i in ids]
    for name in set(names) - shorts.keys():
        shorts[name] = function_name(name) if name else None
    used = pa.table({"id": pa.array(ids, kernels["kernel_id"].type), "name": pa.array(names, pa.string()),
                     "short": pa.array([shorts[name] for name in names], pa.string()),
                     "name_bad": pa.array([symbols[i][1] for i in ids], pa.bool_())})
    name, bad = lookup(kernels["kernel_id"], used, "name")
    return (kernels.set_column(0, "pid", lookup(kernels["pid"], processes, "pid", keep=True)[0])
            .set_column(1, "device_id", lookup(kernels["agent_id"], agents, "type_index")[0])
            .append_column("name", name).append_column("short", lookup(kernels["kernel_id"], used, "short")[0])), bad


def region_columns(regions: pa.Table, strings: pa.Table, processes: pa.Table, threads: pa.Table
                   ) -> tuple[pa.Table, int]:
    """A chunk of regions with their process's pid, thread's tid, name and category; and the strings replaced
    (the message's included)."""
    name, bad_name = lookup(regions["name_id"], strings, "string")
    category, bad_category = lookup(regions["category_id"], strings, "string")
    return (regions.set_column(0, "pid", lookup(regions["pid"], processes, "pid", keep=True)[0])
            .set_column(1, "tid", lookup(regions["tid"], threads, "tid", keep=True)[0])
            .append_column("name", name).append_column("category", category)), \
        bad_name + bad_category + replaced(regions)
