"""The `tracekit` command line: each command is a few lines over the library."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tracekit import __version__
from tracekit.cli_common import input_options
from tracekit.errors import InputError
from tracekit.output import Document, Table, emit, output_options
from tracekit.store import Store

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
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            sys.exit(130)


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
    emit(Document("tracekit ingest", [Table("stores", frame)], notes=store.warnings), fmt, out_path)


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
