"""The store cache: where stores live, the key of an input file, and the manifest and lock that make a
published store complete and shared safely between processes.

A store is bound to its input: the manifest and the store's own ``store_info`` record the SHA-256 of the
input's content, and a store is used only for an input of that content (a store copied into another
trace's slot is rebuilt, never read). A path in the cache that is not what it should be (a folder where
a store or lock belongs) and a store that DuckDB itself reports as corrupt are set aside under
``damaged/`` and rebuilt. Temporary build folders of killed runs are swept on the next ingest: a
builder holds a lock inside its folder, so a folder whose lock is free belongs to no live process."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracekit import __version__
from tracekit.parsers.schema import STORE_SCHEMA_VERSION, quiet


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tracekit`` (``~/.cache/tracekit`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracekit"


HASH_MEMO = "hashes"  # under the cache folder: the content SHA-256 of inputs, by their file identity
RACY_NS = 2_000_000_000  # a file changed this recently may change again within one timestamp tick: not memoised


def file_identity(path: Path, memo_dir: Path | None = None) -> tuple[str, str]:
    """(key, content SHA-256) of an input: the key changes whenever the file's content or the store format
    changes (a SHA-256 of the whole file, about 1.7 GB/s; under 4 % of an ingest on every trace measured,
    bench/bench_cache_key.py); the content hash is what the store's manifest binds it to. Hashed once per
    process while the file's size, times and inode stay the same (the report cache and the store both ask).

    With ``memo_dir`` (the cache folder), a SHA-256 remembered there under the file's identity (resolved
    path, device, inode, size, mtime and ctime in ns; ``remember_identity``) is read back, not hashed again,
    while that identity is unchanged. Safe as a content check: every write to a file moves its mtime and ctime, and no
    tool can set the ctime back (``touch -d`` and ``os.utime`` move it to now), so a changed file has another
    identity and is hashed afresh; a file whose times are under ``RACY_NS`` old is never remembered (a
    second write within one coarse timestamp tick would keep them); an entry is checked by its own digest, so
    a damaged one is hashed again."""
    st = path.stat()
    return _content_identity(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev,
                             None if memo_dir is None else str(memo_dir))


def file_key(path: Path, memo_dir: Path | None = None) -> str:
    """The store key of an input file (``file_identity``)."""
    return file_identity(path, memo_dir)[0]


@functools.lru_cache(maxsize=4096)
def _content_identity(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int, device: int,
                      memo_dir: str | None) -> tuple[str, str]:
    identity = [path, device, inode, size, mtime_ns, ctime_ns]
    content = _read_memo(_memo_entry(memo_dir, identity), identity) if memo_dir is not None else None
    if content is None:
        with open(path, "rb") as f:
            content = hashlib.file_digest(f, "sha256").hexdigest()
    key = f"{STORE_SCHEMA_VERSION}|{__version__}|{size}|{content}"
    return hashlib.sha256(key.encode()).hexdigest()[:32], content


def remember_identity(path: Path, memo_dir: Path) -> None:
    """Remember the input's SHA-256 in ``memo_dir`` (``file_identity``) once its store or report is in the
    cache: a failed ingest leaves nothing behind; a file changed under ``RACY_NS`` ago is not remembered."""
    st = path.stat()
    identity = [str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    entry = _memo_entry(str(memo_dir), identity)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS and _read_memo(entry, identity) is None:
        _write_memo(entry, identity, file_identity(path, memo_dir)[1])


def _memo_entry(memo_dir: str, identity: list[object]) -> Path:
    return Path(memo_dir) / HASH_MEMO / f"{_digest(identity)[:32]}.json"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def _read_memo(entry: Path, identity: list[object]) -> str | None:
    """The remembered SHA-256 for exactly this identity, or None (absent, another file's, damaged)."""
    try:
        memo = json.loads(entry.read_text())
        content = memo["sha256"]
        if (memo["identity"] != identity or not isinstance(content, str) or len(content) != 64
                or memo["check"] != _digest([identity, content])):
            return None
        int(content, 16)
        return content
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_memo(entry: Path, identity: list[object], content: str) -> None:
    """Remember the SHA-256 (one atomic write; a cache that cannot be written is only slower)."""
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{entry.stem}.", suffix=".tmp", dir=entry.parent)
        with os.fdopen(fd, "w") as f:
            json.dump({"identity": identity, "sha256": content, "check": _digest([identity, content])}, f)
        os.replace(tmp, entry)


def crc32_of(path: Path) -> int:
    """CRC-32 of a whole file (about 2 GB/s): catches bytes damaged in place, which keep the size."""
    crc = 0
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def manifest_path(db: Path) -> Path:
    return db.with_suffix(".json")


def is_complete(db: Path, input_sha256: str | None = None) -> bool:
    """True when ``db`` has its manifest, the size the manifest recorded, the schema version's mark and
    (given ``input_sha256``) was built from an input of that content, by its manifest and by itself.

    The size check catches a store cut short by a crash or a full disk, which can still open; the CRC-32
    catches bytes damaged in place, which DuckDB would only notice when a query reads that block; the
    content hash catches another trace's store (with its manifest) in this input's slot."""
    try:
        manifest = json.loads(manifest_path(db).read_text())
        if manifest.get("size_bytes") != db.stat().st_size or manifest.get("crc32") != crc32_of(db):
            return False
        if input_sha256 is not None and manifest.get("input_sha256") != input_sha256:
            return False
    except (OSError, ValueError, AttributeError):
        return False
    import duckdb

    try:
        con = quiet(duckdb.connect(str(db), read_only=True))
    except duckdb.Error:
        return False
    try:
        row = con.execute("SELECT * FROM store_info").fetchone()
        info = dict(zip([d[0] for d in con.description], row, strict=True)) if row is not None else {}
        return info.get("schema_version") == STORE_SCHEMA_VERSION and (
            input_sha256 is None or info.get("input_sha256") == input_sha256)
    except duckdb.Error:
        return False
    finally:
        con.close()


def damaged_dir(cache_dir: Path) -> Path:
    return cache_dir / "damaged"


def set_aside(path: Path) -> Path | None:
    """Move a cache entry that cannot be trusted or used (a corrupt store, a folder where a file belongs)
    out of the way, under ``damaged/`` beside it, for inspection; None when it is already gone."""
    if not os.path.lexists(path):
        return None
    target_dir = damaged_dir(path.parent)
    target_dir.mkdir(exist_ok=True)
    target = target_dir / f"{path.name}.{int(time.time())}.{secrets.token_hex(3)}"
    os.replace(path, target)
    return target


def clear_slot(db: Path) -> list[Path]:
    """Set aside whatever in ``db``'s slot (store, manifest, lock) is not a regular file; return them."""
    moved = []
    for p in (db, manifest_path(db), db.with_suffix(".lock")):
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.lstat(p).st_mode):
                moved += [m for m in [set_aside(p)] if m is not None]
    return moved


def is_corruption(exc: BaseException) -> bool:
    """Whether a DuckDB error says a database file is damaged (its block checksums do not match)."""
    duckdb = sys.modules.get("duckdb")  # not loaded: no DuckDB error can have been raised
    text = str(exc).lower()
    return duckdb is not None and isinstance(exc, duckdb.Error) and ("corrupt" in text or "checksum" in text)


def verify_store(db: Path) -> bool:
    """Read every block of every table of ``db`` (DuckDB checks each block's checksum as it reads it):
    False when DuckDB reports the store corrupt. Costly (a full scan): only after a query failed so."""
    import duckdb

    try:
        con = quiet(duckdb.connect(str(db), read_only=True))
    except duckdb.Error as exc:
        return not is_corruption(exc)
    try:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            con.execute(f'SELECT count(*), sum(hash(COLUMNS(*))) FROM "{table}"').fetchall()
        return True
    except duckdb.Error as exc:
        return not is_corruption(exc)
    finally:
        con.close()


BUILD_LOCK = "owner.lock"  # inside a temporary build folder: held by the process building there
STALE_SECONDS = 3600  # a leftover without a lock (an older version's) is swept after an hour
SWEEP_GRACE_SECONDS = 60  # a folder this young may be one a live build has made but not locked yet


@contextmanager
def build_dir(cache_dir: Path, stem: str) -> Iterator[Path]:
    """A private temporary folder to build a store in (``mkdtemp`` is atomic), locked while it is used and
    removed afterwards; leftovers of killed builds are swept first (``sweep_stale``)."""
    sweep_stale(cache_dir)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{stem}.", suffix=".tmp", dir=cache_dir))
    try:
        with open(tmp_dir / BUILD_LOCK, "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield tmp_dir
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def sweep_stale(cache_dir: Path) -> list[Path]:
    """Remove the temporary build folders (and files) of killed runs: a folder whose build lock no live
    process holds, or an unlocked leftover older than STALE_SECONDS; none younger than SWEEP_GRACE_SECONDS
    (a live build makes its folder, then locks it). Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = [p for p in cache_dir.iterdir() if p.name.startswith(".") and ".tmp" in p.name]
    except OSError:
        return removed
    for p in entries:
        with contextlib.suppress(OSError):
            if time.time() - os.lstat(p).st_mtime < SWEEP_GRACE_SECONDS:
                continue
            if p.is_dir() and not p.is_symlink() and (p / BUILD_LOCK).exists():
                with open(p / BUILD_LOCK, "rb") as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # a live build
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
            elif time.time() - os.lstat(p).st_mtime > STALE_SECONDS:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
                removed.append(p)
    return removed




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
