"""`tracekit reconcile`: serving-benchmark results against the floor (over tracekit.compare.reconcile)."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.cli.common import NEAR_FLOOR_THRESHOLD, THRESHOLD, output_options, parse_sets
from tracekit.errors import InputError


@click.command("reconcile")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--config", required=True, help="Named config (see `tracekit configs`) or a TOML file.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override any config field (batch and context_tokens replace the derived ones).")
@click.option("--threshold", type=THRESHOLD, default=NEAR_FLOOR_THRESHOLD, show_default=True,
              help="Residual ratio (TPOT / t_opt) under which a run is near the floor.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the walls plot with the measured points to FILE.png (matplotlib).")
@output_options
def reconcile_cmd(results: tuple[Path, ...], config: str, sets: tuple[str, ...], threshold: float,
                  plot_path: Path | None, fmt: str, out_path: Path | None) -> None:
    """Place serving-benchmark TPOT (vLLM, SGLang, GenAI-Perf, AIPerf, GuideLLM results) against the floor."""
    from tracekit.compare.benchresults import read_results
    from tracekit.compare.reconcile import ReconcileOptions, reconcile, sweep
    from tracekit.report.reconcile import reconcile_document
    from tracekit.report.render import emit

    opts = ReconcileOptions(config=config, overrides=parse_sets(sets), threshold=threshold)
    doc = reconcile(read_results(list(results)), opts)
    if plot_path is not None:
        from tracekit.report.reconcile_plot import plot_sweep

        points = sweep(doc["results"], opts, min_points=1)
        if points is None:
            raise InputError(f"--plot {plot_path}: no run could be placed against the floor; nothing to plot")
        plot_sweep(points, config, plot_path)
        doc["plot"] = str(plot_path)
    emit(reconcile_document(doc), fmt, out_path)
