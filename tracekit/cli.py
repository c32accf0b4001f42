"""The `tracekit` command line: each command is a few lines over the library."""

from __future__ import annotations

import os
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


def parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    """``--set key=value`` pairs as a dict; a malformed one is a usage error naming it."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--set")
        out[key.strip()] = value.strip()
    return out


@main.command()
@input_options
@output_options
@click.option("--config", default=None, help="Named config (see `tracekit configs`) or a TOML file.")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="Concurrent requests in the whole deployment (overrides the config).")
@click.option("--context", type=click.IntRange(min=1), default=None, help="Context tokens per request.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config field.")
@click.option("--step", "step_regex", default=None, metavar="REGEX",
              help="Regex over NVTX/annotation names that marks one step.")
@click.option("--skip-steps", type=click.IntRange(min=0), default=0, show_default=True,
              help="Drop this many warm-up steps.")
@click.option("--threshold", type=click.FloatRange(min=1.0), default=1.3, show_default=True,
              help="Residual ratio under which a step is near the floor; also the over-budget ratio.")
@click.option("--gate", is_flag=True,
              help="Exit 0 near-floor, 10 pipeline, 11 kernel, 12 inconclusive (usage errors stay 2).")
def analyze(store: Store, fmt: str, out_path: Path | None, config: str | None, batch: int | None,
            context: int | None, sets: tuple[str, ...], step_regex: str | None, skip_steps: int,
            threshold: float, gate: bool) -> None:
    """Floor-first triage: steps, host gaps, exposed communication, classes over budget, ncu targets."""
    import re

    from tracekit.analysis.analyze import GATE_EXIT, AnalyzeOptions
    from tracekit.analysis.analyze import analyze as run_analysis
    from tracekit.report import report_document

    overrides = parse_sets(sets)
    if batch is not None:
        overrides["batch"] = str(batch)
    if context is not None:
        overrides["context_tokens"] = str(context)
    if overrides and not config:
        raise click.BadParameter("needs --config", param_hint="--batch/--context/--set")
    if step_regex is not None:
        try:
            re.compile(step_regex)
        except re.error as exc:
            raise click.BadParameter(f"{step_regex!r} is not a regex ({exc})", param_hint="--step") from None
    opts = AnalyzeOptions(config=config, overrides=overrides, step_regex=step_regex, skip_steps=skip_steps,
                          threshold=threshold)
    report = run_analysis(store, opts)
    emit(report_document(report), fmt, out_path)
    if gate:
        sys.exit(GATE_EXIT[report["verdict"]])


# Commands that live in their own modules: (module, attribute names of click commands).
COMMAND_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tracekit.cli_floor", ("floor_cmd", "walls_cmd", "configs_cmd")),
)


def _register_commands() -> None:
    import importlib

    for module_name, names in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        for name in names:
            main.add_command(getattr(module, name))


_register_commands()
