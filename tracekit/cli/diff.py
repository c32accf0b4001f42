"""`tracekit diff BEFORE AFTER` (or `diff AFTER --against baseline:NAME`): two analyses compared, a thin
wrapper over tracekit.compare.diff and tracekit.compare.gate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import JOBS, analysis_options, default_jobs, output_options

if TYPE_CHECKING:
    from tracekit.analysis.options import AnalyzeOptions


@click.command("diff")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--against", default=None, metavar="baseline:NAME|PATH",
              help="BEFORE is this saved baseline (see `tracekit baseline save`) or report/trace; give only AFTER.")
@click.option("--baselines", "baselines_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where named baselines are kept (default: $XDG_CACHE_HOME/tracekit/baselines).")
@analysis_options
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ingested stores are kept (default: $XDG_CACHE_HOME/tracekit).")
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store, discarded afterwards.")
@click.option("--jobs", type=JOBS, default=None, show_default="the cores available",
              help="Read this many files (in processes) and analyse this many ranks (in threads) at once.")
@click.option("--gate", is_flag=True, help="Exit with the AFTER verdict's code: 0 near-floor, 10 pipeline, 11 kernel, "
              "12 inconclusive.")
@click.option("--fail-if-slower", default=None, metavar="PCT",
              help="Exit 13 on a step regression the noise test supports that is beyond PCT (e.g. 5%).")
@click.option("--noise-threshold", default="1%", show_default=True, metavar="PCT",
              help="Practical threshold: a change under PCT of BEFORE's step median is within noise.")
@click.option("--expect-faster", default=None, metavar="CLASS",
              help="Exit 14 unless CLASS's measured time per step fell by at least 1%.")
@output_options
def diff_cmd(inputs: tuple[Path, ...], against: str | None, baselines_dir: Path | None, opts: AnalyzeOptions,
             cache_dir: Path | None, no_cache: bool, jobs: int | None, gate: bool, fail_if_slower: str | None,
             noise_threshold: str, expect_faster: str | None, fmt: str, out_path: Path | None) -> None:
    """Compare two analyses (reports or traces of one config): what changed, largest explanation first, and
    whether each change is a regression, within noise or an improvement."""
    from tracekit.compare import baseline as bl
    from tracekit.compare import diff as d
    from tracekit.compare import gate as g
    from tracekit.errors import InputError
    from tracekit.report.diff import diff_document
    from tracekit.report.render import emit

    allowance = g.parse_percent(fail_if_slower) if fail_if_slower is not None else None
    threshold = g.parse_percent(noise_threshold, "--noise-threshold")
    if against is not None:
        if len(inputs) != 1:
            raise InputError(f"--against {against}: give one input (AFTER), not {len(inputs)}")
        paths = [bl.resolve(against, baselines_dir), inputs[0]]
    elif len(inputs) != 2:
        raise InputError(f"diff: give BEFORE and AFTER (or AFTER with --against baseline:NAME), not {len(inputs)} "
                         "inputs")
    else:
        paths = list(inputs)
    sides = [d.load_side(p, opts, cache_dir, not no_cache, jobs or default_jobs([p])) for p in paths]
    doc = g.gated_diff(sides, threshold, gate, allowance, expect_faster,
                       bool(opts.config or opts.step_regex or opts.skip_steps), against)
    code = doc["gate"]["exit_status"]
    emit(diff_document(doc), fmt, out_path)
    if code:
        sys.exit(code)
