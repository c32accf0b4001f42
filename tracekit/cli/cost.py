"""`tracekit cost`: a GPU's manufacturing cost and the cost per million tokens of a floor config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.common import config_options, output_options
from tracekit.report.document import Document, Table, rows_frame
from tracekit.report.render import emit


def _breakdown_rows(report: Any) -> list[dict[str, Any]]:
    """One row per cost line of one GPU: dies, interposer, HBM, packaging, assembly loss, total."""
    m = report.manufacturing
    rows = [
        {"item": f"{d.name} die ({d.process})", "count": d.count, "area_mm2": d.area_mm2,
         "dies_per_wafer": d.dies_per_wafer, "yield": round(d.yield_fraction, 4),
         "unit_usd": round(d.kgd_usd, 2), "usd": round(d.kgd_usd * d.count, 2)}
        for d in m.dies
    ]
    if m.interposer:
        i = m.interposer
        rows.append({"item": "interposer", "count": 1, "area_mm2": i.area_mm2, "dies_per_wafer": i.dies_per_wafer,
                     "yield": round(i.yield_fraction, 4), "unit_usd": round(i.kgd_usd, 2), "usd": round(i.kgd_usd, 2)})
    p = report.package
    rows.append({"item": "HBM stacks", "count": p.hbm_stacks, "unit_usd": p.hbm_stack_cost_usd, "usd": m.hbm_usd})
    rows.append({"item": "packaging", "count": 1, "unit_usd": m.packaging_usd, "usd": m.packaging_usd})
    rows.append({"item": f"assembly loss ({m.chips_placed} chips)", "yield": round(m.assembly_yield, 4),
                 "usd": round(m.total_usd - m.before_assembly_usd, 2)})
    rows.append({"item": "total per GPU", "usd": round(m.total_usd, 2)})
    keys = ("item", "count", "area_mm2", "dies_per_wafer", "yield", "unit_usd", "usd")
    return [{k: r.get(k) for k in keys} for r in rows]


def _token_rows(report: Any) -> list[dict[str, Any]]:
    t, p = report.tokens, report.params
    source = "gpu_cost_usd (set)" if p.gpu_cost_usd else "manufacturing cost"
    return [
        {"field": "gpu_cost_usd", "value": f"{t.gpu_cost_usd:.2f} ({source})"},
        {"field": "lifetime_years", "value": t.lifetime_years},
        {"field": "capex_usd_per_hour", "value": f"{t.capex_usd_per_s * 3600:.4f}"},
        {"field": "power_w", "value": t.power_w},
        {"field": "energy_usd_per_kwh", "value": t.energy_usd_per_kwh},
        {"field": "energy_usd_per_hour", "value": f"{t.energy_usd_per_s * 3600:.4f}"},
        {"field": "tokens_per_s_per_gpu", "value": f"{t.tokens_per_s:.1f} ({report.token_kind})"},
        {"field": "binding", "value": report.binding},
        {"field": "usd_per_million_tokens", "value": f"{t.usd_per_million_tokens:.4f}"},
    ]


def _sensitivity_rows(report: Any) -> list[dict[str, Any]]:
    base = report.sensitivity[0].usd_per_million_tokens
    rows = []
    for v in report.sensitivity:
        cost = v.usd_per_million_tokens
        rows.append({
            "change": v.change,
            "gpu_cost_usd": round(v.gpu_cost_usd, 2),
            "tokens_per_s_per_gpu": None if v.tokens_per_s is None else round(v.tokens_per_s, 1),
            "binding": v.binding,
            "usd_per_million_tokens": None if cost is None else round(cost, 4),
            "vs_baseline": None if cost is None else round(cost / base, 3),
            "infeasible": v.reason,
        })
    return rows


@click.command("cost")
@config_options(required=True)
@output_options
def cost_cmd(config: str, overrides: dict[str, str], fmt: str, out_path: Path | None) -> None:
    """Manufacturing cost per GPU (dies, yield, HBM, assembly) and cost per million tokens at the floor.

    --set takes floor fields and cost fields alike, e.g. --set yield_model=murphy --set hbm_stacks=6
    --set gpu_cost_usd=25000 --set lifetime_years=4 --set energy_usd_per_kwh=0.12 (see docs/cost.md).
    """
    from tracekit.budgets.configs import config_path
    from tracekit.floor.cost_perf import cost_report

    report = cost_report(config_path(config), overrides, resolve=config_path)
    tables = [
        Table("manufacturing cost per GPU", rows_frame(_breakdown_rows(report)),
              note="known-good-die cost = wafer cost / (dies per wafer x yield); assembly loss = cost / yield - cost"),
        Table("cost per million tokens (per GPU)", rows_frame(_token_rows(report))),
        Table("sensitivity", rows_frame(_sensitivity_rows(report)),
              note="floor re-run with one hardware field changed; vs_baseline = cost per token / baseline"),
    ]
    title = f"tracekit cost: {report.config.name} on {report.config.hardware.name}"
    emit(Document(title, tables, notes=report.notes, data=report.to_dict()), fmt, out_path)
