"""Where rendered text goes: standard output (a closed pipe ends quietly, a full disk is one line) and the
width a table fits. Apart from the renderers (no polars or rich): a repeat `analyze` prints a cached
rendering through this module alone."""

from __future__ import annotations

import contextlib
import io
import os
import sys

import click

from tracekit.files import OutputError

FORMATS = ("table", "markdown", "csv", "json", "html")  # every renderer's format (report.render)
DEFAULT_WIDTH = 160  # a table's width when neither COLUMNS nor a terminal says otherwise
ZERO_WIDTH_FALLBACK = 80  # a terminal that reports 0 columns (`script`, some CI ptys): the classic width


def table_width() -> int:
    """The width a table should fit: ``COLUMNS``, else the terminal on stdout (or on stderr, when stdout is
    piped into a pager), else ``DEFAULT_WIDTH``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for fd in (1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
        return width if width > 0 else ZERO_WIDTH_FALLBACK  # a terminal of 0 columns would print nothing
    return DEFAULT_WIDTH


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_stdout(text: str) -> None:
    """Print ``text``: a reader that closed the pipe (``| head``) ends the command with exit 0, as for any
    Unix filter; any other failure (a full disk behind ``> file``, ``/dev/full``) is one line, exit 2."""
    try:
        click.echo(text, nl=False)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(0) from None
    except OSError as exc:
        _silence_stdout()
        raise OutputError(f"standard output: cannot write ({exc.strerror or type(exc).__name__}); free space "
                          "or write with --out to another place") from None
