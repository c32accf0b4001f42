"""`tracekit ingest`, `info`, `kernels` and `config-draft`: what a capture holds, read from the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import COUNT, input_options, output_options

if TYPE_CHECKING:
    from tracekit.store.ingest import Store


@click.command()
@input_options
@output_options
def ingest(store: Store, fmt: str, out_path: Path | None) -> None:
    """Ingest trace files into the cache (reused when a file is unchanged)."""
    import polars as pl

    from tracekit.report.document import Document, Table
    from tracekit.report.render import emit

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


@click.command()
@input_options
@output_options
def info(store: Store, fmt: str, out_path: Path | None) -> None:
    """GPUs, ranks, processes, streams, time span, event counts, range domains and capture caveats."""
    from tracekit.report.info import info_document
    from tracekit.report.render import emit

    emit(info_document(store), fmt, out_path)


@click.command()
@input_options
@output_options
@click.option("--by", "group_by", type=click.Choice(["name", "short-name", "name-grid-block", "class"]),
              default="name", show_default=True,
              help="Group kernels by full name, base name, name+grid+block (nsys 2022), or kernel class.")
@click.option("--limit", type=COUNT, default=0, help="Show only the top N rows (0: all).")
def kernels(store: Store, fmt: str, out_path: Path | None, group_by: str, limit: int) -> None:
    """Per-kernel summary: instances, total, average, median, min, max, stddev (nsys definitions).

    With ``--by class`` a note gives the share of kernel time no class rule claims (class ``other``)."""
    from tracekit.api.traces import kernels_of  # the API's: tracekit.kernels gives the same document
    from tracekit.report.render import emit

    emit(kernels_of(store, group_by, limit).document(), fmt, out_path)


@click.command("config-draft")
@input_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the TOML to FILE (replaced atomically) instead of standard output.")
def config_draft(store: Store, out_path: Path | None) -> None:
    """A config (TOML) drafted from the trace: the inferred model, GPU, world size and operating point, each
    field marked inferred or assumed. `analyze FILE --config DRAFT.toml` then gives the model floor too."""
    from tracekit.analysis.attribution import register_attribution
    from tracekit.analysis.config_draft import draft_config
    from tracekit.budgets.classify import load_rules
    from tracekit.files import write_atomically
    from tracekit.report.config_draft import draft_toml

    register_attribution(store.con, load_rules())
    text = draft_toml(draft_config(store.con, str(store.files[0].source)))
    if out_path is not None:
        write_atomically(out_path, text)
    else:
        click.echo(text, nl=False)
