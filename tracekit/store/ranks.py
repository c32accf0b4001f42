"""The global rank of every file's rows when several stores are opened together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import duckdb


class IngestResult(Protocol):
    """What the rank assignment reads of an ingested file."""

    source: Path
    fmt: str


def assign_ranks(con: duckdb.DuckDBPyConnection, results: Sequence[IngestResult],
                 aliases: Sequence[str] | None = None) -> tuple[list[dict[int | None, int]], list[str]]:
    """Per file, its rows' rank values (NULL: none named) mapped to the global ranks: ranks the files record
    (Kineto distributedInfo.rank, an nsys rank variable) as they are; a file that names none, each process
    of an nsys export numbered by process order, and a rank an earlier file already claimed (with a warning:
    the cross-rank analysis then shows whether that file belongs to this run) get the lowest free ranks in
    the order given. A file's rows without a rank (launcher processes, file-level notes) take its first rank.
    ``aliases``: the attached store of each result (default f0, f1, ...; graph-capture traces are left out)."""
    locals_: list[list[int | None]] = []
    numbered: list[bool] = []
    for alias in aliases if aliases is not None else [f"f{i}" for i in range(len(results))]:
        locals_.append([r[0] for r in con.execute(f"SELECT DISTINCT rank FROM {alias}.trace_info ORDER BY rank")
                        .fetchall()] or [None])
        numbered.append(con.execute(f"SELECT count(*) FROM {alias}.capture WHERE rank_source = 'process_order'")
                        .fetchone()[0] > 0)
    claimed = {r for own, by_order in zip(locals_, numbered, strict=True) if not by_order for r in own
               if r is not None}
    free = (r for r in range(sum(map(len, locals_)) + len(claimed)) if r not in claimed)
    seen: dict[int, Path] = {}
    warnings: list[str] = []
    mappings: list[dict[int | None, int]] = []
    for own, by_order, res in zip(locals_, numbered, results, strict=True):
        if by_order or own == [None]:
            mapping: dict[int | None, int] = {r: next(free) for r in own}
            if own == [None] and res.fmt == "kineto" and len(results) > 1:
                warnings.append(f"{res.source}: no distributedInfo.rank; given rank {mapping[None]} from the order "
                                "of inputs")
        else:
            mapping = {}
            for r in own:
                if r in seen:
                    mapping[r] = next(free)
                    warnings.append(f"{seen[r]} and {res.source}: both claim rank {r}; the second is analysed as "
                                    f"rank {mapping[r]} (give one file per rank)")
                else:
                    mapping[r] = r
                    seen[r] = res.source
        mapping.setdefault(None, min(mapping.values()))
        mappings.append(mapping)
    return mappings, warnings


def rank_sql(mapping: dict[int | None, int]) -> str:
    """SQL mapping a file's ``rank`` column to its global ranks."""
    cases = " ".join(f"WHEN rank = {local} THEN {g}" for local, g in mapping.items() if local is not None)
    return f"CAST(CASE {cases} ELSE {mapping[None]} END AS INTEGER)" if cases else f"CAST({mapping[None]} AS INTEGER)"
