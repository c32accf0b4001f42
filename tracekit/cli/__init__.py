"""The `tracekit` command line: each command is a few lines over the library.

Start-up time comes first here: this module and ``common`` import click alone, a command's module is
imported only when that command runs (``COMMANDS``), and each command imports the library inside its
function, so ``tracekit --help`` and a mistyped option load no polars, DuckDB, numpy or pyarrow
(docs/architecture.md, "What loads when")."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

from tracekit import __version__
from tracekit.errors import TracekitError

USAGE_ERROR = 2


def one_line(message: object) -> str:
    """A message as one printable line: whitespace runs (line breaks, the separators str.split knows) as one
    space, and any control character left (echoed input can hold one) as a visible escape."""
    from tracekit.files import printable

    return printable(" ".join(str(message).split()))

# Every command: its name, and the module and function that serve it (imported when it is used).
COMMANDS = {
    "ingest": ("trace", "ingest"), "info": ("trace", "info"), "kernels": ("trace", "kernels"),
    "config-draft": ("trace", "config_draft"),
    "api": ("stats", "api_cmd"), "nvtx": ("stats", "nvtx_cmd"), "memory": ("stats", "memory_cmd"),
    "analyze": ("analyze", "analyze"), "floor": ("floor", "floor_cmd"), "walls": ("floor", "walls_cmd"),
    "configs": ("floor", "configs_cmd"), "predict": ("predict", "predict_cmd"), "cost": ("cost", "cost_cmd"),
    "reconcile": ("reconcile", "reconcile_cmd"), "diff": ("diff", "diff_cmd"), "export": ("export", "export_cmd"),
    "baseline": ("baseline", "baseline_cmd"), "doctor": ("doctor", "doctor_cmd"),
    "mcp": ("mcp", "mcp_cmd"),
}


def _is_expected(exc: BaseException) -> bool:
    """A TracekitError, or the standalone floor's ConfigError (looked up only if the floor was imported:
    an exception of a module never loaded cannot have been raised)."""
    floor_errors = sys.modules.get("tracekit.floor.errors")
    return isinstance(exc, TracekitError) or (floor_errors is not None and isinstance(exc, floor_errors.ConfigError))


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands by name: those of ``COMMANDS``, each imported from its module when first asked
    for, and any added with ``add_command``."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}
        self._removed: set[str] = set()

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS or name in self._removed:
                raise KeyError(name)
            module, attr = COMMANDS[name]
            self._loaded[name] = getattr(importlib.import_module(f"tracekit.cli.{module}"), attr)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._removed.discard(name)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._removed.add(name)

    def __iter__(self) -> Iterator[str]:
        return iter([n for n in dict.fromkeys([*COMMANDS, *self._loaded]) if n not in self._removed])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __contains__(self, name: object) -> bool:
        return (name in COMMANDS or name in self._loaded) and name not in self._removed


class TracekitGroup(click.Group):
    """Turns every expected failure into one line on stderr and exit status 2, without a traceback; its
    commands (``_Commands``) import their modules only when asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands()  # type: ignore[assignment]

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option value: one line too, not click's usage block
            hint = f"; see `{exc.ctx.command_path} --help`" if exc.ctx is not None else ""
            click.echo(f"tracekit: error: {one_line(exc.format_message()).rstrip('.')}{hint}", err=True)
            sys.exit(USAGE_ERROR)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:
            if _is_expected(exc):
                click.echo(f"tracekit: error: {one_line(exc)}", err=True)
                sys.exit(USAGE_ERROR)
            if os.environ.get("TRACEKIT_DEBUG"):  # a bug: one line, unless TRACEKIT_DEBUG asks for the traceback
                raise
            detail = one_line(exc)[:300]
            click.echo(f"tracekit: internal error: {type(exc).__name__}: {detail} "
                       "(set TRACEKIT_DEBUG=1 for the traceback)", err=True)
            sys.exit(1)


@click.group(cls=TracekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main() -> None:
    """Floor-first triage of LLM serving and training traces.

    Reads Nsight Systems SQLite exports and PyTorch profiler traces into a cached DuckDB store.
    """
