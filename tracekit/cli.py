"""The `tracekit` command line: each command is a few lines over the library."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracekit import __version__
from tracekit.cli_common import Inputs, input_options, input_paths_options
from tracekit.cli_options import analysis_options
from tracekit.errors import InputError
from tracekit.output import Document, Table, emit, output_options
from tracekit.store import Store

if TYPE_CHECKING:
    from tracekit.analysis.analyze import AnalyzeOptions

USAGE_ERROR = 2


class TracekitGroup(click.Group):
    """Turns every expected failure into one line on stderr and exit status 2, without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        from tracekit.floor import ConfigError

        try:
            return super().invoke(ctx)
        except (InputError, ConfigError) as exc:
            click.echo(f"tracekit: error: {exc}", err=True)
            sys.exit(USAGE_ERROR)
        except click.UsageError as exc:  # a bad option value: one line too, not click's usage block
            hint = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
            click.echo(f"tracekit: error: {' '.join(exc.format_message().split()).rstrip('.')}{hint}", err=True)
            sys.exit(USAGE_ERROR)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # a bug: one line, unless TRACEKIT_DEBUG asks for the traceback
            if os.environ.get("TRACEKIT_DEBUG"):
                raise
            detail = " ".join(str(exc).split())[:300]
            click.echo(f"tracekit: internal error: {type(exc).__name__}: {detail} "
                       "(set TRACEKIT_DEBUG=1 for the traceback)", err=True)
            sys.exit(1)


@click.group(cls=TracekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main() -> None:
    """Floor-first triage of LLM serving and training traces.

    Reads Nsight Systems SQLite exports and PyTorch profiler traces into a cached DuckDB store.
    """


@main.command()
@input_options
@output_options
def ingest(store: Store, fmt: str, out_path: Path | None) -> None:
    """Ingest trace files into the cache (reused when a file is unchanged)."""
    import polars as pl

    frame = pl.DataFrame({
        "rank": [f.rank for f in store.files],
        "file": [str(f.source) for f in store.files],
        "format": [f.fmt for f in store.files],
        "reused": [f.reused for f in store.files],
        "store": [str(f.db) for f in store.files],
    })
    stages = pl.DataFrame({"stage": list(store.stages), "seconds": [round(v, 3) for v in store.stages.values()]},
                          schema={"stage": pl.String, "seconds": pl.Float64})
    emit(Document("tracekit ingest", [Table("stores", frame),
                                      Table("stages", stages, note="seconds per ingest stage, summed over files")],
                  notes=store.warnings), fmt, out_path)


@main.command()
@input_options
@output_options
def info(store: Store, fmt: str, out_path: Path | None) -> None:
    """GPUs, ranks, processes, streams, time span, event counts, range domains and capture caveats."""
    from tracekit.info import info_document

    emit(info_document(store), fmt, out_path)


@main.command()
@input_options
@output_options
@click.option("--by", "group_by", type=click.Choice(["name", "short-name", "name-grid-block", "class"]),
              default="name", show_default=True,
              help="Group kernels by full name, base name, name+grid+block (nsys 2022), or kernel class.")
@click.option("--config", default=None, help="Named config whose class rules apply with --by class.")
@click.option("--limit", type=click.IntRange(min=0), default=0, help="Show only the top N rows (0: all).")
def kernels(store: Store, fmt: str, out_path: Path | None, group_by: str, config: str | None,
            limit: int) -> None:
    """Per-kernel summary: instances, total, average, median, min, max, stddev (nsys definitions)."""
    from tracekit import summaries

    if group_by == "class":
        from tracekit.budgets.classify import class_summary

        frame = class_summary(store.con, config)
    else:
        frame = summaries.kernel_summary(store.con, by=group_by.replace("-", "_"))
    if limit:
        frame = frame.head(limit)
    emit(Document("tracekit kernels", [Table(f"kernels by {group_by}", frame)], notes=store.warnings),
         fmt, out_path)


@main.command()
@input_paths_options
@output_options
@analysis_options
@click.option("--gate", is_flag=True,
              help="Exit 0 near-floor, 10 pipeline, 11 kernel, 12 inconclusive (usage errors stay 2).")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the charts as PNG and SVG into DIR (matplotlib); the Markdown report links them.")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where ingest and per-rank analysis run: here, or as Dask tasks (pip install 'tracekit[dask]').")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="With --engine dask: a running Dask scheduler (default: a local cluster of --jobs workers).")
def analyze(inputs: Inputs, fmt: str, out_path: Path | None, opts: AnalyzeOptions, gate: bool,
            plots_dir: Path | None, engine: str, scheduler: str | None) -> None:
    """Floor-first triage: steps, host gaps, exposed communication, classes over budget, ncu targets."""
    from tracekit.analysis.analyze import GATE_EXIT, run_analysis
    from tracekit.report import report_document

    if fmt == "html" and out_path is None:
        raise InputError("--format html: needs --out FILE; the report is one self-contained HTML page")
    if plots_dir is None and fmt != "html":  # the report alone: from the report cache, or on another engine
        from tracekit.engine import analyze_inputs

        analysis, report = None, analyze_inputs(inputs, opts, engine, scheduler)
    else:
        if engine != "local":
            raise InputError(f"--engine {engine}: gives the report only; --plots and --format html need --engine local")
        store = inputs.open()
        click.get_current_context().call_on_close(store.close)
        analysis = run_analysis(store, opts)
        report = analysis.report
    plots = []
    if plots_dir is not None:
        from tracekit.plots import write_plots

        plots = write_plots(analysis, plots_dir)
    if fmt == "html":
        from tracekit.html_report import write_html_report

        write_html_report(analysis, out_path)
    else:
        from tracekit.plots import emit_with_plots

        emit_with_plots(report_document(report), fmt, out_path, plots)
    if gate:
        sys.exit(GATE_EXIT[report["verdict"]])


# Commands that live in their own modules: (module, attribute names of click commands).
COMMAND_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tracekit.cli_floor", ("floor_cmd", "walls_cmd", "configs_cmd")),
    ("tracekit.cli_predict", ("predict_cmd",)),
    ("tracekit.cli_cost", ("cost_cmd",)),
    ("tracekit.cli_reconcile", ("reconcile_cmd",)),
    ("tracekit.cli_diff", ("diff_cmd",)),
    ("tracekit.cli_export", ("export_cmd",)),
)


def _register_commands() -> None:
    import importlib

    for module_name, names in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        for name in names:
            main.add_command(getattr(module, name))


_register_commands()
