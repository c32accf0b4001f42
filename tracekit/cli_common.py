"""Options shared by every command that reads traces."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tracekit.store import open_store


def input_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``FILE...`` plus ``--cache-dir``, ``--no-cache`` and ``--jobs``; passes an open ``store``."""

    @click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
    @click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
    @click.option("--no-cache", is_flag=True, help="Ingest into a temporary store, discarded afterwards.")
    @click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
                  help="Ingest this many files in parallel processes.")
    @functools.wraps(command)
    def wrapper(*args: Any, inputs: tuple[Path, ...], cache_dir: Path | None, no_cache: bool, jobs: int,
                **kwargs: Any) -> Any:
        with open_store(list(inputs), cache_dir=cache_dir, use_cache=not no_cache, jobs=jobs) as store:
            for w in store.warnings:
                click.echo(f"tracekit: warning: {w}", err=True)
            return command(*args, store=store, **kwargs)

    return wrapper

