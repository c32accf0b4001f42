"""Where `tracekit analyze` runs: in this process (the default) or on a Dask cluster, and its report cache.

The analysis splits in two (``tracekit.analysis.analyze``): a per-rank part (each device's steps and
their accounting, each rank's host activity) and a cross-rank part that reduces those results to the
report (step statistics over all ranks, stragglers, classes, verdict). With ``--engine dask`` the
ingest of every file and the per-rank part run as Dask tasks (``dask[distributed]``, an optional
extra); the reduction runs here over the per-rank results, with the same code as the in-process run,
so both give the same report. Workers and this process must see the same cache folder
(``--cache-dir`` on a shared filesystem for a remote cluster).

In-process, a report is cached beside the stores, keyed on the inputs alone (each file as named and its
content key, which also names its store, in order; what a folder left out; the options; the config file's
content; a digest of tracekit's own code), with the warnings opening the store gave. So analysing an
unchanged trace again reads each input's remembered SHA-256 (``store.cache.file_identity``), this file and
the rendering the CLI kept beside it (``tracekit.cli.rendered``): it opens no store and imports none of the
analysis, DuckDB or the renderers. Like a store, a cached report carries its size and CRC-32 (a first line before the
report's JSON, written in one atomic file): a report damaged in place, even into other valid JSON, fails
the check and is analysed again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import sys
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit import __version__
from tracekit.errors import InputError
from tracekit.files import write_atomically
from tracekit.store.cache import default_cache_dir, file_key, set_aside
from tracekit.store.expand import expand_inputs, skipped_inputs

if TYPE_CHECKING:  # the store's reader and DuckDB load only when a store is opened: not for a cached report
    from tracekit.analysis.analyze import DeviceAnalysis
    from tracekit.analysis.options import AnalyzeOptions
    from tracekit.store.inputs import Inputs

ENGINES = ("local", "dask")
_CODE_PACKAGES = ("tracekit", "tracekit.analysis", "tracekit.compare", "tracekit.store", "tracekit.parsers",
                  "tracekit.floor", "tracekit.budgets")


@functools.cache  # the code does not change while it runs: the report cache and its rendering both ask
def _code_digest() -> str:
    """A digest of tracekit's installed code and data files (a changed analysis invalidates cached reports)."""
    import importlib.util

    h = hashlib.sha256(__version__.encode())
    for name in _CODE_PACKAGES:
        spec = importlib.util.find_spec(name)  # where the package lies, without running it (the floor's model)
        root = Path(spec.origin if spec is not None and spec.origin else "").parent
        for f in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts):
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _config_digest(opts: AnalyzeOptions) -> str | None:
    config_file = Path(opts.config) if opts.config else None
    return (hashlib.sha256(config_file.read_bytes()).hexdigest()
            if config_file is not None and config_file.is_file() else None)


def report_path(inputs: Inputs, opts: AnalyzeOptions) -> Path:
    """Where the report of ``inputs`` is cached, under a key of the inputs alone: each file as named with its
    content key (which also names its store), in order; the notes on what a folder left out; the options, the
    config file and the code. Rank assignment and the store's warnings follow from these, so the report is
    found without opening a store."""
    cache_dir = inputs.cache_dir or default_cache_dir()
    identity = {
        "inputs": [[str(f), file_key(f, cache_dir)] for f in expand_inputs(inputs.paths)],
        "skipped": skipped_inputs(inputs.paths),
        "options": dataclasses.asdict(opts),
        "config_file": _config_digest(opts),
        "code": _code_digest(),
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir / "reports" / f"{key}.json"


def _crc(body: bytes, warnings: list[str]) -> int:
    return zlib.crc32(body, zlib.crc32(json.dumps(warnings).encode()))


def write_cached_report(path: Path, report: dict[str, Any], warnings: list[str] | None = None,
                        inputs: list[str] | None = None) -> None:
    """The report's JSON after a first line that records its size, CRC-32, the store's warnings (printed
    again when the entry is read) and the content keys of the inputs it was made from, in one atomic write."""
    body, warnings = json.dumps(report).encode(), warnings or []
    manifest = {"size_bytes": len(body), "crc32": _crc(body, warnings), "schema": report.get("schema"),
                "warnings": warnings, "input_keys": inputs}
    write_atomically(path, json.dumps(manifest).encode() + b"\n" + body)


def read_cached_entry(path: Path, inputs: list[str] | None = None) -> tuple[dict[str, Any], list[str]] | None:
    """The cached report at ``path`` and its store's warnings, or None when it is absent, fails its size
    and CRC-32 check, or was made from inputs of other content than ``inputs`` (their content keys: another
    trace's report in this slot)."""
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        manifest = json.loads(head)
        warnings = manifest.get("warnings", [])
        if (manifest.get("size_bytes") != len(body) or not isinstance(warnings, list)
                or manifest.get("crc32") != _crc(body, warnings)):
            return None
        if inputs is not None and manifest.get("input_keys") != inputs:
            return None
        report = json.loads(body)
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return (report, [str(w) for w in warnings]) if isinstance(report, dict) else None


def read_cached_report(path: Path) -> dict[str, Any] | None:
    """The cached report at ``path``, or None when it is absent or fails its check."""
    entry = read_cached_entry(path)
    return entry[0] if entry is not None else None


def _rank_task(path: Path, ranks: tuple[int, ...], cache_dir: Path, opts: AnalyzeOptions) -> list[DeviceAnalysis]:
    """One Dask task: a file (already ingested) opened alone under its ranks; its per-rank analysis."""
    from tracekit.analysis.analyze import analyze_devices
    from tracekit.store.ingest import open_store

    with open_store([path], cache_dir=cache_dir, ranks=[ranks]) as store:
        return analyze_devices(store, opts)


def analyze_dask(inputs: Inputs, opts: AnalyzeOptions, scheduler: str | None = None) -> dict[str, Any]:
    """The v1 report with ingest and per-rank analysis as Dask tasks; the cross-rank reduction runs here.

    ``scheduler`` is the address of a running Dask scheduler; without it a local cluster of ``--jobs``
    worker processes is started for this run."""
    from tracekit.analysis.analyze import build_analysis
    from tracekit.store.ingest import ingest_file

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--engine dask: Dask is not installed; pip install 'tracekit[dask]'") from None
    files = expand_inputs(inputs.paths)
    tmp = None if inputs.use_cache else tempfile.TemporaryDirectory(prefix="tracekit-")
    cache_dir = Path(tmp.name) if tmp is not None else (inputs.cache_dir or default_cache_dir())
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="10s")
            except OSError as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect ({exc}); start a scheduler "
                                 "(dask scheduler) or leave --scheduler out for a local cluster") from None
        else:
            cluster = LocalCluster(n_workers=inputs.jobs, threads_per_worker=1, dashboard_address=None)
            client = Client(cluster)
        try:
            client.gather(client.map(ingest_file, files, cache_dir=cache_dir, pure=False))
            # Every file is now in the cache: opening the set here only attaches the stores and assigns ranks.
            shared = dataclasses.replace(inputs, cache_dir=cache_dir, use_cache=True, jobs=1, quiet=True)
            with shared.open() as store:  # the files kept (a copy of another is left out), with their ranks
                kept, ranks = [f.source for f in store.files], [f.ranks for f in store.files]
                parts = client.gather(client.map(_rank_task, kept, ranks, cache_dir=cache_dir, opts=opts,
                                                 pure=False))
                results = sorted((d for devices in parts for d in devices), key=lambda r: (r.rank, r.device_id))
                return build_analysis(store, opts, results).report
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
        if tmp is not None:
            tmp.cleanup()


def analyze_inputs(inputs: Inputs, opts: AnalyzeOptions, engine: str = "local",
                   scheduler: str | None = None) -> dict[str, Any]:
    """The v1 report of the inputs on the chosen engine (``local``: in this process, with the report cache)."""
    if engine == "dask":
        return analyze_dask(inputs, opts, scheduler)
    if scheduler:
        raise InputError("--scheduler: only with --engine dask")
    path, keys = None, None
    if inputs.use_cache:
        with contextlib.suppress(OSError):  # an input that cannot be read: opening the store says so
            path = report_path(inputs, opts)
            memo = inputs.cache_dir or default_cache_dir()  # each input's SHA-256 remembered while it is unchanged
            keys = [file_key(f, memo) for f in expand_inputs(inputs.paths)]  # the inputs' content, bound to the entry
        cached = read_cached_entry(path, keys) if path is not None else None
        if cached is not None:
            for w in cached[1]:
                print(f"tracekit: warning: {w}", file=sys.stderr)  # as opening the store prints them
            return cached[0]
    from tracekit.analysis.analyze import analyze  # only now: a cached report needs none of the analysis

    if not inputs.use_cache:  # stores for this run only: analysed afresh
        with inputs.open() as store:
            return analyze(store, opts)
    with inputs.open() as store:  # absent or damaged: analyse again
        report, warnings = analyze(store, opts), store.warnings
    if path is not None:
        with contextlib.suppress(OSError):  # a read-only cache still answers, only slower next time
            if path.is_dir():  # a folder in the report's place is set aside, not fatal
                set_aside(path)
            write_cached_report(path, report, warnings, keys)
    return report
