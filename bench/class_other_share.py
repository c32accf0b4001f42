"""Share of GPU time (kernels + memory operations) in class ``other`` for every trace file under a folder.

Prints ``trace<TAB>gpu_ns<TAB>other_pct<TAB>top other kernels``, one file per line (a rank file is one GPU's
trace), so the figure in docs/classes.md and the before/after of a rule change come from one script.

Usage: ``python bench/class_other_share.py [TRACES_DIR]`` (default ``../shared/traces``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernel_names import DEFAULT_DIR, trace_files

from tracekit.budgets.classify import OTHER, class_summary, load_rules
from tracekit.errors import InputError
from tracekit.store.ingest import open_store


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    rules = load_rules()
    for path in trace_files(root):
        try:
            store = open_store([path], use_cache=False)
        except InputError as exc:
            print(f"{path.relative_to(root)}\t-\t-\t{exc}")
            continue
        with store:
            frame = class_summary(store.con)
            gpu_ns = int(frame["total_ns"].sum() or 0)
            other_ns = int(frame.filter(frame["class"] == OTHER)["total_ns"].sum() or 0)
            names = [r[0] for r in store.con.execute(
                "SELECT name FROM kernels GROUP BY name ORDER BY sum(dur_ns) DESC").fetchall()]
        top = [n[:60] for n in names if rules.classify(n) == OTHER][:3]
        pct = f"{100 * other_ns / gpu_ns:.1f}" if gpu_ns else "-"
        print(f"{path.relative_to(root)}\t{gpu_ns}\t{pct}\t{' | '.join(top)}")


if __name__ == "__main__":
    main()
