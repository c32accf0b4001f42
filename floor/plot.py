"""Optional plot of a walls sweep (matplotlib, imported lazily; the floor itself never needs it)."""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError
from .walls import WallsResult


def plot_walls(walls: WallsResult, path: Path) -> None:
    """Latency (t_opt, t_sum) and tokens/s per GPU against concurrency, with each reachable wall marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib; install it with `pip install tracekit[plot]`") from None
    xs = [p.batch for p in walls.frontier]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(xs, [p.t_opt_ns / 1e6 for p in walls.frontier], label="t_opt (ms)")
    ax.plot(xs, [p.t_sum_ns / 1e6 for p in walls.frontier], "--", label="t_sum (ms)")
    ax.set_xscale("log")
    ax.set_xlabel("concurrent requests (deployment)")
    ax.set_ylabel("step time (ms)")
    ax2 = ax.twinx()
    ax2.plot(
        xs, [p.tokens_per_s_per_gpu for p in walls.frontier], color="tab:green", label="tokens/s per GPU"
    )
    ax2.set_ylabel("tokens/s per GPU")
    for w in walls.walls:
        if w.reachable and w.batch:
            ax.axvline(w.batch, color="grey", linestyle=":")
            ax.annotate(w.name, (w.batch, ax.get_ylim()[1]), rotation=90, va="top", fontsize=8)
    ax.set_title(f"floor walls: {walls.config}")
    fig.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
