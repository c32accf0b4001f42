"""`tracekit baseline save NAME REPORT|TRACE` and `tracekit baseline list`: named baselines for
`diff --against baseline:NAME` (over tracekit.compare.baseline)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import analysis_options, default_jobs, output_options

if TYPE_CHECKING:
    from tracekit.analysis.options import AnalyzeOptions

DIR_OPTION = click.option("--baselines", "baselines_dir", type=click.Path(file_okay=False, path_type=Path),
                          default=None, help="Where named baselines are kept (default: $XDG_CACHE_HOME/tracekit/"
                          "baselines).")


@click.group("baseline")
def baseline_cmd() -> None:
    """Named baselines for `tracekit diff AFTER --against baseline:NAME`."""


@baseline_cmd.command("save")
@click.argument("name")
@click.argument("inputs", nargs=1, type=click.Path(path_type=Path))
@DIR_OPTION
@analysis_options
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store, discarded afterwards.")
@output_options
def save_cmd(name: str, inputs: Path, baselines_dir: Path | None, opts: AnalyzeOptions, cache_dir: Path | None,
             no_cache: bool, fmt: str, out_path: Path | None) -> None:
    """Keep REPORT (analyze JSON) or TRACE (analysed with the options given) as baseline NAME."""
    from tracekit.compare import baseline as bl
    from tracekit.compare.diff import load_side
    from tracekit.report.document import Document
    from tracekit.report.render import emit

    bl.check_name(name)
    side = load_side(inputs, opts, cache_dir, not no_cache, default_jobs([inputs]))
    path = bl.save(name, side.report, baselines_dir, str(inputs))
    emit(Document("tracekit baseline save", [], [f"baseline {name}: {path} (from the {side.kind} {inputs}; "
                                                 f"verdict {side.report['verdict']}, "
                                                 f"{side.report['steps']['count']} steps)"],
                  data={"name": name, "path": str(path), "source": str(inputs), "kind": side.kind}), fmt, out_path)


@baseline_cmd.command("list")
@DIR_OPTION
@output_options
def list_cmd(baselines_dir: Path | None, fmt: str, out_path: Path | None) -> None:
    """The saved baselines."""
    import polars as pl

    from tracekit.compare import baseline as bl
    from tracekit.report.document import Document, Table, ms_value
    from tracekit.report.render import emit

    rows = bl.listing(baselines_dir)
    table = pl.DataFrame([{"name": r["name"], "config": r["config"], "verdict": r["verdict"],
                           "step p50 ms": ms_value(r["step_ns_p50"]), "steps": r["steps"], "path": r["path"]}
                          for r in rows],
                         schema={"name": pl.String, "config": pl.String, "verdict": pl.String,
                                 "step p50 ms": pl.Float64, "steps": pl.Int64, "path": pl.String})
    emit(Document("tracekit baseline list", [Table("baselines", table)],
                  [f"baselines in {bl.baseline_dir(baselines_dir)}"], data={"baselines": rows}), fmt, out_path)
