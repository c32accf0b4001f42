"""The trace store: one cached DuckDB database per input file, read together as one.

Each input file is ingested once into ``<cache>/<key>.duckdb``, where the key is the file's identity
(size, modification time and a hash of its first and last 64 KiB) and the store schema version. The
database is built under a temporary name and renamed into place, so a killed ingest never leaves a
store that a later run reads as complete; a damaged store is discarded and rebuilt. ``open_store``
attaches the per-file stores read-only and exposes every table as a view over all of them with the
rank each file was assigned.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from tracekit import __version__
from tracekit.errors import InputError
from tracekit.parsers import detect_format, reader_for
from tracekit.parsers.schema import STORE_SCHEMA_VERSION, TABLES, create_tables

TRACE_SUFFIXES = (".sqlite", ".json", ".json.gz")
_SAMPLE_BYTES = 64 * 1024


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tracekit`` (``~/.cache/tracekit`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracekit"


def file_key(path: Path) -> str:
    """A key that changes whenever the file's content or the store format changes."""
    st = path.stat()
    h = hashlib.sha256(f"{STORE_SCHEMA_VERSION}|{__version__}|{st.st_size}|{st.st_mtime_ns}".encode())
    with path.open("rb") as f:
        h.update(f.read(_SAMPLE_BYTES))
        if st.st_size > _SAMPLE_BYTES:
            f.seek(max(st.st_size - _SAMPLE_BYTES, _SAMPLE_BYTES))
            h.update(f.read(_SAMPLE_BYTES))
    return h.hexdigest()[:32]


def expand_inputs(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for the trace files directly inside it, sorted by name."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(c for c in p.iterdir() if c.is_file() and c.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise InputError(f"{p}: directory holds no trace files (*.sqlite, *.json, *.json.gz)")
            files.extend(found)
        else:
            files.append(p)
    return files


def _manifest(db: Path) -> Path:
    return db.with_suffix(".json")


def _is_complete(db: Path) -> bool:
    """True when ``db`` has its manifest, the size the manifest recorded, and the schema version's mark.

    The size check catches a store cut short by a crash or a full disk, which can still open."""
    try:
        manifest = json.loads(_manifest(db).read_text())
        if manifest.get("size_bytes") != db.stat().st_size:
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


def _remove_db(db: Path) -> None:
    for p in (_manifest(db), db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)


def _write_manifest(db: Path, manifest: dict[str, object]) -> None:
    """Write the store's manifest atomically; the store counts as complete only once it exists."""
    fd, tmp = tempfile.mkstemp(prefix=f".{db.stem}.", suffix=".tmp.json", dir=db.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f)
    os.replace(tmp, _manifest(db))


@dataclass
class IngestResult:
    """One input file's store."""

    source: Path
    db: Path
    fmt: str
    reused: bool
    seconds: float


def ingest_file(path: Path, cache_dir: Path) -> IngestResult:
    """Ingest one file into the cache (or reuse its stored result) and return where the store is."""
    t0 = time.perf_counter()
    fmt = detect_format(path)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--cache-dir {cache_dir}: cannot create ({exc.strerror})") from None
    target = cache_dir / f"{file_key(path)}.duckdb"
    if target.exists():
        if _is_complete(target):
            return IngestResult(path, target, fmt, True, time.perf_counter() - t0)
        _remove_db(target)  # damaged or from another schema version: rebuild
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=".tmp.duckdb", dir=cache_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()  # DuckDB must create the file itself
    try:
        con = duckdb.connect(str(tmp))
        try:
            create_tables(con)
            reader_for(fmt)(path, con)
            con.execute("CREATE TABLE store_info AS SELECT ? AS schema_version, ? AS tracekit_version",
                        [STORE_SCHEMA_VERSION, __version__])
            con.execute("CHECKPOINT")
        finally:
            con.close()
        size = tmp.stat().st_size
        os.replace(tmp, target)
        _write_manifest(target, {"size_bytes": size, "schema_version": STORE_SCHEMA_VERSION,
                                 "source": str(path), "format": fmt})
    except InputError:
        _remove_db(tmp)
        raise
    except OSError as exc:
        _remove_db(tmp)
        raise InputError(f"{path}: could not write its store in {cache_dir} ({exc.strerror})") from None
    except Exception as exc:  # a reader bug or an input no check foresaw: still one clean line
        _remove_db(tmp)
        detail = " ".join(str(exc).split())[:300]
        raise InputError(f"{path}: could not read as {fmt} trace ({type(exc).__name__}: {detail})") from None
    return IngestResult(path, target, fmt, False, time.perf_counter() - t0)


@dataclass
class StoredFile:
    """A file in an open store, with the rank it was given."""

    source: Path
    db: Path
    fmt: str
    rank: int
    reused: bool


@dataclass
class Store:
    """Every input's tables as views over all files (``kernels``, ``api_calls``, ...), by rank."""

    con: duckdb.DuckDBPyConnection
    files: list[StoredFile]
    warnings: list[str] = field(default_factory=list)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        self.con.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _assign_ranks(con: duckdb.DuckDBPyConnection, results: Sequence[IngestResult]) -> tuple[list[int], list[str]]:
    """Ranks from the files themselves; files that name none get the lowest free ranks in order given."""
    own: list[int | None] = []
    for i in range(len(results)):
        row = con.execute(f"SELECT max(rank) FROM f{i}.trace_info").fetchone()
        own.append(None if row is None else row[0])
    seen: dict[int, Path] = {}
    for r, res in zip(own, results, strict=True):
        if r is None:
            continue
        if r in seen:
            raise InputError(f"{seen[r]} and {res.source}: both claim rank {r}; give one file per rank")
        seen[r] = res.source
    warnings: list[str] = []
    ranks: list[int] = []
    free = (r for r in range(len(results) + len(seen)) if r not in seen)
    for r, res in zip(own, results, strict=True):
        if r is None:
            r = next(free)
            if res.fmt == "kineto" and len(results) > 1:
                warnings.append(f"{res.source}: no distributedInfo.rank; given rank {r} from the order of inputs")
        ranks.append(r)
    return ranks, warnings


def open_store(
    paths: Sequence[Path], cache_dir: Path | None = None, use_cache: bool = True, jobs: int = 1
) -> Store:
    """Ingest (or reuse) every input and open them together as one store."""
    files = expand_inputs(paths)
    if not files:
        raise InputError("no input files given")
    tmp = None
    if not use_cache:
        tmp = tempfile.TemporaryDirectory(prefix="tracekit-")
        cache_dir = Path(tmp.name)
    cache_dir = cache_dir or default_cache_dir()
    try:
        if jobs > 1 and len(files) > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(ingest_file, files, [cache_dir] * len(files)))
        else:
            results = [ingest_file(f, cache_dir) for f in files]
        con = duckdb.connect()
        for i, res in enumerate(results):
            con.execute(f"ATTACH ? AS f{i} (READ_ONLY)", [str(res.db)])
        ranks, warnings = _assign_ranks(con, results)
        for table in TABLES:
            parts = [f"SELECT * REPLACE (CAST({r} AS INTEGER) AS rank) FROM f{i}.{table}" for i, r in enumerate(ranks)]
            con.execute(f"CREATE VIEW {table} AS " + " UNION ALL ".join(parts))
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    stored = [StoredFile(r.source, r.db, r.fmt, rank, r.reused) for r, rank in zip(results, ranks, strict=True)]
    return Store(con, stored, warnings, tmp)
