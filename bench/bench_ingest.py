"""Ingest benchmark: ``tracekit ingest`` against the fastest bare read of the same tables into Arrow.

Run: ``.venv/bin/python bench/bench_ingest.py --kernels 1000000 5000000 [--workdir DIR] [--markdown]
[--repeat N]`` (each measurement is the fastest of N runs; making the 5M-kernel export the first time takes
a few minutes on 2 cores).

For each N it makes (or reuses, cached in the workdir) a synthetic Nsight Systems export with N
kernels and N launch calls (``fixtures.synth.write_nsys_bulk``), then measures, each in a fresh
child process, alternately (bare reads, then the ingest, ``--repeat`` rounds):

- the bare read: ``CUPTI_ACTIVITY_KIND_KERNEL``, ``CUPTI_ACTIVITY_KIND_RUNTIME`` and ``StringIds`` into
  Arrow tables, the two large tables each in 2 rowid partitions, all five reads at once on threads, by
  each reader available: adbc-driver-sqlite (``file:...?mode=ro&immutable=1``, one connection per
  partition, ``fetch_arrow_table()``) and connectorx (``partition_on`` a rowid alias,
  ``partition_num=2``) when it is installed (``pip install connectorx``). Each reader reads every column
  (``SELECT *``, "all") and, a stricter floor, only the columns the ingest reads ("used"). The floor is
  the fastest of them, reported with its reader;
- ``tracekit ingest FILE --cache-dir <fresh dir>`` through the installed CLI.

Wall time is the child's whole run (interpreter start included, as a user sees it). Peak memory is
``ru_maxrss`` of ``RUSAGE_CHILDREN`` read by a small wrapper process whose only child is the measured
command, so every figure is one process's own peak. Targets (issue 26): ingest within 1.2x of the fastest
bare read of the tables (all columns); issue 2: ingest peak under 2x the Arrow size of the kernel and API
tables.

When ``tracekit ingest --format json`` prints a table named ``stages`` with ``stage`` and ``seconds``
columns, the slowest stage is reported too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
API_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
STRING_TABLE = "StringIds"
MB = 1e6

# Runs argv[1:] as its only child; prints the child's wall time, peak RSS (KiB on Linux) and output.
_WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall_s = time.perf_counter() - t0
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": p.returncode, "wall_s": wall_s, "peak_kib": peak_kib,
                  "stdout": p.stdout, "stderr": p.stderr}))
"""


@dataclass
class Measured:
    """One child process run: exit status, wall seconds, peak RSS in MB, its stdout and stderr."""

    rc: int
    wall_s: float
    peak_mb: float
    stdout: str
    stderr: str


def measure(cmd: list[str]) -> Measured:
    """Run ``cmd`` under the wrapper and return its own wall time and peak RSS."""
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    return Measured(r["rc"], r["wall_s"], r["peak_kib"] * 1024 / MB, r["stdout"], r["stderr"])


def measure_best(cmd: list[str], repeat: int, fresh_cache: Path | None = None) -> Measured:
    """The fastest of ``repeat`` runs, with the largest peak RSS seen (noise on shared machines).

    With ``fresh_cache`` the command gets an empty folder there, replaced before each run.
    """
    runs = []
    for _ in range(repeat):
        if fresh_cache is not None:
            shutil.rmtree(fresh_cache, ignore_errors=True)
            fresh_cache.mkdir(parents=True)
        runs.append(measure(cmd))
        if runs[-1].rc != 0:
            return runs[-1]
    best = min(runs, key=lambda m: m.wall_s)
    best.peak_mb = max(m.peak_mb for m in runs)
    return best


def warm_page_cache(path: Path) -> None:
    """Read the file once so every measurement starts from the same (warm) page cache."""
    with path.open("rb") as f:
        while f.read(16 << 20):
            pass


def read_tables(path: Path, reader: str, columns: str) -> None:
    """Child mode: read the kernel, API and string tables into Arrow with ``reader`` (adbc or connectorx), the
    large tables in 2 rowid partitions, every read at once on threads; print rows and Arrow bytes per table."""
    import threading

    select = {KERNEL_TABLE: "*", API_TABLE: "*", STRING_TABLE: "*"} | (json.loads(columns) if columns != "all" else {})
    uri = f"file:{path}?mode=ro&immutable=1"
    results: dict[str, list] = {t: [] for t in select}

    def adbc_read(table: str, where: str) -> None:
        import adbc_driver_sqlite.dbapi as adbc

        with adbc.connect(uri) as con, con.cursor() as cur:
            cur.execute(f"SELECT {select[table]} FROM {table}{where}")
            results[table].append(cur.fetch_arrow_table())

    def cx_read(table: str, partitions: int) -> None:
        import connectorx as cx

        query = f"SELECT rowid AS _rowid, {select[table]} FROM {table}"
        extra = {"partition_on": "_rowid", "partition_num": partitions} if partitions > 1 else {}
        results[table].append(cx.read_sql(f"sqlite://{path}", query, return_type="arrow", **extra))

    jobs: list[tuple] = []
    for table in (KERNEL_TABLE, API_TABLE):
        if reader == "adbc":
            import sqlite3

            with sqlite3.connect(uri, uri=True) as db:
                low, high = db.execute(f"SELECT min(rowid), max(rowid) FROM {table}").fetchone()
            half = (low + high) // 2
            jobs += [(adbc_read, table, f" WHERE rowid <= {half}"), (adbc_read, table, f" WHERE rowid > {half}")]
        else:
            jobs.append((cx_read, table, 2))
    jobs.append((adbc_read, STRING_TABLE, "") if reader == "adbc" else (cx_read, STRING_TABLE, 1))
    threads = [threading.Thread(target=job[0], args=job[1:]) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({table: {"rows": sum(t.num_rows for t in parts), "arrow_bytes": sum(t.nbytes for t in parts)}
                      for table, parts in results.items()}))


def used_columns() -> str:
    """The SELECT lists of the columns the ingest reads, as the bare read's child takes them (JSON)."""
    from tracekit.parsers.nsys import KERNEL_COLUMNS
    from tracekit.parsers.nsys_api import RUNTIME_COLUMNS

    return json.dumps({KERNEL_TABLE: ", ".join(f'"{c}"' for c in KERNEL_COLUMNS),
                       API_TABLE: ", ".join(f'"{c}"' for c in RUNTIME_COLUMNS)})


def bare_readers() -> list[str]:
    """The readers the bare read can use here: adbc always, connectorx when installed."""
    try:
        import connectorx  # noqa: F401
    except ImportError:
        return ["adbc"]
    return ["adbc", "connectorx"]


def tracekit_cli() -> Path | None:
    """The ``tracekit`` entry point next to this interpreter, if installed."""
    exe = Path(sys.executable).with_name("tracekit")
    return exe if exe.exists() else None


def ingest_command(exe: Path, trace: Path, cache_dir: Path) -> list[str]:
    """``tracekit ingest`` with a fresh cache, JSON output, and ``--no-progress`` where the CLI has it."""
    help_text = subprocess.run([str(exe), "ingest", "--help"], capture_output=True, text=True).stdout
    cmd = [str(exe), "ingest", str(trace), "--cache-dir", str(cache_dir), "--format", "json"]
    return cmd + (["--no-progress"] if "--no-progress" in help_text else [])


def slowest_stage(stdout: str) -> str | None:
    """'name (seconds s)' of the slowest row of a ``stages`` table in the ingest's JSON output."""
    try:
        stages = json.loads(stdout).get("stages")
    except (json.JSONDecodeError, AttributeError):
        return None
    if not stages:
        return None
    top = max(stages, key=lambda row: row.get("seconds", 0))
    return f"{top.get('stage')} ({top.get('seconds', 0):.2f} s)"


def make_trace(workdir: Path, n_kernels: int) -> tuple[Path, float | None]:
    """The synthetic export for ``n_kernels``, and seconds spent generating it (None if cached).

    The cache key includes a digest of the generator's sources, so a changed generator remakes it.
    """
    sys.path.insert(0, str(REPO))
    from fixtures.synth import write_nsys_bulk

    generator = hashlib.sha256()
    for source in sorted((REPO / "fixtures").glob("s*.py")) + sorted((REPO / "fixtures").glob("*.tsv")):
        generator.update(source.read_bytes())
    path = workdir / f"synthetic_{n_kernels}_{generator.hexdigest()[:8]}.sqlite"
    if path.exists():
        return path, None
    t0 = time.perf_counter()
    write_nsys_bulk(path, n_kernels)
    return path, time.perf_counter() - t0


def bench_one(workdir: Path, n_kernels: int, repeat: int) -> dict[str, object]:
    """All measurements for one size: ``repeat`` rounds of every bare read then the ingest; the fastest counts."""
    trace, gen_s = make_trace(workdir, n_kernels)
    warm_page_cache(trace)
    me = [sys.executable, str(Path(__file__).resolve()), "--read-tables", str(trace)]
    variants = [(reader, columns) for reader in bare_readers() for columns in ("all", "used")]
    used = used_columns()
    exe = tracekit_cli()
    cache_dir = workdir / "ingest-cache"
    bare: dict[tuple[str, str], list[Measured]] = {v: [] for v in variants}
    ingests: list[Measured] = []
    try:
        for _ in range(repeat):
            for variant in variants:
                m = measure([*me, variant[0], "all" if variant[1] == "all" else used])
                if m.rc != 0:
                    raise SystemExit(f"reading {trace} into Arrow ({variant[0]}) failed:\n{m.stderr}")
                bare[variant].append(m)
            if exe is not None and (not ingests or ingests[-1].rc == 0):
                ingests.append(measure_best(ingest_command(exe, trace, cache_dir), 1, fresh_cache=cache_dir))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    def fastest(columns: str) -> tuple[str, Measured]:
        return min(((v[0], m) for v, runs in bare.items() if v[1] == columns for m in runs),
                   key=lambda vm: vm[1].wall_s)

    (all_reader, all_read), (used_reader, used_read) = fastest("all"), fastest("used")
    tables = json.loads(bare[("adbc", "all")][0].stdout)
    row: dict[str, object] = {
        "n_kernels": n_kernels,
        "file_mb": trace.stat().st_size / MB,
        "generate_s": gen_s,
        "read_all_s": all_read.wall_s,
        "read_all_reader": all_reader,
        "read_used_s": used_read.wall_s,
        "read_used_reader": used_reader,
        "read_peak_mb": max(m.peak_mb for runs in bare.values() for m in runs),
        "bare_walls": {f"{v[0]} {v[1]}": [round(m.wall_s, 2) for m in runs] for v, runs in bare.items()},
        "ingest_walls": [round(m.wall_s, 2) for m in ingests],
        "arrow_mb": sum(tables[t]["arrow_bytes"] for t in (KERNEL_TABLE, API_TABLE)) / MB,
        "ingest_s": None,
        "ingest_peak_mb": None,
        "slowest_stage": None,
        "ingest_error": None,
    }
    if exe is None:
        row["ingest_error"] = "tracekit CLI not installed in this environment"
        return row
    if ingests[-1].rc != 0:
        row["ingest_error"] = (ingests[-1].stderr.strip().splitlines() or [f"exit status {ingests[-1].rc}"])[-1]
        return row
    ingest = min(ingests, key=lambda m: m.wall_s)
    row |= {
        "ingest_s": ingest.wall_s,
        "ingest_peak_mb": max(m.peak_mb for m in ingests),
        "slowest_stage": slowest_stage(ingest.stdout),
    }
    return row


COLUMNS = (
    ("N kernels", lambda r: f"{r['n_kernels']:,}"),
    ("bare read s (all columns)", lambda r: f"{r['read_all_s']:.2f} ({r['read_all_reader']})"),
    ("bare read s (used columns)", lambda r: f"{r['read_used_s']:.2f} ({r['read_used_reader']})"),
    ("ingest s", lambda r: _opt(r["ingest_s"], "{:.2f}")),
    ("ingest/read (all)", lambda r: _opt(_ratio(r["ingest_s"], r["read_all_s"]), "{:.2f}x")),
    ("ingest/read (used)", lambda r: _opt(_ratio(r["ingest_s"], r["read_used_s"]), "{:.2f}x")),
    ("Arrow MB (kernel+API)", lambda r: f"{r['arrow_mb']:.0f}"),
    ("ingest peak MB", lambda r: _opt(r["ingest_peak_mb"], "{:.0f}")),
    ("peak/Arrow", lambda r: _opt(_ratio(r["ingest_peak_mb"], r["arrow_mb"]), "{:.2f}x")),
)


def _opt(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def _ratio(a: object, b: object) -> float | None:
    return None if a is None or not b else float(a) / float(b)


def table(rows: list[dict[str, object]], columns: tuple, markdown: bool) -> list[str]:
    """``rows`` as a plain or Markdown table, one column per (header, cell function)."""
    header = [name for name, _ in columns]
    body = [[cell(r) for _, cell in columns] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
        return lines + ["| " + " | ".join(cells) + " |" for cells in body]
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    return lines + ["  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) for cells in body]


def render(rows: list[dict[str, object]], markdown: bool) -> str:
    """The results table (plain or Markdown) followed by notes on generation, stages and errors."""
    lines = table(rows, COLUMNS, markdown)
    bullet = "- " if markdown else "  "
    lines.append("")
    for r in rows:
        n = f"{r['n_kernels']:,}"
        gen = "cached" if r["generate_s"] is None else f"generated in {r['generate_s']:.1f} s"
        lines.append(
            f"{bullet}{n} kernels: export {r['file_mb']:.0f} MB ({gen}); bare read peak {r['read_peak_mb']:.0f} MB"
        )
        walls = "; ".join(f"{name} {', '.join(map(str, w))}" for name, w in r["bare_walls"].items())
        lines.append(f"{bullet}{n} kernels: every run's wall s: bare read {walls}; "
                     f"ingest {', '.join(map(str, r['ingest_walls']))}")
        if r["slowest_stage"]:
            lines.append(f"{bullet}{n} kernels: slowest ingest stage {r['slowest_stage']}")
        if r["ingest_error"]:
            lines.append(f"{bullet}{n} kernels: ingest not measured: {r['ingest_error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kernels",
        type=int,
        nargs="+",
        default=[1_000_000, 5_000_000],
        help="Kernel counts to benchmark (default: 1000000 5000000).",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=REPO / "bench" / "out",
        help="Where the synthetic exports are cached (default: bench/out).",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="Print a Markdown table for docs/benchmarks.md."
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="Runs per measurement; the fastest counts (default: 1)."
    )
    parser.add_argument("--read-tables", nargs=3, metavar=("FILE", "READER", "COLUMNS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read_tables:
        read_tables(Path(args.read_tables[0]), *args.read_tables[1:])
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.kernels:
        print(f"benchmarking {n:,} kernels ...", file=sys.stderr, flush=True)
        rows.append(bench_one(args.workdir, n, args.repeat))
    print(render(rows, args.markdown))


if __name__ == "__main__":
    main()
