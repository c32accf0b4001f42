"""The options every command shares: inputs, output, config and analysis (one definition, one behaviour).

This module imports click alone: a library constant that an option shows (the output formats, the
near-floor threshold) is a ``Lazy`` value, imported when click first needs it (to check a value given
or to print ``--help``), and the library itself is imported inside the functions that use it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tracekit.store.inputs import Inputs


class Lazy:
    """A library constant named by module and attribute, imported the first time it is used: click calls
    a default to get its value and prints it with ``str`` in ``--help``."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __str__(self) -> str:
        return str(self())


class LazyChoice(click.Choice):
    """``click.Choice`` over a library constant (a ``Lazy``), imported when a value is checked or help shown."""

    def __init__(self, values: Lazy) -> None:  # no super().__init__: it would read the values now
        self._values = values
        self.case_sensitive = True

    @property
    def choices(self) -> Sequence[Any]:  # type: ignore[override]
        return tuple(self._values())


FORMATS = Lazy("tracekit.report.output", "FORMATS")
NEAR_FLOOR_THRESHOLD = Lazy("tracekit.floor", "NEAR_FLOOR_THRESHOLD")


class FiniteFloat(click.FloatRange):
    """A float option that must also be finite: click's FloatRange lets NaN through (every comparison with
    NaN is false) and infinity when there is no upper bound."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if not math.isfinite(out):
            self.fail(f"{out} is not a finite number", param, ctx)
        return out


#: The near-floor threshold (a residual ratio) of analyze, floor, diff and reconcile.
THRESHOLD = FiniteFloat(min=1.0, max=1000.0)
COUNT = click.IntRange(min=0, max=2**31 - 1)  # --limit, --skip-steps: a row or step count
JOBS = click.IntRange(min=1, max=1024)
MAX_STEP_REGEX_CHARS = 4096
DECOMPRESS_ENV = "TRACEKIT_MAX_DECOMPRESSED"  # tracekit.files.DECOMPRESS_ENV, without importing it


def check_step_regex(text: str, option: str = "--step") -> str:
    """The step regex when both Python's ``re`` and DuckDB's RE2 (which runs it over the store) accept it:
    syntax, no backreference or lookaround (RE2 has neither), repetition bounded (RE2 allows at most 1000);
    else one line about the option."""
    import duckdb

    from tracekit.errors import InputError
    from tracekit.files import short

    shown = short(repr(text), 80)
    if len(text) > MAX_STEP_REGEX_CHARS:
        raise InputError(f"{option} {shown}: longer than {MAX_STEP_REGEX_CHARS} characters; give a shorter regex")
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InputError(f"{option} {shown}: not a regex ({exc}); fix the pattern") from None
    con = duckdb.connect()
    try:
        con.execute("SELECT regexp_matches('', ?)", [text]).fetchall()
    except duckdb.Error as exc:
        detail = str(exc).split("\n")[0][:160]
        raise InputError(f"{option} {shown}: not a regex the store can run (RE2: {detail}); use RE2 syntax "
                         "(no backreferences or lookaround, repetition counts up to 1000)") from None
    finally:
        con.close()
    return text


def _is_file(value: str) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return Path(value).is_file()
    return False


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Any:
    """``name=value`` in the environment for the command (it reaches the ingest processes of --jobs and
    Dask), as it was afterwards; None leaves it alone."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def default_jobs(paths: Sequence[Path]) -> int:
    """How many files are read, and ranks analysed, at once unless --jobs says (``store.inputs.auto_jobs``)."""
    from tracekit.store.inputs import auto_jobs

    return auto_jobs(paths)

# Parameters that name what a command reads, and what it writes (by click parameter name).
INPUT_PARAMS = ("inputs", "before", "after", "results", "config")
OUTPUT_PARAMS = ("out_path", "perfetto_path", "parquet_dir", "plots_dir", "plot_path", "cache_dir")
FOLDER_PARAMS = ("parquet_dir", "plots_dir", "cache_dir")


def check_output_paths() -> None:
    """Refuse, before any work, an output option that names an input or a path inside an input folder
    (every command's inputs and outputs, read from the parsed parameters of the running command)."""
    ctx = click.get_current_context()
    inputs: list[Path] = []
    for name in INPUT_PARAMS:
        value = ctx.params.get(name)
        values = value if isinstance(value, tuple) else (value,)
        # --config names a file only when one exists at that path (else it is a named config).
        inputs += [Path(v) for v in values if v is not None and (name != "config" or _is_file(v))]
    options = {p.name: p.opts[0] for p in ctx.command.params if p.opts}
    from tracekit.files import check_output_folder, check_outputs, output_target

    given = {name: ctx.params[name] for name in OUTPUT_PARAMS if ctx.params.get(name) is not None}
    check_outputs(inputs, {options.get(name, name): value for name, value in given.items()})
    for name, value in given.items():  # a FIFO, device, folder or unwritable place: refused before any work
        if name in FOLDER_PARAMS:
            check_output_folder(Path(value), options.get(name, name))
        else:
            output_target(Path(value), options.get(name, name))


def input_paths_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``FILE...`` plus ``--cache-dir``, ``--no-cache``, ``--jobs`` and ``--quiet``; passes ``inputs`` (unopened)."""

    @click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
    @click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
    @click.option("--no-cache", is_flag=True, help="Ingest into a temporary store, discarded afterwards.")
    @click.option("--jobs", type=JOBS, default=None,
                  show_default="the cores available for files of 4 MiB on average, else 1",
                  help="Read this many files (in processes) and analyse this many ranks (in threads) at once.")
    @click.option("--quiet", "-q", is_flag=True,
                  help="No progress bar (it shows only when stderr is a terminal).")
    @click.option("--max-decompressed", type=click.IntRange(min=1, max=2**62), default=None, metavar="BYTES",
                  help="Refuse a compressed trace that expands to more than BYTES (default: 200x its size, at "
                       "least 256 MiB, at most 32 GiB).")
    @functools.wraps(command)
    def wrapper(*args: Any, inputs: tuple[Path, ...], cache_dir: Path | None, no_cache: bool, jobs: int | None,
                quiet: bool, max_decompressed: int | None, **kwargs: Any) -> Any:
        check_output_paths()  # before the inputs are ingested
        from tracekit.store.cache import is_corruption
        from tracekit.store.inputs import Inputs  # no DuckDB yet: a cached report may need none

        given = Inputs(tuple(inputs), cache_dir, not no_cache, jobs or default_jobs(inputs), quiet)
        with _environment(DECOMPRESS_ENV, None if max_decompressed is None else str(max_decompressed)):
            try:
                return command(*args, inputs=given, **kwargs)
            except Exception as exc:  # a cached store DuckDB finds corrupt: set aside, rebuilt, run once more
                moved = given.set_aside_corrupt() if is_corruption(exc) else []
                if not moved:
                    raise
                for db in moved:
                    click.echo(f"tracekit: warning: {db}: DuckDB reports this cached store corrupt "
                               f"({' '.join(str(exc).split())[:100]}); set aside in {db.parent / 'damaged'} and "
                               "rebuilt from its input", err=True)
                return command(*args, inputs=given, **kwargs)

    return wrapper


def input_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``FILE...`` plus ``--cache-dir``, ``--no-cache``, ``--jobs`` and ``--quiet``; passes an open ``store``."""

    @input_paths_options
    @functools.wraps(command)
    def wrapper(*args: Any, inputs: Inputs, **kwargs: Any) -> Any:
        with inputs.open() as store:
            return command(*args, store=store, **kwargs)

    return wrapper


def output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a click command the shared ``--format`` and ``--out`` options."""

    @click.option(
        "--format", "fmt", type=LazyChoice(FORMATS), default="table", show_default=True,
        help="Output format.",
    )
    @click.option(
        "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="Write the output to FILE (replaced atomically) instead of standard output.",
    )
    @click.option("--table", "table", default=None, metavar="NAME",
                  help="With --format csv: the table to write (its title in lowercase words joined by '-', or "
                       "its number from 1); default the first, the others named on stderr.")
    @functools.wraps(command)
    def wrapper(*args: Any, table: str | None, **kwargs: Any) -> Any:
        check_output_paths()
        if table is not None:
            click.get_current_context().meta["tracekit.table"] = table  # read by report.render.emit
        return command(*args, **kwargs)

    return wrapper


def parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    """``--set key=value`` pairs as a dict (tracekit.floor.parse_sets); a malformed one is a usage error."""
    from tracekit.floor import ConfigError
    from tracekit.floor import parse_sets as floor_parse_sets

    try:
        return floor_parse_sets(values)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None


def config_options(required: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--config`` plus ``--batch``, ``--context`` and ``--set``; passes ``config`` and ``overrides``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @click.option("--config", required=required, default=None,
                      help="Named config (see `tracekit configs`) or a TOML file.")
        @click.option("--batch", type=click.IntRange(min=1), default=None,
                      help="Concurrent requests in the whole deployment (all GPUs); overrides the config.")
        @click.option("--context", type=click.IntRange(min=1), default=None,
                      help="Context (KV length) per request, in tokens; overrides the config.")
        @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                      help="Override any config field, e.g. --set kv_format=fp8 (repeatable).")
        @functools.wraps(command)
        def wrapper(*args: Any, config: str | None, batch: int | None, context: int | None,
                    sets: tuple[str, ...], **kwargs: Any) -> Any:
            overrides = parse_sets(sets)
            if batch is not None:
                overrides["batch"] = str(batch)
            if context is not None:
                overrides["context_tokens"] = str(context)
            if overrides and not config:
                raise click.BadParameter("needs --config", param_hint="--batch/--context/--set")
            if config:
                from tracekit.budgets.configs import config_path

                config_path(config)  # a name that is no file and no named config: one line, before any work
            return command(*args, config=config, overrides=overrides, **kwargs)

        return wrapper

    return decorate


def analysis_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Config options plus ``--step``, ``--skip-steps`` and ``--threshold``; passes ``opts: AnalyzeOptions``."""

    @config_options(required=False)
    @click.option("--step", "step_regex", default=None, metavar="REGEX",
                  help="Regex over NVTX/annotation names that marks one step.")
    @click.option("--skip-steps", type=COUNT, default=0, show_default=True,
                  help="Drop this many warm-up steps.")
    @click.option("--threshold", type=THRESHOLD, default=NEAR_FLOOR_THRESHOLD, show_default=True,
                  help="Residual ratio under which a step is near the floor; also the over-budget ratio.")
    @functools.wraps(command)
    def wrapper(*args: Any, config: str | None, overrides: dict[str, str], step_regex: str | None,
                skip_steps: int, threshold: float, **kwargs: Any) -> Any:

        if step_regex is not None:
            check_step_regex(step_regex)
        from tracekit.analysis.options import AnalyzeOptions

        opts = AnalyzeOptions(config=config, overrides=overrides, step_regex=step_regex, skip_steps=skip_steps,
                              threshold=threshold)
        return command(*args, opts=opts, **kwargs)

    return wrapper
