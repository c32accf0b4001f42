"""The `tracekit` command line: each command is a few lines over the library.

Start-up time comes first here: this module and ``common`` import click alone, a command's module is
imported only when that command runs (``COMMANDS``), and each command imports the library inside its
function, so ``tracekit --help`` and a mistyped option load no polars, DuckDB, numpy or pyarrow
(docs/architecture.md, "What loads when")."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from tracekit import __version__
from tracekit.errors import TracekitError

USAGE_ERROR = 2

# Every command: its name, and the module and function that serve it (imported when it is used).
COMMANDS = {
    "ingest": ("trace", "ingest"), "info": ("trace", "info"), "kernels": ("trace", "kernels"),
    "api": ("stats", "api_cmd"), "nvtx": ("stats", "nvtx_cmd"), "memory": ("stats", "memory_cmd"),
    "analyze": ("analyze", "analyze"), "floor": ("floor", "floor_cmd"), "walls": ("floor", "walls_cmd"),
    "configs": ("floor", "configs_cmd"), "predict": ("predict", "predict_cmd"), "cost": ("cost", "cost_cmd"),
    "reconcile": ("reconcile", "reconcile_cmd"), "diff": ("diff", "diff_cmd"), "export": ("export", "export_cmd"),
}


def _is_expected(exc: BaseException) -> bool:
    """A TracekitError, or the standalone floor's ConfigError (looked up only if the floor was imported:
    an exception of a module never loaded cannot have been raised)."""
    floor_errors = sys.modules.get("tracekit.floor.errors")
    return isinstance(exc, TracekitError) or (floor_errors is not None and isinstance(exc, floor_errors.ConfigError))


class TracekitGroup(click.Group):
    """Turns every expected failure into one line on stderr and exit status 2, without a traceback; finds
    each command in ``COMMANDS`` and imports its module only when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *super().list_commands(ctx)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, name = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"tracekit.cli.{module}"), name)
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option value: one line too, not click's usage block
            hint = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
            click.echo(f"tracekit: error: {' '.join(exc.format_message().split()).rstrip('.')}{hint}", err=True)
            sys.exit(USAGE_ERROR)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:
            if _is_expected(exc):
                click.echo(f"tracekit: error: {exc}", err=True)
                sys.exit(USAGE_ERROR)
            if os.environ.get("TRACEKIT_DEBUG"):  # a bug: one line, unless TRACEKIT_DEBUG asks for the traceback
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

