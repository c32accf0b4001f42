"""The store cache: where stores live, the key of an input file, and the manifest and lock that make a
published store complete and shared safely between processes."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tracekit import __version__
from tracekit.parsers.schema import STORE_SCHEMA_VERSION


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tracekit`` (``~/.cache/tracekit`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracekit"


def file_key(path: Path) -> str:
    """A key that changes whenever the file's content or the store format changes: a SHA-256 of the whole
    file (about 1.7 GB/s; under 4 % of an ingest on every trace measured, bench/bench_cache_key.py). Hashed
    once per process while the file's size, times and inode stay the same (the report cache and the store
    both ask)."""
    st = path.stat()
    return _content_key(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@functools.lru_cache(maxsize=4096)
def _content_key(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    with open(path, "rb") as f:
        content = hashlib.file_digest(f, "sha256").hexdigest()
    key = f"{STORE_SCHEMA_VERSION}|{__version__}|{size}|{content}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def crc32_of(path: Path) -> int:
    """CRC-32 of a whole file (about 2 GB/s): catches bytes damaged in place, which keep the size."""
    crc = 0
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def manifest_path(db: Path) -> Path:
    return db.with_suffix(".json")


def is_complete(db: Path) -> bool:
    """True when ``db`` has its manifest, the size the manifest recorded, and the schema version's mark.

    The size check catches a store cut short by a crash or a full disk, which can still open; the CRC-32
    catches bytes damaged in place, which DuckDB would only notice when a query reads that block."""
    try:
        manifest = json.loads(manifest_path(db).read_text())
        if manifest.get("size_bytes") != db.stat().st_size or manifest.get("crc32") != crc32_of(db):
            return False
    except (OSError, ValueError):
        return False
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return False
    try:
        row = con.execute("SELECT schema_version FROM store_info").fetchone()
        return row is not None and row[0] == STORE_SCHEMA_VERSION
    except duckdb.Error:
        return False
    finally:
        con.close()


@contextmanager
def store_lock(db: Path, exclusive: bool) -> Iterator[None]:
    """Hold ``<key>.lock``: publishing a store (rename, then manifest) is exclusive, checking one is shared,
    so a check never sees a new store beside the manifest of the store it replaced."""
    with open(db.with_suffix(".lock"), "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


def remove_db(db: Path) -> None:
    for p in (manifest_path(db), db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)


def write_manifest(db: Path, manifest: dict[str, object]) -> None:
    """Write the store's manifest atomically; the store counts as complete only once it exists."""
    fd, tmp = tempfile.mkstemp(prefix=f".{db.stem}.", suffix=".tmp.json", dir=db.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f)
    os.replace(tmp, manifest_path(db))
