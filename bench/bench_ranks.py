"""Cross-rank analysis at scale: time against ranks x collectives, locally and with ``--engine dask``.

Run: ``.venv/bin/python bench/bench_ranks.py [--ranks 8 16 32 64] [--steps 25 100] [--repeat 3] [--dask]``
(prints Markdown).

For each (ranks, steps) it writes (or reuses, in ``bench/out/ranks_<R>x<S>``) the planted multi-rank job of
``fixtures/scenarios_ranks.py`` as one PyTorch-profiler file per rank (8 ranks per host, one straggler, two
collectives per step), runs the per-rank part of ``analyze`` once, then times the cross-rank part alone
(``tracekit.analysis.crossrank.cross_rank``: matching, clocks, wait and transfer, stragglers, the exposed
split; the fastest of ``--repeat``) and reports it per collective record (ranks x collectives per rank):
time linear in ranks x collectives keeps that figure flat. With ``--dask`` the largest job is also analysed
end to end by ``tracekit analyze --engine dask`` and by the local engine (fresh processes, empty cache), and
the two reports' ``ranks`` sections must be equal.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from fixtures.scenarios_ranks import ranks_capture  # noqa: E402 - the repository's fixtures
from fixtures.synth import write_kineto  # noqa: E402
from tracekit.analysis.analyze import analyze_devices  # noqa: E402
from tracekit.analysis.crossrank import RankMeta, cross_rank  # noqa: E402
from tracekit.analysis.options import AnalyzeOptions  # noqa: E402
from tracekit.store.ingest import open_store  # noqa: E402


def make_job(ranks: int, steps: int) -> Path:
    folder = REPO / "bench" / "out" / f"ranks_{ranks}x{steps}"
    if folder.is_dir() and len(list(folder.glob("*.json.gz"))) == ranks:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    specs, _ = ranks_capture("kineto", ranks=ranks, ranks_per_host=8, steps=steps, straggler=ranks // 2 + 1,
                             host_offsets_ns=tuple(250_000 * h for h in range(ranks // 8)))
    for rank, spec in enumerate(specs):
        write_kineto(spec, folder / f"rank{rank:03d}.pt.trace.json.gz")
    return folder


def time_cross_rank(folder: Path, repeat: int) -> tuple[float, int, dict]:
    """Fastest cross-rank time, collective records, and the section it produced."""
    with open_store([folder], cache_dir=folder / "cache") as store:
        results = analyze_devices(store, AnalyzeOptions())
        meta = RankMeta.load(store.con)
        best, section = float("inf"), {}
        for _ in range(repeat):
            t0 = time.perf_counter()
            cross = cross_rank(results, meta, None)
            best = min(best, time.perf_counter() - t0)
            section = cross.section
    return best, sum(len(r.collectives) for r in results), section


def analyze_wall(folder: Path, engine: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as cache:
        cmd = [str(REPO / ".venv" / "bin" / "tracekit"), "analyze", str(folder), "--cache-dir", cache, "--format",
               "json", "--engine", engine, "--jobs", "2", "--quiet"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return time.perf_counter() - t0, json.loads(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--steps", type=int, nargs="+", default=[25, 100])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dask", action="store_true")
    args = parser.parse_args(argv)
    rows, notes = [], []
    for steps in args.steps:
        for ranks in args.ranks:
            seconds, records, section = time_cross_rank(make_job(ranks, steps), args.repeat)
            s = section["straggler"]
            rows.append((ranks, 2 * steps, records, seconds, seconds / records * 1e6))
            notes.append(f"{ranks} ranks x {2 * steps} collectives: {section['instances']['matched']} matched, "
                         f"straggler rank {s['rank']} ({s['cause']['kind']}, {s['cause']['detail']})")
    print("| ranks | collectives per rank | records | cross-rank s | µs per record |")
    print("|---:|---:|---:|---:|---:|")
    for ranks, per_rank, records, seconds, per in rows:
        print(f"| {ranks} | {per_rank} | {records:,} | {seconds:.3f} | {per:.1f} |")
    print()
    for n in notes:
        print(f"- {n}")
    if args.dask:
        folder = make_job(max(args.ranks), max(args.steps))
        local_s, local = analyze_wall(folder, "local")
        dask_s, dask = analyze_wall(folder, "dask")
        same = local["ranks"] == dask["ranks"]
        print(f"- {max(args.ranks)} ranks x {2 * max(args.steps)} collectives end to end (ingest + analysis, "
              f"empty cache, --jobs 2): local {local_s:.1f} s, --engine dask {dask_s:.1f} s; ranks sections "
              f"{'equal' if same else 'DIFFER'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
