"""The trace store: one cached DuckDB database per input file, read together as one.

Each input file is ingested once into ``<cache>/<key>.duckdb``, where the key is a SHA-256 of the file's
whole content (so no edit in place, whatever it does to the size, mtime or ends, reuses a stale store;
hashing costs under 4 % of an ingest, bench/bench_cache_key.py) and the store schema version. The
database is built in a private temporary folder and renamed into place, so a killed ingest never leaves
a store that a later run reads as complete, and two processes sharing a cache never build into one
file; a damaged store is discarded and rebuilt. ``open_store``
attaches the per-file stores read-only and exposes every table as a view over all of them with the
rank each file was assigned.

Without the cache (``--no-cache``) nothing is hashed and no manifest is written: each file is read into an
in-memory database attached to the store's connection, or, when several files are read in worker
processes, into a temporary file that the store attaches and removes when it closes.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from tracekit import __version__
from tracekit.errors import InputError
from tracekit.parsers import registry
from tracekit.parsers.schema import STORE_SCHEMA_VERSION, TABLES, create_tables, quiet
from tracekit.store.cache import (
    build_dir,
    clear_slot,
    crc32_of,
    default_cache_dir,
    file_identity,
    is_complete,
    remember_identity,
    remove_db,
    store_lock,
    write_manifest,
)
from tracekit.store.captures import captured_ranks, create_capture_views, split_captures
from tracekit.store.checks import capture_fingerprint, check_distinct_paths, drop_damaged_records, mixed_gpu_warning
from tracekit.store.expand import expand_inputs, skipped_inputs
from tracekit.store.ranks import assign_ranks, rank_sql
from tracekit.store.views import create_views


@dataclass
class IngestResult:
    """One input file's store."""

    source: Path
    db: Path
    fmt: str
    reused: bool
    seconds: float
    stages: dict[str, float] = field(default_factory=dict)  # seconds per ingest stage (see STAGES)


# Ingest stages, timed per file (and, for ``open``, per store) so a benchmark can name the slowest.
STAGES = ("identify", "read", "finish", "open")
#: Several stores on disk of at most this many bytes together are copied into memory when opened (``_combine``).
COPY_MAX_BYTES = 32 << 20


def _build_guarded(path: Path, fmt: str, cache_dir: Path | None, build: Callable[[], None]) -> None:
    """Run ``build`` (a reader into a store); an unforeseen failure becomes one clean line naming the file."""
    try:
        build()
    except InputError:
        raise
    except Exception as exc:  # a reader bug or an input no check foresaw: still one clean line
        if os.environ.get("TRACEKIT_DEBUG"):
            raise
        raise _ingest_error(exc, path, fmt, cache_dir) from None


def build_uncached(path: Path, db: Path) -> IngestResult:
    """Read ``path`` into a new store file ``db`` for this run only: no key, no manifest, no lock."""
    t0 = time.perf_counter()
    fmt = registry.detect(path).name
    stages: dict[str, float] = {"identify": time.perf_counter() - t0}
    _build_guarded(path, fmt, db.parent, lambda: _build_store(path, fmt, db, stages))
    return IngestResult(path, db, fmt, False, time.perf_counter() - t0, stages)


def read_in_memory(con: duckdb.DuckDBPyConnection, alias: str, path: Path) -> IngestResult:
    """Read ``path`` into a new in-memory database attached to ``con`` as ``alias`` (``--no-cache``)."""
    t0 = time.perf_counter()
    fmt = registry.detect(path).name
    current = con.execute("SELECT current_database()").fetchall()[0][0]
    con.execute(f"ATTACH ':memory:' AS {alias}")
    con.execute(f"USE {alias}")  # the reader writes unqualified table names

    def build() -> None:
        create_tables(con)
        registry.spec(fmt).reader()(path, con)
        drop_damaged_records(con, path)

    t1 = time.perf_counter()
    try:
        _build_guarded(path, fmt, None, build)
    finally:
        con.execute(f"USE {current}")
    stages = {"identify": t1 - t0, "read": time.perf_counter() - t1}
    return IngestResult(path, Path(":memory:"), fmt, False, time.perf_counter() - t0, stages)


def ingest_file(path: Path, cache_dir: Path) -> IngestResult:
    """Ingest one file into the cache (or reuse its stored result) and return where the store is."""
    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    fmt = registry.detect(path).name
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--cache-dir {cache_dir}: cannot create ({exc.strerror})") from None
    key, content = file_identity(path, cache_dir)  # read from the cache's memo while the file is unchanged
    target = cache_dir / f"{key}.duckdb"
    clear_slot(target)  # a folder where the store, manifest or lock belongs is set aside
    if target.exists():
        with store_lock(target, exclusive=False):
            complete = is_complete(target, content)
        if not complete:
            with store_lock(target, exclusive=True):
                complete = is_complete(target, content)  # another process may have just published it
                if not complete:
                    remove_db(target)  # damaged, another input's or from another schema version: rebuild
        if complete:
            remember_identity(path, cache_dir)
            stages["identify"] = time.perf_counter() - t0
            return IngestResult(path, target, fmt, True, stages["identify"], stages)
    # DuckDB must create the database file itself: it does so inside a folder that only this process
    # made (mkdtemp is atomic), so no other process can pick the same name between a check and the create.
    stages["identify"] = time.perf_counter() - t0

    def build_and_publish(tmp_dir: Path) -> None:
        tmp = _build_store(path, fmt, tmp_dir / "store.duckdb", stages, content)
        stages["publish"] = time.perf_counter()
        size, crc = tmp.stat().st_size, crc32_of(tmp)
        with store_lock(target, exclusive=True):
            os.replace(tmp, target)
            write_manifest(target, {"size_bytes": size, "crc32": crc, "schema_version": STORE_SCHEMA_VERSION,
                                     "source": str(path), "format": fmt, "input_sha256": content})

    with build_dir(cache_dir, target.stem) as tmp_dir:  # locked while building; killed builds' are swept
        _build_guarded(path, fmt, cache_dir, lambda: build_and_publish(tmp_dir))
    stages["finish"] += time.perf_counter() - stages.pop("publish")  # store_info, checkpoint, rename, manifest
    remember_identity(path, cache_dir)  # its SHA-256, for the next run: only once its store is published
    return IngestResult(path, target, fmt, False, time.perf_counter() - t0, stages)


def _build_store(path: Path, fmt: str, db: Path, stages: dict[str, float], content: str = "") -> Path:
    """Read ``path`` into a new store at ``db``; the read and finish stages are timed into ``stages``."""
    con = quiet(duckdb.connect(str(db)))
    try:
        create_tables(con)
        t1 = time.perf_counter()
        registry.spec(fmt).reader()(path, con)
        drop_damaged_records(con, path)
        t2 = time.perf_counter()
        stages["read"] = t2 - t1
        con.execute("CREATE TABLE store_info AS SELECT ? AS schema_version, ? AS tracekit_version, "
                    "? AS input_sha256", [STORE_SCHEMA_VERSION, __version__, content])
        con.execute("CHECKPOINT")
        stages["finish"] = time.perf_counter() - t2
    finally:
        con.close()
    return db


def _ingest_error(exc: Exception, path: Path, fmt: str, cache_dir: Path | None) -> InputError:
    """The one-line error for an unforeseen failure while ingesting ``path`` (``cache_dir`` None: in memory)."""
    if isinstance(exc, OSError):
        if cache_dir is None:
            return InputError(f"{path}: could not read it ({exc.strerror}); check the file")
        return InputError(f"{path}: could not write its store in {cache_dir} ({exc.strerror}); free space "
                          "there or give --cache-dir elsewhere")
    if isinstance(exc, duckdb.IOException) and ("space" in str(exc).lower() or "disk" in str(exc).lower()):
        return InputError(f"{path}: could not write its store in {cache_dir} (no space left on the device); free "
                          "space there or give --cache-dir elsewhere")
    detail = " ".join(str(exc).split())[:300]
    if isinstance(exc, duckdb.OutOfRangeException | duckdb.ConversionException):
        return InputError(f"{path}: a time or id does not fit in a 64-bit integer ({detail}); the trace is "
                          "damaged: export or capture it again")
    return InputError(f"{path}: could not read as {fmt} trace ({type(exc).__name__}: {detail}); the file "
                      "is damaged or from an unsupported version: export it again (TRACEKIT_DEBUG=1 shows "
                      "where it failed)")


@dataclass
class StoredFile:
    """A file in an open store, with the rank it was given."""

    source: Path
    db: Path
    fmt: str
    rank: int  # the file's first rank
    reused: bool
    ranks: tuple[int, ...] = ()  # every rank of the file (an nsys export holds one per GPU process)


@dataclass
class Store:
    """Every input's tables as views over all files (``kernels``, ``api_calls``, ...), by rank."""

    con: duckdb.DuckDBPyConnection
    files: list[StoredFile]
    warnings: list[str] = field(default_factory=list)
    _tmp: tempfile.TemporaryDirectory[str] | None = None
    stages: dict[str, float] = field(default_factory=dict)  # ingest seconds per stage, summed over files
    cached: bool = True  # False with --no-cache: the stores live for this run only (nothing to cache beside)
    jobs: int = 1  # how many files were read, and how many ranks are analysed, at once
    captures: list[StoredFile] = field(default_factory=list)  # graph-capture traces beside replays (no ranks)

    def close(self) -> None:
        self.con.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Distinct:
    """Keeps the attached stores f0, f1, ... of distinct captures: a file holding the very same kernels as an
    earlier one is detached, with a warning, and its alias taken by the next file."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.kept: list[IngestResult] = []
        self.seen: dict[tuple[object, ...], Path] = {}
        self.warnings: list[str] = []

    @property
    def alias(self) -> str:
        return f"f{len(self.kept)}"

    def keep(self, res: IngestResult) -> None:
        """``res``, attached as ``self.alias``, is kept unless an earlier file holds the same capture."""
        fingerprint = capture_fingerprint(self.con, self.alias)
        if fingerprint is not None and fingerprint in self.seen:
            self.con.execute(f"DETACH {self.alias}")
            self.warnings.append(f"{self.seen[fingerprint]} and {res.source}: hold the very same kernels (one "
                                 f"capture given twice?); {res.source} is left out")
            return
        if fingerprint is not None:
            self.seen[fingerprint] = res.source
        self.kept.append(res)


def _attach_distinct(con: duckdb.DuckDBPyConnection, results: list[IngestResult]
                     ) -> tuple[list[IngestResult], list[str]]:
    """Attach the stores as f0, f1, ...; a file holding the very same kernels as an earlier one is left out."""
    distinct = _Distinct(con)
    for res in results:
        con.execute(f"ATTACH ? AS {distinct.alias} (READ_ONLY)", [str(res.db)])
        distinct.keep(res)
    return distinct.kept, distinct.warnings


def _attach_stores(con: duckdb.DuckDBPyConnection, results: list[IngestResult], distinct: bool
                   ) -> tuple[list[IngestResult], list[str]]:
    """Attach the stores on disk as f0, f1, ... (``distinct``: leaving copies out, as ``_attach_distinct``)."""
    if distinct:
        return _attach_distinct(con, results)
    for i, res in enumerate(results):
        con.execute(f"ATTACH ? AS f{i} (READ_ONLY)", [str(res.db)])
    return results, []


def _read_all_in_memory(con: duckdb.DuckDBPyConnection, files: list[Path],
                        on_done: Callable[[IngestResult], None] | None) -> tuple[list[IngestResult], list[str]]:
    """Every file read into its own in-memory database f0, f1, ... of ``con``; copies left out as on disk."""
    distinct = _Distinct(con)
    for f in files:
        res = read_in_memory(con, distinct.alias, f)
        distinct.keep(res)
        if on_done is not None:
            on_done(res)
    return distinct.kept, distinct.warnings


def _ingest_all(files: list[Path], cache_dir: Path, jobs: int,
                on_done: Callable[[IngestResult], None] | None, cached: bool = True) -> list[IngestResult]:
    """Ingest every file (in ``jobs`` processes when there are several), results in input order;
    ``on_done`` is called as each file finishes. Not ``cached``: each file into ``cache_dir``/<i>.duckdb."""
    if jobs > 1 and len(files) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
            futures = {(pool.submit(ingest_file, f, cache_dir) if cached else
                        pool.submit(build_uncached, f, cache_dir / f"{i}.duckdb")): i for i, f in enumerate(files)}
            done: dict[int, IngestResult] = {}
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                if on_done is not None:
                    on_done(done[futures[fut]])
            return [done[i] for i in range(len(files))]
    results = []
    for f in files:
        results.append(ingest_file(f, cache_dir))
        if on_done is not None:
            on_done(results[-1])
    return results


def _combine(con: duckdb.DuckDBPyConnection, aliases: list[str], mappings: list[dict[int | None, int]],
             copy: bool, drop: bool) -> None:
    """Each store table over the files ``aliases``, under the global ranks ``mappings`` give them: a view, or
    with ``copy`` one in-memory table (``drop``: the files are in-memory databases, each file's table dropped
    once copied, so the copy costs one table's memory at most). DuckDB plans a query over a view of n attached
    files n times over: on small traces of many ranks that planning cost more than the rows of every
    per-device query (``dlrm8_v100``, 8 files: about a fifth of ``analyze --no-cache``)."""
    for table in TABLES:
        parts = [f"SELECT * REPLACE ({rank_sql(m)} AS rank) FROM {a}.{table}"
                 for a, m in zip(aliases, mappings, strict=True)]
        con.execute(f"CREATE {'TABLE' if copy else 'VIEW'} {table} AS " + " UNION ALL ".join(parts))
        if copy and drop:
            for a in aliases:
                con.execute(f"DROP TABLE {a}.{table}")
    if copy:
        for a in aliases:
            con.execute(f"DETACH {a}")


def open_store(
    paths: Sequence[Path], cache_dir: Path | None = None, use_cache: bool = True, jobs: int = 1,
    on_file_done: Callable[[IngestResult], None] | None = None, ranks: Sequence[Sequence[int]] | None = None,
) -> Store:
    """Ingest (or reuse) every input and open them together as one store; ``on_file_done`` (e.g. a
    progress bar) hears of each file as its ingest finishes. ``ranks`` (per file, its ranks in order)
    overrides the rank assignment, so one file of a multi-rank set can be opened alone under its ranks."""
    files = expand_inputs(paths)
    if not files:
        raise InputError("no input files given")
    check_distinct_paths(files)
    skipped = skipped_inputs(paths)
    tmp = None
    in_memory = not use_cache and (jobs <= 1 or len(files) == 1) and ranks is None  # else stores on disk
    if not use_cache and not in_memory:
        tmp = tempfile.TemporaryDirectory(prefix="tracekit-")
        cache_dir = Path(tmp.name)
    cache_dir = cache_dir or default_cache_dir()
    con = None
    try:
        if in_memory:  # read straight into databases of this connection: nothing to attach
            con = quiet(duckdb.connect())
            results, warnings = _read_all_in_memory(con, files, on_file_done)
            t_open = time.perf_counter()
        else:
            results = _ingest_all(files, cache_dir, jobs, on_file_done, cached=use_cache)
            t_open = time.perf_counter()
            # after the worker processes are forked: they inherit no DuckDB state
            con = quiet(duckdb.connect())
            results, warnings = _attach_stores(con, results, ranks is None)
        results, aliases, captures, capture_aliases = split_captures(con, results, ranks is None)
        mappings, rank_warnings = assign_ranks(con, results, aliases)
        warnings += rank_warnings
        if ranks is not None:  # the same files' ranks, as a full opening of the set assigned them
            mappings = [dict(zip(sorted(m, key=lambda r: (r is None, r or 0)), [*given, given[0]], strict=False))
                        for m, given in zip(mappings, ranks, strict=True)]
        warnings += mixed_gpu_warning(con, [m[None] for m in mappings])
        copy = len(aliases) > 1 and (in_memory or sum(r.db.stat().st_size for r in results) <= COPY_MAX_BYTES)
        _combine(con, aliases, mappings, copy, drop=in_memory)
        capture_ranks = captured_ranks(con, capture_aliases, mappings)
        create_capture_views(con, capture_aliases, capture_ranks)
        create_views(con)
    except BaseException:
        if con is not None:
            con.close()
        if tmp is not None:
            tmp.cleanup()
        raise
    stages = {s: sum(r.stages.get(s, 0.0) for r in results) for s in STAGES}
    stages["open"] = time.perf_counter() - t_open
    warnings = skipped + warnings
    stored = [StoredFile(r.source, r.db, r.fmt, m[None], r.reused, tuple(sorted(set(m.values()))))
              for r, m in zip(results, mappings, strict=True)]
    kept = [StoredFile(r.source, r.db, r.fmt, k, r.reused, (k,))
            for r, k in zip(captures, capture_ranks, strict=True)]
    return Store(con, stored, warnings, tmp, stages, cached=use_cache, jobs=jobs, captures=kept)

