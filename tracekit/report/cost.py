"""The `tracekit cost` tables: a GPU's cost lines, the cost per million tokens and its sensitivities."""

from __future__ import annotations

from typing import Any


def breakdown_rows(report: Any) -> list[dict[str, Any]]:
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


def token_rows(report: Any) -> list[dict[str, Any]]:
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


def sensitivity_rows(report: Any) -> list[dict[str, Any]]:
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
