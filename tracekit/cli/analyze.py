"""`tracekit analyze`: the floor-first triage of one capture (all its ranks)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import Lazy, LazyChoice, analysis_options, input_paths_options, output_options
from tracekit.errors import InputError

if TYPE_CHECKING:
    from tracekit.analysis.options import AnalyzeOptions
    from tracekit.store.inputs import Inputs


@click.command()
@input_paths_options
@output_options
@analysis_options
@click.option("--gate", is_flag=True,
              help="Exit 0 near-floor, 10 pipeline, 11 kernel, 12 inconclusive (usage errors stay 2).")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the charts as PNG and SVG into DIR (matplotlib); the Markdown report links them.")
@click.option("--engine", type=LazyChoice(Lazy("tracekit.analysis.engine", "ENGINES")), default="local",
              show_default=True,
              help="Where ingest and per-rank analysis run: here, or as Dask tasks (pip install 'tracekit[dask]').")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="With --engine dask: a running Dask scheduler (default: a local cluster of --jobs workers).")
def analyze(inputs: Inputs, fmt: str, out_path: Path | None, opts: AnalyzeOptions, gate: bool,
            plots_dir: Path | None, engine: str, scheduler: str | None) -> None:
    """Floor-first triage: steps, host gaps, exposed communication, classes over budget, ncu targets."""

    if fmt == "html" and out_path is None:
        raise InputError("--format html: needs --out FILE; the report is one self-contained HTML page")
    from tracekit.analysis.options import GATE_EXIT

    if plots_dir is None and fmt != "html":  # the report alone: from the report cache, or on another engine
        from tracekit.analysis.engine import analyze_inputs

        analysis, report = None, analyze_inputs(inputs, opts, engine, scheduler)
    else:
        if engine != "local":
            raise InputError(f"--engine {engine}: gives the report only; --plots and --format html need --engine local")
        from tracekit.analysis.analyze import run_analysis

        store = inputs.open()
        click.get_current_context().call_on_close(store.close)
        analysis = run_analysis(store, opts)
        report = analysis.report
    plots = []
    if plots_dir is not None:
        from tracekit.report.plots import write_plots

        plots = write_plots(analysis, plots_dir)
    if fmt == "html":
        from tracekit.report.html import write_html_report

        write_html_report(analysis, out_path)
    elif plots:
        from tracekit.report.analysis import report_document
        from tracekit.report.plots import emit_with_plots

        emit_with_plots(report_document(report), fmt, out_path, plots)
    else:  # the report alone (from the report cache, maybe): no plotting or analysis code to load
        from tracekit.cli.rendered import emit_report

        emit_report(report, fmt, out_path, _report_slot(inputs, opts) if engine == "local" else None)
    if gate:
        sys.exit(GATE_EXIT[report["verdict"]])


def _report_slot(inputs: Inputs, opts: AnalyzeOptions) -> Path | None:
    """The report cache's entry for these inputs (its rendering is kept beside it), None without a cache."""
    if not inputs.use_cache:
        return None
    from tracekit.analysis.engine import report_path

    try:
        return report_path(inputs, opts)
    except OSError:  # an input that cannot be read again: the report is printed, its rendering not kept
        return None
