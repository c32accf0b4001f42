"""The document model every command prints: titled polars tables, notes, blocks and an optional JSON body."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass
class Table:
    """A titled table; ``note`` is one line shown under it in human formats."""

    title: str
    frame: pl.DataFrame
    note: str | None = None
    human: bool = True  # False: a table for scripts only (CSV, --table), not shown in table/markdown/html


@dataclass
class Document:
    """What a command prints: a title, notes (caveats, warnings), tables, and an optional JSON body."""

    title: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] | None = None
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (title, text to copy verbatim)

    def schema(self) -> str:
        """The schema name of the JSON body: the command's own (``tracekit.report/v2``, ...) when it names
        one, else ``tracekit.<command>/v1`` from the title (``tracekit kernels`` -> ``tracekit.kernels/v1``)."""
        if self.data is not None and isinstance(self.data.get("schema"), str):
            return self.data["schema"]
        words = self.title.split()
        command = words[1].rstrip(":") if len(words) > 1 and words[0] == "tracekit" else "document"
        return f"tracekit.{command}/v1"

    def human_tables(self) -> list[Table]:
        return [t for t in self.tables if t.human]

    def json_body(self) -> dict[str, Any]:
        """The JSON document: the command's own data, or its tables by title; always with its schema first."""
        if self.data is not None:
            return {"schema": self.schema(), **self.data}
        body: dict[str, Any] = {"schema": self.schema()}
        body |= {t.title: t.frame.to_dicts() for t in self.tables if t.human}
        if self.notes:
            body["notes"] = self.notes
        return body


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None: JSON has no such numbers (a strict parser
    refuses them), and a missing figure is null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows of dicts as a table; a key/value table's values become text (they mix types)."""
    if rows and "value" in rows[0]:
        rows = [{**r, "value": str(r["value"])} for r in rows]
    return pl.DataFrame(rows, infer_schema_length=None)


def ms_value(ns: float | None, digits: int = 3) -> float | None:
    """Nanoseconds as milliseconds for a table cell (None stays None); CSV turns them back into integer ns
    (to the microsecond these 3 decimals keep)."""
    return None if ns is None else round(ns / 1e6, digits)


def ms_text(ns: int | float | None) -> str:
    """Milliseconds with 3 decimals, for sentences (one precision per unit, as the tables print ms)."""
    return "n/a" if ns is None else f"{ns / 1e6:.3f}"


def pct_value(x: float | None) -> float | None:
    """A fraction as a percentage with one decimal for a table cell (None stays None)."""
    return None if x is None else round(100 * x, 1)
