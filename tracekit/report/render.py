"""The renderers of a ``Document``: ``--format table|markdown|csv|json|html``, to stdout or ``--out FILE``.

A command builds a ``Document`` (titled polars tables plus, optionally, a JSON document of its own)
and calls ``emit``. Text that came from a trace is untrusted: every renderer makes it inert (control
characters and ANSI escapes shown escaped, Markdown and HTML markup escaped, very long names cut in
the human formats only).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import click
import polars as pl
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from tracekit.files import write_atomically
from tracekit.report.document import Document
from tracekit.report.text import inert, markdown_escape

FORMATS = ("table", "markdown", "csv", "json", "html")
MAX_CELL_CHARS = 160

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")





def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return _cut(inert(value))



def render_markdown(doc: Document) -> str:
    lines = [f"# {markdown_escape(inert(doc.title))}", ""]
    lines += [f"- {markdown_escape(inert(n))}" for n in doc.notes]
    for t in doc.tables:
        lines += ["", f"## {markdown_escape(inert(t.title))}", ""]
        if t.note:
            lines += [markdown_escape(inert(t.note)), ""]
        cols = t.frame.columns
        lines.append("| " + " | ".join(markdown_escape(c) for c in cols) + " |")
        lines.append("|" + "|".join("---:" if t.frame[c].dtype.is_numeric() else "---" for c in cols) + "|")
        for row in t.frame.iter_rows():
            lines.append("| " + " | ".join(markdown_escape(_cell(v)) for v in row) + " |")
    for title, text in doc.blocks:
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        lines += ["", f"**{markdown_escape(inert(title))}**", "", fence + "sh", inert(text), fence]
    return "\n".join(lines) + "\n"


def _csv_cell(text: str) -> str:
    """A CSV cell that is inert in a terminal (control characters escaped) and in a spreadsheet (a cell
    that would start a formula gets a leading apostrophe, the OWASP-recommended neutraliser)."""
    text = inert(text)
    return "'" + text if text[:1] in _FORMULA_STARTS else text


def _inert_strings(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col(pl.String).map_elements(_csv_cell, return_dtype=pl.String, skip_nulls=True))


def render_csv(doc: Document) -> str:
    if len(doc.tables) == 1:
        return _inert_strings(doc.tables[0].frame).write_csv()
    parts = [f"# {inert(t.title)}\n{_inert_strings(t.frame).write_csv()}" for t in doc.tables]
    return "\n".join(parts)


def render_json(doc: Document) -> str:
    return json.dumps(doc.json_body(), indent=2, ensure_ascii=True, default=str) + "\n"


def render_table(doc: Document, console: Console) -> None:
    console.print(Text(inert(doc.title), style="bold"))
    for n in doc.notes:
        console.print(Text("• " + inert(n)))
    for t in doc.tables:
        rt = RichTable(title=Text(inert(t.title), style="bold"), title_justify="left")
        for c in t.frame.columns:
            rt.add_column(Text(c), justify="right" if t.frame[c].dtype.is_numeric() else "left")
        for row in t.frame.iter_rows():
            rt.add_row(*(Text(_cell(v)) for v in row))
        console.print(rt)
        if t.note:
            console.print(Text(inert(t.note)))
    for title, text in doc.blocks:
        console.print(Text(inert(title), style="bold"))
        console.print(Text(inert(text)), soft_wrap=True)



def render(doc: Document, fmt: str, width: int | None = None) -> str:
    """The document as text in one of FORMATS."""
    if fmt == "markdown":
        return render_markdown(doc)
    if fmt == "csv":
        return render_csv(doc)
    if fmt == "json":
        return render_json(doc)
    if fmt == "html":
        from tracekit.report.html import document_html

        return document_html(doc)
    buf = io.StringIO()
    render_table(doc, Console(file=buf, width=width or 200, force_terminal=False, color_system=None))
    return buf.getvalue()


def emit(doc: Document, fmt: str, out_path: Path | None) -> None:
    """Print the document, or write it atomically to ``out_path``."""
    if out_path is not None:
        write_atomically(out_path, render(doc, fmt))
        return
    if fmt == "table":
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=160)
        render_table(doc, console)
    else:
        click.echo(render(doc, fmt), nl=False)
