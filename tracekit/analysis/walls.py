"""The report's ``walls`` section: the config's walls as concurrency grows, computed once by the analysis so
that the HTML page and the plots draw them from the report (no renderer loads a config)."""

from __future__ import annotations

from typing import Any

from tracekit import floor
from tracekit.analysis.options import AnalyzeOptions
from tracekit.budgets.configs import load_config

#: The keys of `tracekit walls --format json` the report carries (its targets need --vs, --tpot-slo, --batch).
WALLS_KEYS = ("config", "peak_kind", "kv_capacity_requests", "ordering", "walls", "frontier")


def walls_section(opts: AnalyzeOptions) -> dict[str, Any] | None:
    """The walls of ``opts.config`` with its overrides (None without a config, and for a training config,
    whose batch is no concurrency to sweep)."""
    if not opts.config:
        return None
    cfg = load_config(opts.config, opts.overrides)
    if cfg.phase == "training":
        return None
    walls = floor.compute_walls(cfg).to_dict()
    return {k: walls[k] for k in WALLS_KEYS}
