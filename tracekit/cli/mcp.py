"""`tracekit mcp`: analyze, doctor, floor, walls, kernels, diff and explain as MCP tools over stdio
(tracekit.api.mcp)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("mcp")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
def mcp_cmd(cache_dir: Path | None) -> None:
    """Serve the triage as MCP tools over stdio (pip install 'tracekit[mcp]'); floor/SKILL.md says which when."""
    from tracekit.api.mcp import serve

    serve(cache_dir)
