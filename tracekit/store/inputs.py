"""The input set of a trace command: the paths and how to ingest them, not yet opened."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tracekit import progress as read_progress
from tracekit.errors import TracekitError
from tracekit.store.cache import default_cache_dir, file_key, manifest_path, set_aside, store_lock, verify_store
from tracekit.store.expand import expand_inputs

if TYPE_CHECKING:  # the reader and DuckDB load when the inputs are opened, not when they are named
    from tracekit.store.ingest import IngestResult, Store


@contextmanager
def ingest_progress(paths: Sequence[Path], quiet: bool,
                    stream: TextIO | None = None) -> Iterator[Callable[[IngestResult], None] | None]:
    """A progress bar on ``stream`` (stderr) for the ingest of ``paths``: files done, input bytes per
    second and time left. Yields the per-file callback for ``open_store``, or None (no bar) with
    ``quiet`` or when the stream is not a terminal, so pipes and logs stay clean."""
    stream = stream if stream is not None else sys.stderr
    if quiet or not stream.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    files = expand_inputs(paths)
    size = {str(f): (f.stat().st_size if f.is_file() else 0) for f in files}
    progress = Progress(
        TextColumn("ingest {task.fields[done]}/{task.fields[files]} files"), BarColumn(), TransferSpeedColumn(),
        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
        console=Console(file=stream), transient=True,
    )
    finished = [0]  # input bytes of the files done

    with progress, read_progress.listening(lambda path, fraction: progress.update(
            task, completed=finished[0] + fraction * size.get(path, 0))):  # within a file (one read here)
        task = progress.add_task("ingest", total=sum(size[str(f)] for f in files) or 1, done=0, files=len(files))

        def file_done(result: IngestResult) -> None:
            done = progress.tasks[0].fields["done"] + 1
            finished[0] += size.get(str(result.source), 0)
            progress.update(task, completed=finished[0], done=done)

        yield file_done


@dataclass(frozen=True)
class Inputs:
    """The shared input options, not yet opened (for commands that choose where ingest runs)."""

    paths: tuple[Path, ...]
    cache_dir: Path | None = None
    use_cache: bool = True
    jobs: int = 1
    quiet: bool = False

    def open(self) -> Store:
        """Ingest (or reuse) the inputs, with a progress bar on a terminal, and print the store's warnings."""
        from tracekit.store.ingest import open_store

        with ingest_progress(list(self.paths), self.quiet) as on_file_done:
            store = open_store(list(self.paths), cache_dir=self.cache_dir, use_cache=self.use_cache, jobs=self.jobs,
                               on_file_done=on_file_done)
        for w in store.warnings:
            print(f"tracekit: warning: {w}", file=sys.stderr)
        return store

    def set_aside_corrupt(self) -> list[Path]:
        """After DuckDB reported a store corrupt: read each input's cached store in full, and set aside
        (under ``damaged/``) every one DuckDB finds corrupt, so the next open rebuilds it from its input.
        Returns the stores set aside."""
        if not self.use_cache:
            return []
        cache_dir = self.cache_dir or default_cache_dir()
        moved = []
        for f in expand_inputs(self.paths):
            db = cache_dir / f"{file_key(f)}.duckdb"
            if db.is_file() and not verify_store(db):
                with store_lock(db, exclusive=True):
                    set_aside(manifest_path(db))
                    set_aside(db)
                moved.append(db)
        return moved


# Average input file size from which reading files in worker processes (and analysing ranks in threads) pays:
# dlrm8_v100's 8 files of 54 KB read and analyse faster in one process, 16 files of 93 MB 1.87x faster in two
# (docs/benchmarks.md). Between those sizes the crossover was not measured; 4 MiB is a guess between them.
PARALLEL_MIN_BYTES = 4 << 20


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def auto_jobs(paths: Sequence[Path]) -> int:
    """``--jobs`` when not given: the cores available when the input files average at least
    ``PARALLEL_MIN_BYTES``, else 1 (small files: worker processes and threads cost more than they save)."""
    cores = available_cores()
    if cores <= 1:
        return 1
    try:
        sizes = [f.stat().st_size for f in expand_inputs(paths)]
    except (OSError, ValueError, TracekitError):  # a bad input: opening the inputs says what is wrong
        return cores
    return cores if sizes and sum(sizes) / len(sizes) >= PARALLEL_MIN_BYTES else 1
