"""Optional plot of a walls sweep (matplotlib, imported lazily; the floor itself never needs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError
from .walls import WallsResult


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib; install it with `pip install tracekit[plot]`") from None
    return plt


def walls_figure(walls: WallsResult, other: WallsResult | None = None) -> Any:
    """Latency (t_opt, t_sum) and tokens/s per GPU against concurrency, each reachable wall marked; the
    ``--vs`` config's curves beside them and the TPOT SLO as a line, when given. The axes print plain
    numbers: no offset or scientific label, so a flat line never reads as a jump."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax2 = ax.twinx()
    for result, style in ((walls, "-"), (other, ":")):
        if result is None:
            continue
        xs = [p.batch for p in result.frontier]
        name = f" {result.config}" if other is not None else ""
        ax.plot(xs, [p.t_opt_ns / 1e6 for p in result.frontier], style, color="tab:blue",
                label=f"t_opt{name} (ms)")
        ax.plot(xs, [p.t_sum_ns / 1e6 for p in result.frontier], style, color="tab:orange",
                label=f"t_sum{name} (ms)")
        ax2.plot(xs, [p.tokens_per_s_per_gpu for p in result.frontier], style, color="tab:green",
                 label=f"tokens/s per GPU{name}")
    if walls.slo is not None:
        ax.axhline(walls.slo.target_ns / 1e6, color="tab:red", linestyle="--",
                   label=f"TPOT SLO {walls.slo.target_ns / 1e6:g} ms")
    ax.set_xscale("log")
    ax.set_xlabel("concurrent requests (deployment)")
    ax.set_ylabel("step time (ms)")
    ax2.set_ylabel("tokens/s per GPU")
    for axis in (ax, ax2):
        axis.ticklabel_format(axis="y", style="plain", useOffset=False)
    top = ax.get_ylim()[1]
    for w in walls.walls:
        if w.reachable and w.batch:
            ax.axvline(w.batch, color="grey", linestyle=":")
            ax.annotate(w.name, (w.batch, top), rotation=90, va="top", fontsize=8)
    title = f"floor walls: {walls.config}" + (f" vs {other.config} (dotted)" if other is not None else "")
    if walls.crossover is not None and walls.crossover.batch:
        title += f"; crossover at {walls.crossover.batch}"
    ax.set_title(title)
    fig.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_walls(walls: WallsResult, path: Path, other: WallsResult | None = None, fmt: str | None = None) -> None:
    """Write ``walls_figure`` to ``path`` (``fmt``: png or svg; default from the path's suffix)."""
    plt = _pyplot()
    fig = walls_figure(walls, other)
    fig.savefig(path, format=fmt)
    plt.close(fig)
