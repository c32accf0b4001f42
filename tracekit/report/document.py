"""The document model every command prints: titled polars tables, notes, blocks and an optional JSON body."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass
class Table:
    """A titled table; ``note`` is one line shown under it in human formats."""

    title: str
    frame: pl.DataFrame
    note: str | None = None


@dataclass
class Document:
    """What a command prints: a title, notes (caveats, warnings), tables, and an optional JSON body."""

    title: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] | None = None
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (title, text to copy verbatim)

    def json_body(self) -> dict[str, Any]:
        if self.data is not None:
            return self.data
        body: dict[str, Any] = {t.title: t.frame.to_dicts() for t in self.tables}
        if self.notes:
            body["notes"] = self.notes
        return body


def rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows of dicts as a table; a key/value table's values become text (they mix types)."""
    if rows and "value" in rows[0]:
        rows = [{**r, "value": str(r["value"])} for r in rows]
    return pl.DataFrame(rows, infer_schema_length=None)


def ms_value(ns: float | None, digits: int = 3) -> float | None:
    """Nanoseconds as milliseconds for a table cell (None stays None)."""
    return None if ns is None else round(ns / 1e6, digits)


def ms_text(ns: int | float | None) -> str:
    """Milliseconds with 3 decimals, for sentences (one precision per unit, as the tables print ms)."""
    return "n/a" if ns is None else f"{ns / 1e6:.3f}"


def pct_value(x: float | None) -> float | None:
    """A fraction as a percentage with one decimal for a table cell (None stays None)."""
    return None if x is None else round(100 * x, 1)
