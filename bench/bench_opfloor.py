"""Benchmark: what the op floor and the per-layer grouping add to `tracekit analyze` on a Kineto trace.

Generates the synthetic trace of ``bench_kineto.py`` (every cpu op records ``Input Dims`` and types, so every
launch has an op with a floor), ingests it once into a cache folder, then in a fresh child process runs the
whole analysis (``tracekit.analysis.analyze.run_analysis``, no report cache, no config: the op floor decides)
with the op-floor functions timed: the kernel-to-op attribution (``register_attribution``), the model-shape
inference, the op floor itself, the per-layer table and work inflation. It prints their seconds, the rest of
the analysis, and the share they add (op-floor seconds / the rest).

    python bench/bench_opfloor.py                  # ~1 GB trace (4.4 M events)
    python bench/bench_opfloor.py --events 1000000 # the largest that runs in minutes on a loaded machine
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kineto import generate  # noqa: E402 - the sibling script's trace, reused rather than copied

CHILD = r"""
import json, sys, time
from pathlib import Path
import tracekit.analysis.analyze as A
import tracekit.analysis.ops as O
from tracekit.analysis.options import AnalyzeOptions
from tracekit.store.ingest import open_store

spent = {}
def timed(module, name, label):
    fn = getattr(module, name)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
    setattr(module, name, wrapper)

timed(O, "register_attribution", "attribution")
timed(A, "register_attribution", "attribution")
timed(A, "infer_shape", "model_shape")
timed(A, "compute_op_floor", "op_floor")
timed(A, "layer_tables", "layers")
timed(A, "load_modules", "layers")
timed(A, "work_inflation", "work_inflation")
store = open_store([Path(sys.argv[1])], cache_dir=Path(sys.argv[2]))
t0 = time.perf_counter()
report = A.run_analysis(store, AnalyzeOptions()).report
total = time.perf_counter() - t0
print(json.dumps({"total_s": total, "spent": spent, "verdict": report["verdict"], "floor_used": report["floor_used"],
                  "steps": report["steps"]["count"], "covered": report["op_floor"]["covered_fraction"],
                  "kernels": store.con.execute("SELECT count(*) FROM kernels").fetchone()[0],
                  "op_shapes": store.con.execute("SELECT count(*) FROM op_shapes").fetchone()[0]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=4_400_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, cache = Path(tmp) / "trace.json", Path(tmp) / "cache"
        t0 = time.perf_counter()
        n = generate(trace, args.events)
        print(f"generated {n:,} events, {trace.stat().st_size / 1e6:,.1f} MB of JSON "
              f"in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        tracekit = Path(sys.executable).with_name("tracekit")
        subprocess.run([str(tracekit), "ingest", str(trace), "--cache-dir", str(cache), "-q"], check=True,
                       capture_output=True)
        print(f"ingest (once, not counted): {time.perf_counter() - t0:.1f} s")
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(cache)], check=True,
                                 capture_output=True, text=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["total_s"])
        added = sum(best["spent"].values())
        rest = best["total_s"] - added
        print(f"{best['kernels']:,} GPU kernels, {best['op_shapes']:,} ops with shapes, {best['steps']} steps; "
              f"verdict {best['verdict']} from the {best['floor_used']} floor; "
              f"{100 * best['covered']:.1f}% of GPU time has an op floor")
        print(f"analysis {best['total_s']:.2f} s (fastest of {len(runs)}): op floor parts {added:.2f} s "
              f"({', '.join(f'{k} {v:.2f} s' for k, v in best['spent'].items())}), the rest {rest:.2f} s; "
              f"added {100 * added / rest:.0f}% to the rest of the analysis")


if __name__ == "__main__":
    main()
