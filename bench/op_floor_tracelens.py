"""The op floor's per-op FLOPs and bytes against TraceLens's perf-report CSVs (same ops, same recorded shapes).

Writes the comparison table of docs/op-floor.md (between its ``tracelens`` markers): per reference folder and
CSV, the rows compared and the largest relative difference in GFLOPs and in bytes, and each row whose bytes
differ by more than 0.1 % with TraceLens's and tracekit's figures.

    python bench/op_floor_tracelens.py [TRACES_DIR]   # default ../shared/traces
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from floor.ops import op_work  # noqa: E402

DOC = ROOT / "docs" / "op-floor.md"
BEGIN, END = "<!-- tracelens:begin -->", "<!-- tracelens:end -->"
SKIP = ("ops_", "gpu_", "kernel_", "short", "unified")


def rows(folder: Path) -> list[tuple[str, dict[str, str]]]:
    out = []
    for f in sorted(folder.glob("*.csv")):
        if f.name.startswith(SKIP):
            continue
        with f.open(encoding="utf-8") as fh:
            out += [(f.name, r) for r in csv.DictReader(fh)]
    return out


def compare(traces: Path) -> str:
    summary = ["| reference | CSV | rows | max GFLOPs diff | max bytes diff |", "|---|---|---:|---:|---:|"]
    differing = ["| reference | op | shapes | TraceLens MiB | tracekit MiB | diff |", "|---|---|---|---:|---:|---:|"]
    for folder in sorted((traces / "torch" / "reference-tracelens").iterdir()):
        by_csv: dict[str, list[tuple[float | None, float]]] = {}
        for name, r in rows(folder):
            lit = [ast.literal_eval(r[c]) for c in ("Input Dims_first", "Input type_first", "Input Strides_first",
                                                    "Concrete Inputs_first")]
            w = op_work(r["name"], *lit)
            gf, mb = float(r["GFLOPS_first"]), float(r["Data Moved (MB)_first"])
            flop_diff = None if w is None or not w.flops else abs(w.flops / 1e9 - gf) / gf if gf else 0.0
            byte_diff = abs(w.hbm_bytes / 2**20 - mb) / mb if w is not None and mb else float("nan")
            by_csv.setdefault(name, []).append((flop_diff, byte_diff))
            if w is not None and byte_diff > 1e-3:
                differing.append(f"| {folder.name} | `{r['name']}` | `{r['Input Dims_first']}` | {mb:.3f} | "
                                 f"{w.hbm_bytes / 2**20:.3f} | {100 * (w.hbm_bytes / 2**20 - mb) / mb:+.1f} % |")
        for name, diffs in by_csv.items():
            flops = [d for d, _ in diffs if d is not None]
            flop_text = f"{100 * max(flops):.3f} %" if flops else "no FLOP model (bytes only)"
            summary.append(f"| {folder.name} | {name} | {len(diffs)} | {flop_text} | "
                           f"{100 * max(b for _, b in diffs):.2f} % |")
    return "\n".join(summary) + "\n\nRows whose bytes differ by more than 0.1 %:\n\n" + "\n".join(differing)


def main() -> None:
    traces = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "traces"
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{compare(traces)}\n{END}{tail}", encoding="utf-8")
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
