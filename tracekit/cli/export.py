"""`tracekit export`: the store as partitioned Parquet, and/or the analysis as a Perfetto timeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import check_step_regex, input_options, output_options
from tracekit.errors import InputError

if TYPE_CHECKING:
    from tracekit.store.ingest import Store


@click.command("export")
@input_options
@output_options
@click.option("--parquet", "parquet_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the store as Parquet partitioned by rank: DIR/<table>/rank=<r>/*.parquet.")
@click.option("--perfetto", "perfetto_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the analysed timeline (steps, gaps, kernels) as a Perfetto/Chrome trace JSON.")
@click.option("--config", default=None, help="With --perfetto: named config or TOML file for kernel classes.")
@click.option("--step", "step_regex", default=None, metavar="REGEX",
              help="With --perfetto: regex over NVTX/annotation names that marks one step.")
def export_cmd(store: Store, fmt: str, out_path: Path | None, parquet_dir: Path | None,
               perfetto_path: Path | None, config: str | None, step_regex: str | None) -> None:
    """Export traces for other tools: partitioned Parquet (DuckDB, polars, Spark) and Perfetto."""

    if parquet_dir is None and perfetto_path is None:
        raise InputError("export: give --parquet DIR and/or --perfetto OUT.json")
    if step_regex is not None:
        check_step_regex(step_regex)
    import polars as pl

    from tracekit.report.document import Document, Table
    from tracekit.report.render import emit

    tables = []
    if parquet_dir is not None:
        from tracekit.store.export import export_parquet

        rows = export_parquet(store, parquet_dir)
        tables.append(Table(f"parquet in {parquet_dir}", pl.DataFrame(
            {"table": list(rows), "rows": list(rows.values())}, schema={"table": pl.String, "rows": pl.Int64})))
    if perfetto_path is not None:
        from tracekit.analysis.analyze import run_analysis
        from tracekit.analysis.options import AnalyzeOptions
        from tracekit.report.perfetto import write_perfetto

        write_perfetto(run_analysis(store, AnalyzeOptions(config=config, step_regex=step_regex)), perfetto_path)
        tables.append(Table("perfetto", pl.DataFrame({"file": [str(perfetto_path)]})))
    emit(Document("tracekit export", tables, notes=store.warnings), fmt, out_path)
