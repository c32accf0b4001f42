"""`tracekit diff BEFORE AFTER`: two analyses compared (a thin wrapper over tracekit.compare.diff)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import analysis_options, default_jobs, output_options

if TYPE_CHECKING:
    from tracekit.analysis.options import AnalyzeOptions


@click.command("diff")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@analysis_options
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store, discarded afterwards.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, show_default="the cores available",
              help="Read this many files (in processes) and analyse this many ranks (in threads) at once.")
@click.option("--gate", is_flag=True, help="Exit with the AFTER verdict's code: 0 near-floor, 10 pipeline, 11 kernel, "
              "12 inconclusive.")
@click.option("--fail-if-slower", default=None, metavar="PCT",
              help="Exit 13 when the AFTER step p50 is slower than BEFORE by more than PCT (e.g. 5%).")
@click.option("--expect-faster", default=None, metavar="CLASS",
              help="Exit 14 unless CLASS's measured time per step fell by at least 1%.")
@output_options
def diff_cmd(before: Path, after: Path, opts: AnalyzeOptions, cache_dir: Path | None, no_cache: bool,
             jobs: int | None,
             gate: bool, fail_if_slower: str | None, expect_faster: str | None, fmt: str,
             out_path: Path | None) -> None:
    """Compare two analyses (reports or traces of one config): what changed, largest explanation first."""
    from tracekit.compare import diff as d
    from tracekit.report.diff import diff_document
    from tracekit.report.render import emit

    allowance = d.parse_percent(fail_if_slower) if fail_if_slower is not None else None
    sides = [d.load_side(p, opts, cache_dir, not no_cache, jobs or default_jobs()) for p in (before, after)]
    doc = d.diff(*sides)
    if any(s.kind == "report" for s in sides) and (opts.config or opts.step_regex or opts.skip_steps):
        doc["caveats"].append("analysis options apply to traces only; reports are compared as they were written")
    code, reasons = d.gate(doc, gate, allowance, expect_faster)
    doc["gate"] = {"gate": gate, "fail_if_slower": allowance, "expect_faster": expect_faster,
                   "exit_status": code, "reasons": reasons}
    emit(diff_document(doc), fmt, out_path)
    if code:
        sys.exit(code)
