"""The reader registry: every input format tracekit reads, declared once.

Each ``ReaderSpec`` names its format, the file names it takes, a content check over the file's head (a
SQLite file is told by its tables, JSON by its top-level keys) and its read function, imported on use.
Detection, the accepted suffixes, directory scanning and the "not a trace" message all derive from
``READERS``: a new format is one reader module plus one entry here, and no analysis module changes.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputError

if TYPE_CHECKING:
    import duckdb

# A reader fills the store tables of a DuckDB connection (imported with the reader, not here: listing
# formats, or keying a cached report on its inputs, loads no DuckDB).
Reader = Callable[[Path, "duckdb.DuckDBPyConnection"], None]

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
SNIFF_BYTES = 1 << 20  # how much of a (decompressed) file the content checks see


@dataclass(frozen=True)
class Head:
    """What the content checks see of a file: its first bytes as stored, the first MiB of its content
    (decompressed when gzip) and, for a SQLite file, the names of its tables and views."""

    path: Path
    raw: bytes

    @cached_property
    def is_sqlite(self) -> bool:
        return self.raw.startswith(SQLITE_MAGIC)

    @cached_property
    def content(self) -> bytes:
        """The first MiB of the content; InputError for a gzip stream damaged there."""
        if not self.raw.startswith(GZIP_MAGIC):
            with self.path.open("rb") as f:
                return f.read(SNIFF_BYTES)
        inflate = zlib.decompressobj(wbits=31)  # a gzip member; a cut stream gives what came before the cut
        out = b""
        try:
            with self.path.open("rb") as f:
                while len(out) < SNIFF_BYTES and (block := f.read(1 << 16)):
                    out += inflate.decompress(block, SNIFF_BYTES - len(out))
        except zlib.error as exc:
            raise InputError(f"{self.path}: corrupt gzip ({exc}); copy the file again") from None
        return out

    @cached_property
    def tables(self) -> frozenset[str] | None:
        """Tables and views of a SQLite file: empty when it is none, None when it is SQLite that cannot be
        listed (damaged: the first SQLite reader then says how)."""
        if not self.is_sqlite:
            return frozenset()
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                return frozenset(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN "
                                                          "('table', 'view')"))
            finally:
                db.close()
        except sqlite3.Error:
            return None


@dataclass(frozen=True)
class ReaderSpec:
    """One input format: its name, what it is, the file names it takes, its content check and its reader."""

    name: str
    describes: str  # what a user calls such a file, for messages ("an Nsight Systems SQLite export")
    suffixes: tuple[str, ...]
    accepts: Callable[[Head], bool]  # detection: this reader reads (or explains) such a file
    reader_path: str  # "module:function", imported on use so start-up loads no reader
    hint: str = ""  # how to produce this format from a file tracekit cannot read, for the "not a trace" message
    confirms: Callable[[Head], bool] | None = None  # directory scans: stricter than accepts (None: the same)
    unconfirmed: str = ""  # why a file it accepts but does not confirm is skipped in a directory
    mismatch: str = ""  # a file of its container type (SQLite) that is not this format: "not <mismatch>"

    def reader(self) -> Reader:
        module, _, function = self.reader_path.partition(":")
        return getattr(import_module(module), function)


def _is_nsys(head: Head) -> bool:
    if head.tables is None:
        return True  # damaged SQLite: the Nsight reader says how (truncated, not a database, ...)
    return "StringIds" in head.tables and any(
        t.startswith("CUPTI_ACTIVITY_KIND_") or t.startswith("META_DATA_") or t == "TARGET_INFO_GPU"
        for t in head.tables)


def _is_rocpd(head: Head) -> bool:
    return bool(head.tables) and any(t == "rocpd_metadata" or t.startswith("rocpd_metadata_") for t in head.tables)


def _json_text(head: Head) -> bytes:
    """The sniffed content from its first JSON character on (a UTF-8 byte-order mark and whitespace skipped)."""
    return head.content.removeprefix(UTF8_BOM).lstrip()


def _is_json(head: Head) -> bool:
    return not head.is_sqlite and _json_text(head)[:1] in (b"{", b"[")


def _is_rocprof_json(head: Head) -> bool:
    return _is_json(head) and b'"rocprofiler-sdk-tool"' in head.content[:4096]


def _is_xplane(head: Head) -> bool:
    """An ``.xplane.pb`` file: binary, neither SQLite nor gzip (the reader checks it is an XSpace)."""
    return head.path.name.endswith(".xplane.pb") and not head.is_sqlite and not head.raw.startswith(GZIP_MAGIC)


def _is_nsys_rep(head: Head) -> bool:
    return head.path.name.endswith(".nsys-rep") and not head.is_sqlite


def _no_export_beside(head: Head) -> bool:
    """A report without its SQLite export beside it (nsys writes both; a directory scan reads the export)."""
    return not head.path.with_name(head.path.name.removesuffix(".nsys-rep") + ".sqlite").exists()


def _has_trace_events(head: Head) -> bool:
    """JSON whose first MiB shows trace events: a ``traceEvents`` key, or a bare list of events with ``ph``."""
    text = _json_text(head)
    return b'"traceEvents"' in text or (text[:1] == b"[" and b'"ph"' in text)


# In detection order: the first reader whose check accepts a file reads it, so the more specific come first
# (the Kineto reader takes any other JSON, to say what is missing from it).
READERS: tuple[ReaderSpec, ...] = (
    ReaderSpec("nsys", "an Nsight Systems SQLite export", (".sqlite",), _is_nsys, "tracekit.parsers.nsys:read_nsys",
               "export .nsys-rep files with `nsys export --type sqlite`",
               mismatch="an Nsight Systems export (no StringIds/CUPTI tables)"),
    ReaderSpec("rocpd", "a rocprofv3 rocpd SQLite database", (".db", ".sqlite"), _is_rocpd,
               "tracekit.parsers.rocpd:read_rocpd", mismatch="a rocpd database (no rocpd_metadata table)"),
    ReaderSpec("rocprofv3-json", "rocprofv3 JSON results", (".json", ".json.gz"), _is_rocprof_json,
               "tracekit.parsers.rocprof_json:read_rocprof_json"),
    ReaderSpec("xplane", "a JAX/XLA XPlane profile (.xplane.pb)", (".xplane.pb",), _is_xplane,
               "tracekit.parsers.xplane:read_xplane"),
    ReaderSpec("nsys-rep", "an Nsight Systems report (.nsys-rep)", (".nsys-rep",), _is_nsys_rep,
               "tracekit.parsers.nsys_rep:read_nsys_rep", confirms=_no_export_beside,
               unconfirmed="its SQLite export beside it is read instead"),
    ReaderSpec("kineto", "a PyTorch profiler JSON trace", (".json", ".json.gz"), _is_json,
               "tracekit.parsers.kineto:read_kineto", confirms=_has_trace_events,
               unconfirmed="not a profiler trace (no traceEvents)"),
)


def spec(name: str) -> ReaderSpec:
    """The registered format of that name."""
    for s in READERS:
        if s.name == name:
            return s
    raise ValueError(f"unknown trace format {name!r}")


def trace_suffixes() -> tuple[str, ...]:
    """Every file name ending some reader takes (what a directory input is scanned for)."""
    return tuple(dict.fromkeys(s for r in READERS for s in r.suffixes))


def _expected() -> str:
    """The 'expected ...' part of a not-a-trace message, with each format's hint."""
    hints = "; ".join(r.hint for r in READERS if r.hint)
    return f"expected {' or '.join(r.describes for r in READERS)}" + (f"); {hints}" if hints else ")")


def head_of(path: Path) -> Head:
    """The file's head; InputError for a path that is missing, a directory, or empty."""
    if not path.exists():
        raise InputError(f"{path}: no such file; check the path")
    if path.is_dir():
        raise InputError(f"{path}: is a directory (give trace files, or a directory of them where allowed)")
    with path.open("rb") as f:
        raw = f.read(16)
    if not raw:
        raise InputError(f"{path}: empty file, not a trace; copy or export it again")
    return Head(path, raw)


def detect(path: Path) -> ReaderSpec:
    """The reader for ``path``, by content; InputError (one line naming the file) when none takes it."""
    head = head_of(path)
    for r in READERS:
        if r.accepts(head):
            return r
    if head.is_sqlite:
        sqlite_readers = [r for r in READERS if ".sqlite" in r.suffixes]
        kinds = [r.mismatch for r in sqlite_readers]
        raise InputError(f"{path}: SQLite file is {'neither ' if len(kinds) > 1 else 'not '}{' nor '.join(kinds)}; "
                         + "; ".join(r.hint for r in sqlite_readers if r.hint))
    raise InputError(f"{path}: not a trace ({_expected()}")


def skip_reason(path: Path) -> str | None:
    """Why a file in a directory input is no trace (notes and reports beside the rank files), or None for a
    trace some reader takes; an unreadable file counts as a trace, so its reader reports it."""
    try:
        head = head_of(path)
        found = next((r for r in READERS if r.accepts(head)), None)
    except (InputError, OSError):
        return None
    if found is None:
        return f"not a trace ({_expected()}"
    if found.confirms is not None and not found.confirms(head):
        return found.unconfirmed or f"not {found.describes}"
    return None
