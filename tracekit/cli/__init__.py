"""The `tracekit` command line: each command is a few lines over the library."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tracekit import __version__
from tracekit.errors import TracekitError
from tracekit.floor.errors import ConfigError

USAGE_ERROR = 2


class TracekitGroup(click.Group):
    """Turns every expected failure into one line on stderr and exit status 2, without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (TracekitError, ConfigError) as exc:
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


# Every command, by the module that serves it.
from tracekit.cli import analyze, cost, diff, export, floor, predict, reconcile, stats, trace  # noqa: E402

for command in (trace.ingest, trace.info, trace.kernels, stats.api_cmd, stats.nvtx_cmd, stats.memory_cmd,
                analyze.analyze, floor.floor_cmd, floor.walls_cmd, floor.configs_cmd, predict.predict_cmd,
                cost.cost_cmd, reconcile.reconcile_cmd, diff.diff_cmd, export.export_cmd):
    main.add_command(command)
