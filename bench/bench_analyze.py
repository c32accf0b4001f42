"""Analyze benchmark: ``tracekit analyze`` end to end against merely reading the kernel and API tables.

Run: ``.venv/bin/python bench/bench_analyze.py [--kernels 5000000] [--repeat N] [--markdown]``.

For each N it makes (or reuses from ``bench/out``) the synthetic Nsight Systems export of
``bench_ingest.py`` (``fixtures.synth.write_nsys_bulk``: one H100, N kernels on 4 streams from a
50-name serving mix incl. NCCL collectives, one runtime/driver launch call per kernel, an NVTX range
per 64 launches and a ``decode_step#i`` range per 61 of those), then measures, each in a fresh child
process (wall time of the whole run, interpreter start included, and that process's peak RSS):

- the floor: ``CUPTI_ACTIVITY_KIND_KERNEL`` and ``CUPTI_ACTIVITY_KIND_RUNTIME`` read into Arrow
  (``adbc_driver_sqlite``, read-only, immutable);
- ``tracekit analyze FILE --step '^decode_step#' --config dsv32-ep16 --format json`` with an empty
  cache folder (ingest + analysis: the first analyze of a trace);
- the same command again on the now cached store (the second analyze);
- both again without ``--step`` (``--whole``, the default: the synthetic export has no step markers the
  automatic search knows, so the whole capture is one step, analysed in time pieces of
  ``AnalyzeOptions.batch_rows`` operations).

Targets (issue 7): first analyze within 2x of the floor, peak RSS under 4 GB, second analyze at
least 10x faster than the first. With ``--profile`` the first analyze also runs under cProfile in a
separate run (not timed) and the slowest analysis functions are printed, to name the next target.

With ``--memory`` it measures the analysis alone instead, to show that its memory follows one batch of
steps and not the trace: each export is ingested once into ``bench/out``'s cache, then
``tracekit.analysis.analyze.analyze`` runs on the cached store (no report cache) in a fresh child
process, once with the default batch of ``AnalyzeOptions.batch_rows`` operations and once with every
device read in one batch (as before batching); the two reports must be equal.
"""

from __future__ import annotations

import argparse
import json
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import (  # noqa: E402 - the sibling script, reused rather than copied
    MB,
    make_trace,
    measure_best,
    table,
    tracekit_cli,
    warm_page_cache,
)

REPO = Path(__file__).resolve().parent.parent
STEP_REGEX = "^decode_step#"
CONFIG = "dsv32-ep16"
ONE_BATCH = 1 << 62  # batch_rows that reads every device at once


def analyze_command(exe: Path, trace: Path, cache_dir: Path, step: bool = True) -> list[str]:
    """The measured ``tracekit analyze`` command line (``step``: with ``--step``, else one whole-capture step)."""
    return [str(exe), "analyze", str(trace), "--cache-dir", str(cache_dir), *(["--step", STEP_REGEX] if step else []),
            "--config", CONFIG, "--format", "json", "--quiet"]


def profile_top(exe: Path, trace: Path, limit: int = 8) -> list[str]:
    """'function: cumulative s' of the slowest tracekit functions of one first analyze under cProfile."""
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        prof = Path(tmp) / "analyze.prof"
        cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "tracekit",
               *analyze_command(exe, trace, Path(tmp) / "cache")[1:]]
        subprocess.run(cmd, capture_output=True, check=True)
        stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    rows = []
    for (filename, _line, func), (_, _, _, cumulative, _) in stats.items():
        if "/tracekit/" in filename or "/parsers/" in filename:
            if func in ("wrapper", "invoke", "main", "analyze", "run_analysis", "<module>"):
                continue
            rows.append((cumulative, f"{Path(filename).parent.name}/{Path(filename).name}:{func}"))
    rows.sort(reverse=True)
    return [f"{name}: {seconds:.2f} s" for seconds, name in rows[:limit]]


def bench_one(workdir: Path, n_kernels: int, repeat: int, profile: bool, modes: tuple[bool, ...]) -> list[dict]:
    """All measurements for one size (each the fastest of ``repeat`` runs, the largest peak), one row per step
    mode (``True``: ``--step``; ``False``: the whole capture as one step)."""
    trace, gen_s = make_trace(workdir, n_kernels)
    warm_page_cache(trace)
    reader = [sys.executable, str(Path(__file__).resolve().parent / "bench_ingest.py"), "--read-tables", str(trace)]
    floor = measure_best([*reader, "adbc", "all"], repeat)  # every column of the three tables, as ADBC reads them
    if floor.rc != 0:
        raise SystemExit(f"reading {trace} into Arrow failed:\n{floor.stderr}")
    exe = tracekit_cli()
    if exe is None:
        raise SystemExit("the tracekit CLI is not installed in this environment")
    rows = []
    for step in modes:
        cache_dir = workdir / "analyze-cache"
        try:
            first = measure_best(analyze_command(exe, trace, cache_dir, step), repeat, fresh_cache=cache_dir)
            if first.rc != 0:
                raise SystemExit(f"tracekit analyze failed:\n{first.stderr}")
            second = measure_best(analyze_command(exe, trace, cache_dir, step), repeat)
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
        report = json.loads(first.stdout)
        if json.loads(second.stdout) != report:
            raise SystemExit("the cached analyze reported something else than the first")
        rows.append({
            "n_kernels": n_kernels, "steps_from": f"--step '{STEP_REGEX}'" if step else "no --step (whole capture)",
            "file_mb": trace.stat().st_size / MB, "generate_s": gen_s,
            "read_s": floor.wall_s, "read_peak_mb": floor.peak_mb,
            "first_s": first.wall_s, "first_peak_mb": first.peak_mb,
            "second_s": second.wall_s, "second_peak_mb": second.peak_mb,
            "steps": report["steps"]["count"], "verdict": report["verdict"],
            "profile": profile_top(exe, trace) if profile and step else [],
        })
    return rows


def analyze_cached(trace: Path, cache_dir: Path, batch_rows: int) -> None:
    """Child mode: analyse the already ingested ``trace`` from ``cache_dir``; print seconds, the number of
    batches read and the report as JSON."""
    import time

    from tracekit.analysis import device
    from tracekit.analysis.analyze import analyze
    from tracekit.analysis.options import AnalyzeOptions
    from tracekit.store.ingest import open_store

    groups = 0
    plan = device.batches

    def counting(*args: object) -> list:
        nonlocal groups
        out = plan(*args)  # type: ignore[arg-type]
        groups += len(out)
        return out

    device.batches = counting  # count the batches without changing them
    with open_store([trace], cache_dir=cache_dir) as store:
        t0 = time.perf_counter()
        report = analyze(store, AnalyzeOptions(config=CONFIG, step_regex=STEP_REGEX, batch_rows=batch_rows))
        seconds = time.perf_counter() - t0
    print(json.dumps({"analyze_s": seconds, "batches": groups, "report": report}))


def bench_memory(workdir: Path, n_kernels: int, repeat: int) -> list[dict[str, object]]:
    """Analysis of the cached store of one size, in default batches and in one batch per device."""
    trace, _ = make_trace(workdir, n_kernels)
    exe = tracekit_cli()
    if exe is None:
        raise SystemExit("the tracekit CLI is not installed in this environment")
    cache_dir = workdir / "memory-cache"
    subprocess.run([str(exe), "ingest", str(trace), "--cache-dir", str(cache_dir), "--quiet"], check=True,
                   capture_output=True)
    from tracekit.analysis.options import AnalyzeOptions

    rows, reports = [], []
    for batch_rows in (AnalyzeOptions().batch_rows, ONE_BATCH):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--analyze-cached", str(trace), str(cache_dir),
               str(batch_rows)]
        m = measure_best(cmd, repeat)
        if m.rc != 0:
            raise SystemExit(f"analysis of the cached store failed:\n{m.stderr}")
        out = json.loads(m.stdout)
        reports.append(out["report"])
        rows.append({"n_kernels": n_kernels, "batch_rows": "one per device" if batch_rows == ONE_BATCH
                     else f"{batch_rows:,}", "batches": out["batches"], "steps": out["report"]["steps"]["count"],
                     "analyze_s": out["analyze_s"], "wall_s": m.wall_s, "peak_mb": m.peak_mb})
    if reports[0] != reports[1]:
        raise SystemExit("the batched analysis reported something else than the one-batch analysis")
    return rows


MEMORY_COLUMNS = (
    ("N kernels", lambda r: f"{r['n_kernels']:,}"),
    ("batch rows", lambda r: str(r["batch_rows"])),
    ("batches", lambda r: str(r["batches"])),
    ("steps", lambda r: str(r["steps"])),
    ("analysis s", lambda r: f"{r['analyze_s']:.2f}"),
    ("process wall s", lambda r: f"{r['wall_s']:.2f}"),
    ("peak MB", lambda r: f"{r['peak_mb']:.0f}"),
)

COLUMNS = (
    ("N kernels", lambda r: f"{r['n_kernels']:,}"),
    ("steps from", lambda r: str(r["steps_from"])),
    ("kernel+API read s", lambda r: f"{r['read_s']:.2f}"),
    ("analyze s (first)", lambda r: f"{r['first_s']:.2f}"),
    ("first/read", lambda r: f"{r['first_s'] / r['read_s']:.2f}x"),
    ("peak MB (first)", lambda r: f"{r['first_peak_mb']:.0f}"),
    ("analyze s (cached)", lambda r: f"{r['second_s']:.2f}"),
    ("first/cached", lambda r: f"{r['first_s'] / r['second_s']:.1f}x"),
    ("peak MB (cached)", lambda r: f"{r['second_peak_mb']:.0f}"),
)


def render(rows: list[dict[str, object]], markdown: bool) -> str:
    """The results table (plain or Markdown), then per size: the export, the read's peak and the profile."""
    lines = table(rows, COLUMNS, markdown)
    bullet = "- " if markdown else "  "
    lines.append("")
    for r in rows:
        n = f"{r['n_kernels']:,}"
        gen = "cached" if r["generate_s"] is None else f"generated in {r['generate_s']:.1f} s"
        lines.append(f"{bullet}{n} kernels, {r['steps_from']}: export {r['file_mb']:.0f} MB ({gen}); "
                     f"{r['steps']} steps, verdict {r['verdict']}; kernel+API read peak {r['read_peak_mb']:.0f} MB; "
                     "ingest share of the first "
                     f"analyze about {r['first_s'] - r['second_s']:.2f} s (first minus cached)")
        if r["profile"]:
            lines.append(f"{bullet}{n} kernels: slowest functions (cProfile, cumulative): " + "; ".join(r["profile"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[5_000_000],
                        help="Kernel counts to benchmark (default: 5000000).")
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out",
                        help="Where the synthetic exports are cached (default: bench/out).")
    parser.add_argument("--markdown", action="store_true", help="Print a Markdown table for docs/benchmarks.md.")
    parser.add_argument("--repeat", type=int, default=1, help="Runs per measurement; the fastest counts.")
    parser.add_argument("--profile", action="store_true", help="Also profile one first analyze (cProfile).")
    parser.add_argument("--modes", choices=("both", "step", "whole"), default="both",
                        help="With --step, without it (the whole capture as one step), or both (default).")
    parser.add_argument("--memory", action="store_true",
                        help="Measure the analysis of the cached store alone, batched and in one batch.")
    parser.add_argument("--analyze-cached", nargs=3, metavar=("TRACE", "CACHE_DIR", "BATCH_ROWS"),
                        help=argparse.SUPPRESS)  # child mode of --memory
    args = parser.parse_args(argv)
    if args.analyze_cached:
        trace, cache_dir, batch_rows = args.analyze_cached
        analyze_cached(Path(trace), Path(cache_dir), int(batch_rows))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.memory:
        rows = []
        for n in args.kernels:
            print(f"benchmarking the analysis of {n:,} cached kernels ...", file=sys.stderr, flush=True)
            rows += bench_memory(args.workdir, n, args.repeat)
        print("\n".join(table(rows, MEMORY_COLUMNS, args.markdown)))
        return
    rows = []
    for n in args.kernels:
        print(f"benchmarking analyze on {n:,} kernels ...", file=sys.stderr, flush=True)
        modes = {"both": (True, False), "step": (True,), "whole": (False,)}[args.modes]
        rows += bench_one(args.workdir, n, args.repeat, args.profile, modes)
    print(render(rows, args.markdown))


if __name__ == "__main__":
    main()
