"""Optional plot for ``tracekit reconcile --plot``: the floor's walls with the measured points on them
(matplotlib, imported lazily; install the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.errors import InputError
from tracekit.files import write_with
from tracekit.schema.reconcile import Sweep, typed_sweep


def plot_sweep(section: dict[str, Any] | Sweep, config: str, path: Path) -> None:
    """Left: TPOT against concurrency (floor t_opt and t_sum, measured P50 and P99, walls marked).
    Right: tokens/s per GPU against TPOT (the floor's frontier and the measured goodput points)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib; install it with `pip install tracekit[plot]`") from None
    sweep = section if isinstance(section, Sweep) else typed_sweep(section)
    front, pts = sweep.frontier, sweep.points
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot([p.batch for p in front], [p.t_opt_ns / 1e6 for p in front], label="floor t_opt")
    left.plot([p.batch for p in front], [p.t_sum_ns / 1e6 for p in front], "--", label="floor t_sum")
    left.plot([p.batch for p in pts], [p.tpot_ns_p50 / 1e6 for p in pts], "o", label="measured TPOT P50")
    p99 = [p for p in pts if p.tpot_ns_p99]
    left.plot([p.batch for p in p99], [p.tpot_ns_p99 / 1e6 for p in p99], "o", mfc="none",
              label="measured TPOT P99")
    for w in sweep.walls:
        if w.reachable and w.batch:
            left.axvline(w.batch, color="grey", linestyle=":")
            left.annotate(w.name, (w.batch, left.get_ylim()[1]), rotation=90, va="top", fontsize=8)
    left.set_xscale("log")
    left.set_xlabel("concurrent requests (deployment)")
    left.set_ylabel("TPOT / step time (ms)")
    left.legend(fontsize=8)
    right.plot([p.t_opt_ns / 1e6 for p in front], [p.tokens_per_s_per_gpu for p in front],
               label="floor frontier")
    right.plot([p.tpot_ns_p50 / 1e6 for p in pts], [p.tokens_per_s_per_gpu for p in pts], "o",
               label="measured (TPOT P50)")
    for i, p in enumerate(pts, 1):
        right.annotate(str(i), (p.tpot_ns_p50 / 1e6, p.tokens_per_s_per_gpu), fontsize=8)
    right.set_xlabel("TPOT (ms)")
    right.set_ylabel("output tokens/s per GPU")
    right.legend(fontsize=8)
    fig.suptitle(f"floor and measured goodput: {config.replace('$', '')} at {sweep.context_tokens} tokens")
    fig.tight_layout()
    try:
        write_with(path, "--plot", lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)
