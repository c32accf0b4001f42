"""The renderers of a ``Document``: ``--format table|markdown|csv|json|html``, to stdout or ``--out FILE``.

A command builds a ``Document`` (titled polars tables plus, optionally, a JSON document of its own)
and calls ``emit``. Text that came from a trace is untrusted: every renderer makes it inert (control
characters and ANSI escapes shown escaped, Markdown and HTML markup escaped). The human formats fit the
reader: a table fits the terminal (``COLUMNS``, else the width of the terminal on stdout or stderr),
long names are shortened in the middle so their distinguishing tail stays, nanoseconds print as plain
integers, milliseconds with 3 decimals and percentages with 1. JSON and CSV keep every name whole and
every number as is.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import click
import polars as pl
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from tracekit.errors import InputError
from tracekit.files import write_atomically
from tracekit.report.document import Document, Table, finite
from tracekit.report.output import FORMATS as FORMATS  # every format: defined beside the output, light to load
from tracekit.report.output import table_width, write_stdout
from tracekit.report.text import inert, inert_lines, markdown_escape, shorten, starts_formula

MARKDOWN_NAME_CHARS = 120  # a Markdown cell longer than this is shortened in the middle
MIN_NAME_CHARS = 16  # a name column is never squeezed below this in a table

_NS_COLUMN = re.compile(r"(^|[ _(])ns\)?$")
_MS_COLUMN = re.compile(r"(^|[ _(])ms($|[ _)])")


def column_unit(name: str) -> str | None:
    """'ns', 'ms' or '%' when a column's name says its values are in that unit."""
    if _NS_COLUMN.search(name):
        return "ns"
    if name.endswith(" GB"):
        return "GB"
    return "ms" if _MS_COLUMN.search(name) else "%" if name.endswith("%") else None


def _number(value: float) -> str:
    """A float without an exponent where one is not needed."""
    if not math.isfinite(value):
        return str(value)
    size = abs(value)
    if size == 0:
        return "0"
    if size >= 1e6:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:,.1f}"
    return f"{value:.4g}" if size >= 1e-3 else f"{value:.3g}"


def _cell(value: object, unit: str | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value) if unit == "ns" else f"{value:,}"
    if isinstance(value, float):
        if unit == "ns" and math.isfinite(value):
            return str(round(value))
        if unit in ("ms", "GB") and math.isfinite(value):
            return f"{value:,.3f}"
        if unit == "%" and math.isfinite(value):
            return f"{value:,.1f}"
        return _number(value)
    return inert(value)


_BYTES_NAME = re.compile(r"(^|_)bytes(_per_gpu)?$")
_SHARE_NAME = re.compile(r"^(mfu|mbu)(_|$)")


def _renamed(name: str) -> tuple[str, str] | None:
    """(the name a person reads, the human unit) for a name in ns, bytes or a utilisation fraction."""
    if column_unit(name) == "ns":
        return re.sub(r"(^|[ _(])ns(\)?)$", lambda m: (" " if m.group(1) == "_" else m.group(1)) + "ms" +
                      m.group(2), name).strip(), "ms"
    if _BYTES_NAME.search(name):
        return _BYTES_NAME.sub(lambda m: (" GB" if m.group(1) else "GB") + (" per gpu" if m.group(2) else ""),
                               name).strip(), "GB"
    if _SHARE_NAME.search(name):
        return f"{name} %", "%"
    return None


_SCALE = {"ms": 1e-6, "GB": 1e-9, "%": 100.0}


def _human_text(text: str | None, unit: str) -> str | None:
    try:
        value = float(text) * _SCALE[unit] if text is not None else None
    except ValueError:
        return text
    return None if value is None else f"{value:,.1f}" if unit == "%" else f"{value:,.3f}"


def human_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as a person reads it: nanoseconds in milliseconds, bytes in GB (3 decimals), MFU/MBU in %,
    the names saying so; in a key/value table the values of such keys likewise (JSON and CSV keep ns, bytes
    and fractions)."""
    cols = frame.columns
    if "value" in cols and cols[0] != "value" and frame[cols[0]].dtype == pl.String:
        key = cols[0]
        keys = frame[key].to_list()
        renamed = [_renamed(k) if k is not None else None for k in keys]
        if any(renamed):
            values = frame["value"].cast(pl.String).to_list()
            frame = frame.with_columns(
                pl.Series(key, [r[0] if r else k for k, r in zip(keys, renamed, strict=True)]),
                pl.Series("value", [_human_text(v, r[1]) if r else v for v, r in zip(values, renamed, strict=True)],
                          dtype=pl.String))
    units = {c: r for c in cols if frame[c].dtype.is_numeric() and (r := _renamed(c)) is not None}
    if not units:
        return frame
    return frame.with_columns([(pl.col(c).cast(pl.Float64) * _SCALE[u]).alias(c) for c, (_, u) in units.items()]
                              ).rename({c: n for c, (n, _) in units.items()})


def _cells(frame: pl.DataFrame) -> list[list[str]]:
    """Every cell of ``frame`` as display text, column by column."""
    return [[_cell(v, column_unit(c)) for v in frame[c].to_list()] for c in frame.columns]


def render_markdown(doc: Document) -> str:
    lines = [f"# {markdown_escape(inert(doc.title))}", ""]
    lines += [f"- {markdown_escape(inert(n))}" for n in doc.notes]
    for t in doc.human_tables():
        lines += ["", f"## {markdown_escape(inert(t.title))}", ""]
        if t.note:
            lines += [markdown_escape(inert(t.note)), ""]
        frame = human_frame(t.frame)
        cols = frame.columns
        lines.append("| " + " | ".join(markdown_escape(inert(c)) for c in cols) + " |")
        lines.append("|" + "|".join("---:" if frame[c].dtype.is_numeric() else "---" for c in cols) + "|")
        columns = [[shorten(v, MARKDOWN_NAME_CHARS) for v in col] for col in _cells(frame)]
        for row in zip(*columns, strict=True):
            lines.append("| " + " | ".join(markdown_escape(v) for v in row) + " |")
    for title, text in doc.blocks:
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        lines += ["", f"**{markdown_escape(inert(title))}**", "", fence + "sh", inert_lines(text), fence]
    return "\n".join(lines) + "\n"


def _csv_cell(text: str) -> str:
    """A CSV cell that is inert in a terminal (control characters escaped) and in a spreadsheet (a cell
    that could start a formula, also after spaces or as a full-width '＝', gets a leading apostrophe, the
    OWASP-recommended neutraliser)."""
    text = inert(text)
    return "'" + text if starts_formula(text) else text


def csv_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """A table as scripts load it: text cells inert, snake_case headers, and times in integer nanoseconds
    as in the JSON (a ``... ms`` column becomes ``..._ns``)."""
    columns = []
    for name in frame.columns:
        col = frame[name]
        if col.dtype == pl.String:
            col = col.map_elements(_csv_cell, return_dtype=pl.String, skip_nulls=True)
        header = re.sub(r"[^0-9A-Za-z%]+", "_", inert(name)).strip("_").lower() or "column"
        if column_unit(name) == "ms" and col.dtype.is_numeric():
            col = (col.cast(pl.Float64) * 1e6).round(0).cast(pl.Int64)
            header = re.sub(r"(^|_)ms($|_)", r"\1ns\2", header)
        columns.append(col.alias(header))
    return pl.DataFrame(columns) if columns else pl.DataFrame()


def table_slug(title: str) -> str:
    """The name ``--table`` takes for a table: its title in lowercase words joined by '-'."""
    return re.sub(r"[^0-9a-z]+", "-", title.lower()).strip("-") or "table"


def pick_table(doc: Document, name: str | None) -> Table:
    """The table ``--table NAME`` names (by slug, a prefix of it, or number from 1); the first without one."""
    tables = doc.tables
    if not tables:
        raise InputError(f"{doc.title}: no table to write as CSV; use --format json")
    if name is None:
        return tables[0]
    slugs = [table_slug(t.title) for t in tables]
    if name.isdigit() and 1 <= int(name) <= len(tables):
        return tables[int(name) - 1]
    matches = [t for t, s in zip(tables, slugs, strict=True) if s == name] or \
              [t for t, s in zip(tables, slugs, strict=True) if s.startswith(name)]
    if len(matches) != 1:
        raise InputError(f"--table {name[:60]}: {'no' if not matches else 'more than one'} table of this output "
                         f"is named so; use one of: {', '.join(slugs)}")
    return matches[0]


def render_csv(doc: Document, table: str | None = None) -> str:
    """One table as CSV (the first, or the one ``table`` names): no section lines, so duckdb.read_csv,
    polars.read_csv and pandas load it as it is."""
    return csv_frame(pick_table(doc, table).frame).write_csv()


def render_json(doc: Document) -> str:
    return json.dumps(finite(doc.json_body()), indent=2, ensure_ascii=True, default=str, allow_nan=False) + "\n"


def _fit(widths: list[int], shrinkable: list[bool], total: int) -> list[int]:
    """Column widths within ``total`` characters of content: the others keep theirs, and the shrinkable
    (text) columns share the rest evenly (water-filling: a narrow one keeps its width and leaves its unused
    share to the wider ones), none below ``MIN_NAME_CHARS``."""
    fixed = sum(w for w, s in zip(widths, shrinkable, strict=True) if not s)
    flexible = sorted((w, i) for i, (w, s) in enumerate(zip(widths, shrinkable, strict=True)) if s)
    budget, out = total - fixed, list(widths)
    for k, (w, i) in enumerate(flexible):  # water-filling: narrow columns keep their width
        share = max(MIN_NAME_CHARS, budget // (len(flexible) - k))
        out[i] = min(w, share)
        budget -= out[i]
    return out


def _rich_table(t: Table, width: int) -> RichTable:
    """One table whose rows fit ``width`` columns: long text cells shortened in the middle, one line each."""
    frame = human_frame(t.frame)
    columns = _cells(frame)
    numeric = [frame[c].dtype.is_numeric() for c in frame.columns]
    natural = [max([cell_len(c)] + [cell_len(v) for v in col]) for c, col in zip(frame.columns, columns,
                                                                                 strict=True)]
    fitted = _fit(natural, [not n for n in numeric], width - 3 * len(natural) - 1)  # borders and padding
    rt = RichTable()
    for c, is_numeric, w, n in zip(frame.columns, numeric, fitted, natural, strict=True):
        if is_numeric:  # a number is never cut: when they alone are too wide, the line runs long
            rt.add_column(Text(c), justify="right", no_wrap=True, min_width=n)
        else:
            rt.add_column(Text(c), justify="left", no_wrap=True, max_width=max(w, 1), overflow="ellipsis")
    cut = [[v if n else shorten(v, w) for v in col] for col, n, w in zip(columns, numeric, fitted, strict=True)]
    for row in zip(*cut, strict=True):
        rt.add_row(*(Text(v) for v in row))
    return rt


def render_table(doc: Document, console: Console) -> None:
    console.print(Text(inert(doc.title), style="bold"))
    for n in doc.notes:
        console.print(Text("• " + inert(n)))
    for t in doc.human_tables():
        console.print(Text(inert(t.title), style="bold"))  # above the table: a title never wraps to its width
        console.print(_rich_table(t, console.width), crop=False)  # numbers too wide: the line runs long
        if t.note:
            console.print(Text(inert(t.note)))
    for title, text in doc.blocks:
        console.print(Text(inert(title), style="bold"))
        console.print(Text(inert_lines(text)), soft_wrap=True)


def render(doc: Document, fmt: str, width: int | None = None, table: str | None = None,
           color: bool = False) -> str:
    """The document as text in one of FORMATS (``table``: the CSV table ``--table`` chose)."""
    if fmt == "markdown":
        return render_markdown(doc)
    if fmt == "csv":
        return render_csv(doc, table)
    if fmt == "json":
        return render_json(doc)
    if fmt == "html":
        from tracekit.report.html import document_html

        return document_html(doc)
    buf = io.StringIO()
    render_table(doc, Console(file=buf, width=width or table_width(), force_terminal=color,
                              color_system="standard" if color else None, highlight=False))
    return buf.getvalue()


def _table_choice() -> str | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get("tracekit.table")


def rendering(doc: Document, fmt: str, to_file: bool) -> tuple[str, str | None]:
    """What ``emit`` writes (for a file, or for standard output: in colour on a terminal) and the note it
    prints on stderr first, None when there is none (CSV of a document with several tables names the others)."""
    table = _table_choice()
    note = None
    if fmt == "csv" and table is None and len(doc.tables) > 1:
        others = ", ".join(table_slug(t.title) for t in doc.tables[1:])
        note = (f"tracekit: note: CSV holds one table, {table_slug(doc.tables[0].title)}; the others with "
                f"--table NAME: {others}")
    if to_file:
        return render(doc, fmt, table=table), note
    color = fmt == "table" and sys.stdout.isatty()
    return render(doc, fmt, width=table_width() if fmt == "table" else None, table=table, color=color), note


def emit(doc: Document, fmt: str, out_path: Path | None) -> None:
    """Print the document, or write it atomically to ``out_path``; CSV of a document with several tables
    writes the table ``--table`` names, or the first with a line on stderr naming the others."""
    text, note = rendering(doc, fmt, out_path is not None)
    if note is not None:
        click.echo(note, err=True)
    if out_path is not None:
        write_atomically(out_path, text, option="--out")
        return
    write_stdout(text)
