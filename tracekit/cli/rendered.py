"""`analyze`'s output, with the rendering of a cached report cached beside it.

A repeat `analyze` of unchanged inputs reads its report from the report cache
(``tracekit.analysis.engine``); rendering that report (polars tables, rich) would then cost more than the
rest of the run. So the text printed is kept beside the cached report, one file per way of printing it
(format, ``--table``, table width, colour, file or terminal, the renderers' library versions), each bound
to the SHA-256 of the very report it was rendered from and checked by its size and CRC-32: a rendering of
another report (the entry was analysed again) or one damaged in place is rendered afresh, never printed.
This module imports click and the standard library alone; the renderers load only on a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import zlib
from pathlib import Path
from typing import Any

import click

RENDERERS = ("polars", "rich")  # libraries whose version can change a rendering


def _versions() -> list[str]:
    """The installed distributions of the renderers' libraries, by their metadata folders' names (listing
    the import path's folders is cheaper than loading ``importlib.metadata``)."""
    import os

    found = []
    for folder in sys.path:
        with contextlib.suppress(OSError):
            found += [e for e in os.listdir(folder or ".")
                      if e.endswith(".dist-info") and e.split("-")[0].lower().startswith(RENDERERS)]
    return sorted(found)


def _crc(text: bytes, note: str | None) -> int:
    return zlib.crc32(text, zlib.crc32(json.dumps(note).encode()))


def read_rendering(entry: Path, report_sha256: str) -> tuple[str, str | None] | None:
    """(text, stderr note) cached at ``entry`` for the report of that SHA-256, or None: absent, damaged, or
    rendered from another report."""
    try:
        head, _, body = entry.read_bytes().partition(b"\n")
        manifest = json.loads(head)
        note = manifest.get("note")
        if (manifest.get("report_sha256") != report_sha256 or manifest.get("size_bytes") != len(body)
                or not (note is None or isinstance(note, str)) or manifest.get("crc32") != _crc(body, note)):
            return None
        return body.decode(), note
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        return None


def write_rendering(entry: Path, report_sha256: str, text: str, note: str | None) -> None:
    """Keep a rendering at ``entry`` (one atomic write; a cache that cannot be written is only slower)."""
    from tracekit.files import write_atomically

    body = text.encode()
    manifest = {"report_sha256": report_sha256, "size_bytes": len(body), "crc32": _crc(body, note), "note": note}
    with contextlib.suppress(OSError):
        write_atomically(entry, json.dumps(manifest).encode() + b"\n" + body)


def emit_report(report: dict[str, Any], fmt: str, out_path: Path | None, slot: Path | None) -> None:
    """Print the analyze report (or write it to ``out_path``) as ``report.render.emit`` does; ``slot``: the
    report's cache entry, beside which its rendering is looked up and kept (None: rendered, not kept)."""
    from tracekit.files import write_atomically
    from tracekit.report.output import table_width, write_stdout

    ctx = click.get_current_context(silent=True)
    table = None if ctx is None else ctx.meta.get("tracekit.table")
    to_file = out_path is not None
    way = {"format": fmt, "table": table, "width": table_width() if fmt == "table" else None,
           "color": fmt == "table" and not to_file and sys.stdout.isatty(), "to_file": to_file}
    entry, digest, cached = None, "", None
    if slot is not None:
        way["libraries"] = _versions()
        key = hashlib.sha256(json.dumps(way, sort_keys=True).encode()).hexdigest()[:24]
        entry = slot.with_name(f"{slot.stem}.{key}.out")
        digest = hashlib.sha256(json.dumps(report).encode()).hexdigest()
        cached = read_rendering(entry, digest)
    if cached is None:
        from tracekit.report.analysis import report_document
        from tracekit.report.render import rendering

        cached = rendering(report_document(report), fmt, to_file)
        if entry is not None:
            write_rendering(entry, digest, *cached)
    text, note = cached
    if note is not None:
        click.echo(note, err=True)
    if out_path is not None:
        write_atomically(out_path, text, option="--out")
    else:
        write_stdout(text)
