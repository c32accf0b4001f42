"""Named baselines: a ``tracekit.report/v2`` document kept under a name, for ``diff --against baseline:NAME``.

A baseline is the report JSON at ``DIR/NAME.json``; ``DIR`` is ``--baselines`` when given, else
``<cache dir>/baselines`` (``$XDG_CACHE_HOME/tracekit/baselines``). Saving replaces the file atomically and
never touches the input.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from tracekit.analysis.options import REPORT_SCHEMA
from tracekit.errors import InputError
from tracekit.schema.report import typed_report
from tracekit.store.cache import default_cache_dir

PREFIX = "baseline:"
NAME_REGEX = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


def baseline_dir(given: Path | None) -> Path:
    """Where baselines live: ``given``, else ``<cache dir>/baselines``."""
    return given if given is not None else default_cache_dir() / "baselines"


def check_name(name: str) -> str:
    if not re.match(NAME_REGEX, name):
        raise InputError(f"baseline name {name!r}: use letters, digits, '.', '_' and '-' (e.g. main)")
    return name


def baseline_path(name: str, directory: Path | None) -> Path:
    return baseline_dir(directory) / f"{check_name(name)}.json"


def save(name: str, report: dict[str, Any], directory: Path | None, source: str) -> Path:
    """Write ``report`` as baseline ``name`` (atomically); the path written."""
    if report.get("schema") != REPORT_SCHEMA:
        raise InputError(f"{source}: a {report.get('schema')} document; a baseline is a {REPORT_SCHEMA} report")
    path = baseline_path(name, directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"--baselines {path.parent}: cannot write baseline {name} ({exc.strerror})") from None
    return path


def resolve(spec: str, directory: Path | None) -> Path:
    """``baseline:NAME`` -> its saved report (an error naming the baselines folder when absent); any other
    value is a path to a report or trace, returned as is."""
    if not spec.startswith(PREFIX):
        return Path(spec)
    name = spec[len(PREFIX):]
    path = baseline_path(name, directory)
    if not path.is_file():
        known = ", ".join(names(directory)) or "none"
        raise InputError(f"--against {spec}: no baseline {name!r} in {path.parent} (saved: {known}); "
                         f"save one with `tracekit baseline save {name} REPORT|TRACE`")
    return path


def names(directory: Path | None) -> list[str]:
    """The saved baselines' names, sorted."""
    d = baseline_dir(directory)
    return sorted(p.stem for p in d.glob("*.json") if re.match(NAME_REGEX, p.stem)) if d.is_dir() else []


def listing(directory: Path | None) -> list[dict[str, Any]]:
    """Each saved baseline: name, path, config, verdict, step p50 and steps (unreadable files say so)."""
    out = []
    for name in names(directory):
        path = baseline_path(name, directory)
        try:
            doc = typed_report(json.loads(path.read_text(encoding="utf-8")))
            out.append({"name": name, "path": str(path), "config": doc.config.name, "verdict": str(doc.verdict),
                        "step_ns_p50": doc.steps.step_ns_p50, "steps": doc.steps.count})
        except (OSError, ValueError, msgspec.ValidationError):
            out.append({"name": name, "path": str(path), "config": None, "verdict": "unreadable",
                        "step_ns_p50": None, "steps": None})
    return out
