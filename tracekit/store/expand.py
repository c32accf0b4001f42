"""The trace files an input set names: files as given, a folder as the trace files directly inside it.

Apart from the store (no DuckDB): a repeat `analyze` keys its cached report on these files before it
opens, or imports, anything of the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tracekit.errors import InputError
from tracekit.files import check_input_file
from tracekit.parsers import registry


def expand_inputs(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for the trace files directly inside it, sorted by name (a file no
    reader takes, such as a harness's ``execution_details.json``, is left out: ``skipped_inputs``)."""
    files: list[Path] = []
    suffixes = registry.trace_suffixes()
    for p in paths:
        check_input_file(p)  # FIFOs, devices, link loops, unreadable files: refused before any read
        if p.is_dir():
            found = sorted(c for c in p.iterdir() if c.name.endswith(suffixes) and not c.is_dir())
            for c in found:
                check_input_file(c)
            traces = [c for c in found if registry.skip_reason(c) is None]
            if not traces:
                raise InputError(f"{p}: directory holds no trace files ({', '.join('*' + s for s in suffixes)}); "
                                 "give the trace files or the folder that holds them")
            files.extend(traces)
        else:
            files.append(p)
    return files


def skipped_inputs(paths: Iterable[Path]) -> list[str]:
    """One note per file a directory input left out because no reader takes it as a trace."""
    suffixes = registry.trace_suffixes()
    return [f"{c}: {why}; skipped in directory {p}"
            for p in paths if p.is_dir() for c in sorted(p.iterdir())
            if c.is_file() and c.name.endswith(suffixes) and (why := registry.skip_reason(c)) is not None]
