"""Readers: one per input format. Each writes one input file into the store's tables.

A reader is a function ``read(path, con) -> None``: ``con`` is a DuckDB connection in which
``schema.create_tables`` has already made every store table, empty. The reader inserts the file's
events with ``rank`` set to the rank the file itself names (NULL when it names none), and one
``trace_info`` row. It raises ``tracekit.errors.InputError`` (one line naming the file) on input it
cannot read, and records what it skipped in ``read_notes``. Readers know nothing of the floor model.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

import duckdb

from tracekit.errors import InputError

Reader = Callable[[Path, duckdb.DuckDBPyConnection], None]

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def detect_format(path: Path) -> str:
    """Return 'nsys' or 'kineto' from the file's first bytes; InputError otherwise."""
    if not path.exists():
        raise InputError(f"{path}: no such file; check the path")
    if path.is_dir():
        raise InputError(f"{path}: is a directory (give trace files, or a directory of them where allowed)")
    with path.open("rb") as f:
        head = f.read(16)
    if not head:
        raise InputError(f"{path}: empty file, not a trace; copy or export it again")
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as g:
                head = g.read(64)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path}: corrupt gzip ({exc}); copy the file again") from None
    if head.lstrip()[:1] in (b"{", b"["):
        return "kineto"
    raise InputError(
        f"{path}: not a trace (expected an Nsight Systems SQLite export or a PyTorch profiler JSON trace); "
        "export .nsys-rep files with `nsys export --type sqlite`"
    )


def reader_for(fmt: str) -> Reader:
    """The reader function of a format name."""
    if fmt == "nsys":
        from tracekit.parsers.nsys import read_nsys

        return read_nsys
    if fmt == "kineto":
        from tracekit.parsers.kineto import read_kineto

        return read_kineto
    raise ValueError(f"unknown trace format {fmt!r}")
