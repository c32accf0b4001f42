"""Store cache key: what a key that an in-place edit cannot fool costs, against the ingest it saves.

Run: ``.venv/bin/python bench/bench_cache_key.py [--shared ../shared/traces] [--kernels 1000000]
[--workdir DIR] [--repeat 3]`` (prints a Markdown table; docs/benchmarks.md quotes it).

For every trace file in the shared folder (rank files of a folder each count) and a synthetic Nsight
Systems export of ``--kernels`` kernels (``fixtures.synth.write_nsys_bulk``, cached in the workdir), with
the file in the page cache, it times in this process (fastest of ``--repeat``):

- ``ingest``: ``tracekit.store.ingest.ingest_file`` into an empty cache folder (read, store, checkpoint,
  manifest; the key included);
- ``sampled``: the old key, SHA-256 of size, mtime and the first and last 64 KiB;
- ``stat``: ``os.stat`` alone (size, mtime, inode and ctime: what an identity key without the content
  reads);
- ``sha256`` and ``blake2b``: the whole file hashed with ``hashlib.file_digest``.

The last column is the whole-file SHA-256 as a share of the ingest. The issue's rule: hash the content
where that costs under 10 % of ingest.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SAMPLE_BYTES = 64 * 1024
SUFFIXES = (".sqlite", ".json", ".json.gz")


def sampled_key(path: Path) -> str:
    """The key before issue 18: size, mtime and the first and last 64 KiB."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}|{st.st_mtime_ns}".encode())
    with path.open("rb") as f:
        h.update(f.read(SAMPLE_BYTES))
        if st.st_size > SAMPLE_BYTES:
            f.seek(max(st.st_size - SAMPLE_BYTES, SAMPLE_BYTES))
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def whole(algorithm: str) -> Callable[[Path], str]:
    def digest(path: Path) -> str:
        with path.open("rb") as f:
            return hashlib.file_digest(f, algorithm).hexdigest()

    return digest


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def ingest_seconds(path: Path, repeat: int) -> float:
    from tracekit.store.ingest import ingest_file

    def once() -> None:
        cache = Path(tempfile.mkdtemp(prefix="tk-keybench-"))
        try:
            ingest_file(path, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    return best(once, repeat)


def traces(shared: Path, bulk: Path | None) -> list[Path]:
    found = []
    for fmt in ("nsys", "torch"):
        for p in sorted((shared / fmt).iterdir()) if (shared / fmt).is_dir() else []:
            if p.name.startswith("reference-"):
                continue
            if p.is_dir():
                found += sorted(c for c in p.iterdir() if c.name.endswith(SUFFIXES))
            elif p.name.endswith(SUFFIXES):
                found.append(p)
    return found + ([bulk] if bulk else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--kernels", type=int, default=1_000_000, help="synthetic export size (0: none)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tracekit-bench")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bulk = None
    if args.kernels:
        from fixtures.synth import write_nsys_bulk

        args.workdir.mkdir(parents=True, exist_ok=True)
        bulk = args.workdir / f"bulk_{args.kernels}.sqlite"
        if not bulk.exists():
            write_nsys_bulk(bulk, args.kernels)
    print("| trace | MB | ingest s | sampled ms | stat ms | sha256 ms | blake2b ms | sha256 / ingest |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for path in traces(args.shared, bulk):
        from tracekit.errors import InputError

        whole("sha256")(path)  # into the page cache, like every measurement after it
        try:
            ingest = ingest_seconds(path, args.repeat)
        except InputError as exc:  # a trace tracekit refuses: no ingest to compare with
            print(f"| {path.name[:60]} | not ingested: {str(exc).split(': ', 1)[-1][:60]} |")
            continue
        sampled = best(lambda p=path: sampled_key(p), args.repeat)
        stat = best(lambda p=path: os.stat(p), args.repeat)
        sha = best(lambda p=path: whole("sha256")(p), args.repeat)
        blake = best(lambda p=path: whole("blake2b")(p), args.repeat)
        worst = max(worst, sha / ingest)
        name = path.name if path.parent == args.shared / path.parent.name else f"{path.parent.name}/{path.name}"
        print(f"| {name[:60]} | {path.stat().st_size / 1e6:.2f} | {ingest:.3f} | {sampled * 1e3:.3f} | "
              f"{stat * 1e3:.4f} | {sha * 1e3:.2f} | {blake * 1e3:.2f} | {sha / ingest:.2%} |")
    print(f"\nlargest share of ingest for a whole-file SHA-256: {worst:.2%}")


if __name__ == "__main__":
    main()
