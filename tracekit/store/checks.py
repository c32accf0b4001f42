"""Checks on what the readers wrote: damaged events in one file, and inputs that do not fit together.

- An event (kernel, copy, API call, range) that ends before it starts, or lacks its start, end, device
  or host thread, is a damaged record: no profiler writes one on purpose. It is dropped and counted in
  ``read_notes`` (kinds ``negative_duration``, ``incomplete_record``; reports show them as caveats); a
  kernel without a name is kept as ``(unnamed kernel)``; a file left with no GPU event (all damaged)
  is an input error. A CPU-only capture, which never had one, keeps its ``no_gpu_activity`` note.
  Zero-length events are kept: integer-microsecond Kineto traces round sub-microsecond kernels down to 0.
- The same file given twice is an input error. Two files holding the very same kernels (a rank's file
  copied under another name) would count one capture as two ranks: the copy is left out, with a warning.
- Ranks whose kernels ran on different GPU models get a warning (a caveat in reports), not an error:
  ``info`` and ``kernels`` stay useful, but one config's floor describes one model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from tracekit.errors import InputError
from tracekit.parsers.schema import NO_GPU_ACTIVITY

# (table, condition, note kind, what the dropped rows are): damaged records, dropped at ingest.
_DAMAGED = (
    ("kernels", "start_ns IS NULL OR end_ns IS NULL OR device_id IS NULL", "incomplete_record",
     "kernels without a start, end or device"),
    ("memops", "start_ns IS NULL OR end_ns IS NULL OR device_id IS NULL", "incomplete_record",
     "memory operations without a start, end or device"),
    ("api_calls", "start_ns IS NULL OR end_ns IS NULL OR pid IS NULL OR tid IS NULL", "incomplete_record",
     "API calls without a start, end, process or thread"),
    ("ranges", "start_ns IS NULL OR (device_id IS NULL AND (pid IS NULL OR tid IS NULL))", "incomplete_record",
     "host ranges without a start, process or thread"),
    ("kernels", "end_ns < start_ns", "negative_duration", "kernels that end before they start"),
    ("memops", "end_ns < start_ns", "negative_duration", "memory operations that end before they start"),
    ("api_calls", "end_ns < start_ns", "negative_duration", "API calls that end before they start"),
    ("ranges", "end_ns < start_ns", "negative_duration", "ranges that end before they start"),
)
UNNAMED_KERNEL = "(unnamed kernel)"


#: The most nanoseconds a table's durations (or its time span) may add up to: 2^62 ns (146 years), half of
#: int64, so sums over tables and ranks in the analysis stay inside int64 too.
MAX_TOTAL_NS = 2**62
_TIMED_TABLES = ("kernels", "memops", "api_calls", "ranges")


def check_time_sums(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file whose event durations, summed per table, or whose time span would overflow the
    analysis' int64 nanoseconds (a damaged export with absurd durations gave a negative step time)."""
    for table in _TIMED_TABLES:
        total, span = con.execute(f"SELECT sum(dur_ns::HUGEINT), max(end_ns)::HUGEINT - min(start_ns) "
                                  f"FROM {table}").fetchone()
        worst = max(total or 0, span or 0)
        if worst > MAX_TOTAL_NS:
            raise InputError(f"{path}: {table} durations add up to {worst:.3g} ns, beyond what 64-bit "
                             "nanoseconds can sum (2^62); the trace is damaged: export or capture it again")


def drop_damaged_records(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Delete damaged events from one file's store (noting how many went) and name unnamed kernels; refuse
    times whose sums overflow (``check_time_sums``)."""
    rank = con.execute("SELECT max(rank) FROM trace_info").fetchone()[0]
    notes: list[tuple[int | None, str, int, str]] = []
    for table, condition, kind, label in _DAMAGED:
        (dropped,) = con.execute(f"SELECT count(*) FROM {table} WHERE {condition}").fetchone()
        if dropped:
            con.execute(f"DELETE FROM {table} WHERE {condition}")
            notes.append((rank, kind, dropped, f"{label}, dropped as damaged records"))
    check_time_sums(con, path)
    (unnamed,) = con.execute("SELECT count(*) FROM kernels WHERE name IS NULL").fetchone()
    if unnamed:
        con.execute("UPDATE kernels SET name = $n, short_name = coalesce(short_name, $n) WHERE name IS NULL",
                    {"n": UNNAMED_KERNEL})
        notes.append((rank, "unnamed_kernel", unnamed, f"kernels whose name is missing, shown as {UNNAMED_KERNEL}"))
    if not notes:
        return
    con.executemany("INSERT INTO read_notes VALUES (?, ?, ?, ?)", notes)
    (gpu,) = con.execute("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops)").fetchone()
    (cpu_only,) = con.execute("SELECT count(*) FROM read_notes WHERE kind = ?", [NO_GPU_ACTIVITY]).fetchone()
    if gpu == 0 and not cpu_only:  # every GPU event was damaged (a CPU-only capture never had one)
        raise InputError(f"{path}: no usable GPU event (each ends before it starts or lacks its time or device); "
                         "the trace is damaged: export or capture it again")


def check_distinct_paths(files: Sequence[Path]) -> None:
    """Refuse a file named twice (directly, or also through its directory)."""
    seen: dict[Path, Path] = {}
    for f in files:
        key = f.resolve()
        if key in seen:
            raise InputError(f"{f}: given twice (also as {seen[key]}); give each rank's file once")
        seen[key] = f


def capture_fingerprint(con: duckdb.DuckDBPyConnection, alias: str) -> tuple[object, ...] | None:
    """What makes two attached files one capture: their kernels identical in number, times, devices and
    processes (ranks of one job can run in lockstep, but on other devices and in other processes); None for a
    file without kernels."""
    row = con.execute(f"SELECT count(*), sum(start_ns), sum(end_ns), min(start_ns), max(end_ns), sum(device_id), "
                      f"sum(pid) FROM {alias}.kernels").fetchone()
    return tuple(row) if row[0] else None


def mixed_gpu_warning(con: duckdb.DuckDBPyConnection, ranks: Sequence[int]) -> list[str]:
    """A warning when the kernels of different ranks ran on different GPU models."""
    models: dict[str, list[int]] = {}
    for i, rank in enumerate(ranks):
        for (name,) in con.execute(f"""
            SELECT DISTINCT trim(d.name) FROM f{i}.devices d
            WHERE d.name IS NOT NULL AND trim(d.name) <> ''
              AND EXISTS (SELECT 1 FROM f{i}.kernels k WHERE k.device_id = d.device_id)
        """).fetchall():
            models.setdefault(name, []).append(rank)
    if len(models) < 2:
        return []
    parts = "; ".join(f"{name} on rank{'s' if len(r) > 1 else ''} {', '.join(map(str, sorted(r)[:8]))}"
                      f"{', ...' if len(r) > 8 else ''}" for name, r in sorted(models.items()))
    return [f"ranks ran on different GPU models ({parts}): their step times are not comparable and one "
            "config's floor describes one model; analyse each model's ranks separately"]
