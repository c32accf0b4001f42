"""Multi-rank Kineto benchmark: tracekit ingest of a 16-rank set (``--jobs 1`` and ``--jobs N``) vs HTA 0.5.0.

Run: ``.venv/bin/python bench/bench_kineto_ranks.py [--ranks 16] [--total-mb 1500] [--jobs 2] [--repeat N]
[--hta-python bench/.venv-hta/bin/python] [--no-hta] [--markdown]``.

Generates (or reuses, in ``bench/out/kineto_ranks_<ranks>x<MB>``) one PyTorch-profiler JSON trace per
rank with ``bench_kineto.write_trace`` (the realistic event mix of the single-file benchmark: python
functions, cpu ops, [memory] instants, runtime/driver launches, ac2g flows, kernels, memcpy/memset,
ProfilerStep annotations), each with its own seed and ``distributedInfo.rank``. Then, each in a fresh
process tree, it measures wall time and peak memory of

- ``tracekit ingest DIR --jobs 1`` and ``--jobs N`` with an empty cache folder (the whole set into the
  store; the speed-up of ``--jobs`` is the ratio);
- HTA: ``TraceAnalysis(trace_dir=DIR)`` (parses every rank into pandas), in a separate virtualenv
  (``bench/.venv-hta``; HTA is never a tracekit dependency); skipped when that interpreter lacks it.

Peak memory is the largest sum of RSS over the process and all its descendants, sampled every 0.1 s
(both tools use worker processes, so one process's ``ru_maxrss`` would understate them). Targets
(issue 7): tracekit at least 10x faster than HTA with at most a third of its peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kineto import BYTES_PER_EVENT_ESTIMATE, HTA_CHILD, write_trace  # noqa: E402 - sibling script

REPO = Path(__file__).resolve().parent.parent
MB = 1e6
_ONE_RANK = '"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}'


class _RankedOut:
    """A text stream that gives the trace header this rank's ``distributedInfo``."""

    def __init__(self, out: TextIO, rank: int, world_size: int) -> None:
        self.out, self.rank, self.world_size, self.first = out, rank, world_size, True

    def write(self, text: str) -> int:
        if self.first:
            self.first = False
            assert _ONE_RANK in text, "bench_kineto.write_trace changed its header"
            text = text.replace(_ONE_RANK, f'"distributedInfo": {{"backend": "nccl", "rank": {self.rank}, '
                                           f'"world_size": {self.world_size}}}')
        return self.out.write(text)


def _write_rank(path: Path, rank: int, world_size: int, n_events: int) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        write_trace(_RankedOut(out, rank, world_size), n_events, seed=rank)  # type: ignore[arg-type]
    tmp.replace(path)


def make_set(workdir: Path, ranks: int, total_mb: int, jobs: int) -> tuple[Path, float | None]:
    """The rank files (made in ``jobs`` processes unless present) and seconds spent making them."""
    folder = workdir / f"kineto_ranks_{ranks}x{total_mb}"
    paths = [folder / f"rank{r:03d}.pt.trace.json" for r in range(ranks)]
    if all(p.exists() for p in paths):
        return folder, None
    folder.mkdir(parents=True, exist_ok=True)
    n_events = int(total_mb * MB / ranks / BYTES_PER_EVENT_ESTIMATE)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(_write_rank, paths, range(ranks), [ranks] * ranks, [n_events] * ranks))
    return folder, time.perf_counter() - t0


@dataclass
class Measured:
    wall_s: float
    peak_mb: float
    stdout: str = ""


def measure_tree(cmd: list[str], interval_s: float = 0.1, env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` (in ``env``, else this process's): its wall time, the peak of the summed RSS of it and its
    descendants (sampled every ``interval_s``), and its output."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = psutil.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env)
        peak = 0
        while proc.poll() is None:
            total = 0
            with contextlib.suppress(psutil.Error):  # a process may end between listing and reading it
                for p in [proc, *proc.children(recursive=True)]:
                    total += p.memory_info().rss
            peak = max(peak, total)
            time.sleep(interval_s)
        wall_s = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:3])} ... failed:\n{proc.stderr.read().decode()[-2000:]}")
        out.seek(0)
        return Measured(wall_s, peak / MB, out.read())


def fastest(cmd: list[str], repeat: int, cache: Path) -> tuple[Measured, list[float]]:
    """``cmd`` run ``repeat`` times from an empty ``cache``: the fastest run (largest peak) and every wall time."""
    runs = []
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        runs.append(measure_tree(cmd))
    best = min(runs, key=lambda m: m.wall_s)
    return Measured(best.wall_s, max(m.peak_mb for m in runs), best.stdout), [m.wall_s for m in runs]


def slowest_stage(ingest_json: str) -> str:
    """The ingest stage with the most seconds (summed over files), from ``tracekit ingest --format json``."""
    stages = {row["stage"]: row["seconds"] for row in json.loads(ingest_json)["stages"]}
    name = max(stages, key=stages.__getitem__)
    return f"{name} ({stages[name]:.1f} s of {sum(stages.values()):.1f} s summed over files and workers)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--total-mb", type=int, default=1500, help="JSON size of the whole set (default 1500)")
    parser.add_argument("--jobs", type=int, default=2, help="tracekit --jobs for the parallel run (default 2)")
    parser.add_argument("--hta-python", type=Path, default=REPO / "bench" / ".venv-hta" / "bin" / "python",
                        help="interpreter of a virtualenv with HolisticTraceAnalysis 0.5.0")
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out")
    parser.add_argument("--no-hta", action="store_true", help="measure tracekit only")
    parser.add_argument("--repeat", type=int, default=1, help="tracekit runs each (fastest reported, with the spread)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)

    folder, gen_s = make_set(args.workdir, args.ranks, args.total_mb, args.jobs)
    json_mb = sum(p.stat().st_size for p in folder.glob("*.json")) / MB
    for p in folder.glob("*.json"):  # warm the page cache the same way for every tool
        with p.open("rb") as f:
            while f.read(16 << 20):
                pass
    exe = Path(sys.executable).with_name("tracekit")
    cache = args.workdir / "kineto-ranks-cache"
    rows: list[tuple[str, Measured]] = []
    spreads: dict[str, list[float]] = {}
    for jobs in sorted({1, args.jobs}):
        name = f"tracekit ingest --jobs {jobs}"
        measured, spreads[name] = fastest(
            [str(exe), "ingest", str(folder), "--cache-dir", str(cache), "--jobs", str(jobs), "--quiet",
             "--format", "json"], max(1, args.repeat), cache)
        rows.append((name, measured))
    shutil.rmtree(cache, ignore_errors=True)
    hta_note = None
    has_hta = (not args.no_hta and args.hta_python.exists() and subprocess.run(
        [str(args.hta_python), "-c", "import hta"], capture_output=True).returncode == 0)
    if has_hta:
        rows.append(("HTA 0.5.0 TraceAnalysis", measure_tree([str(args.hta_python), "-c", HTA_CHILD, str(folder)])))
    else:
        hta_note = f"HTA not measured: {args.hta_python} cannot import hta"

    header = ["tool", "wall s", "peak MB (process tree)", "peak / JSON"]
    body = [[name, f"{m.wall_s:.1f}", f"{m.peak_mb:,.0f}", f"{m.peak_mb / json_mb:.2f}x"] for name, m in rows]
    if args.markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
    else:
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    bullet = "- " if args.markdown else "  "
    gen = "cached" if gen_s is None else f"generated in {gen_s:.0f} s"
    lines += ["", f"{bullet}{args.ranks} rank files, {json_mb:,.0f} MB of JSON ({gen})"]
    measured = dict(rows)
    serial, parallel = measured["tracekit ingest --jobs 1"], measured[f"tracekit ingest --jobs {args.jobs}"]
    lines.append(f"{bullet}--jobs {args.jobs} speed-up over --jobs 1: {serial.wall_s / parallel.wall_s:.2f}x")
    for name, walls in spreads.items():
        if len(walls) > 1:
            lines.append(f"{bullet}{name}: fastest of {len(walls)} runs ({', '.join(f'{w:.1f}' for w in walls)} s)")
    lines.append(f"{bullet}slowest ingest stage (--jobs 1): {slowest_stage(serial.stdout)}")
    if has_hta:
        hta = measured["HTA 0.5.0 TraceAnalysis"]
        lines.append(f"{bullet}tracekit --jobs {args.jobs} vs HTA: {hta.wall_s / parallel.wall_s:.1f}x faster, "
                     f"{parallel.peak_mb / hta.peak_mb:.2f} of its peak memory "
                     "(targets: >= 10x faster, <= 0.33 of the memory)")
    if hta_note:
        lines.append(f"{bullet}{hta_note}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
