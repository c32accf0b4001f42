"""Rows and plain-text rendering shared by `python -m tracekit.floor` and the tracekit CLI."""

from __future__ import annotations

from typing import Any

from .deployment import DeploymentConfig
from .placement import Placement
from .result import FloorResult
from .units import format_ns
from .walls import WallsResult


def part_rows(result: FloorResult) -> list[dict[str, Any]]:
    """One row per kernel class plus a total row: counts per GPU per step and times in ns."""
    rows = [p.to_dict() for p in result.parts]
    total = {"name": "total"}
    for key in ("hbm_bytes", "flops", "net_bytes", "net_messages"):
        total[key] = result.total(key)
    total.update(
        hbm_ns=result.resource_ns["hbm"],
        compute_ns=result.resource_ns["compute"],
        net_ns=result.resource_ns["network"],
        floor_ns=result.t_opt_ns,
        expected_ns=result.expected_ns,
    )
    cols = (
        "name",
        "hbm_bytes",
        "flops",
        "net_bytes",
        "net_messages",
        "hbm_ns",
        "compute_ns",
        "net_ns",
        "floor_ns",
        "expected_ns",
    )
    return [{c: r.get(c, "") for c in cols} for r in [*rows, total]]


def summary_rows(result: FloorResult, placement: Placement | None = None) -> list[dict[str, Any]]:
    """Key/value rows: the floor, binding resource, utilisation and (with a measurement) its placement."""
    cfg = result.config
    rows: list[tuple[str, Any]] = [
        ("config", cfg.name),
        ("model", cfg.model.key),
        ("hardware", cfg.hardware.key),
        ("n_gpus", cfg.n_gpus),
        ("layout", f"tp={cfg.tp} dp_attention={cfg.dp_attention} ep={cfg.ep}"),
        ("phase", cfg.phase),
        ("batch", cfg.batch),
        ("requests_per_gpu", round(result.requests_per_gpu, 3)),
        ("context_tokens", cfg.context_tokens),
        ("kv_capacity_requests", result.kv_capacity_requests),
        ("tokens_per_step", cfg.tokens_per_step),
        ("peak_kind", result.peak_kind),
        ("t_opt_ns", result.t_opt_ns),
        ("t_sum_ns", result.t_sum_ns),
        ("binding", result.binding),
        ("latency_chain_ns", result.latency_chain_ns),
        ("attainable_ns", result.attainable_ns),
        ("stop_rule_floor", result.floor_used),
        ("expected_ns", result.expected_ns),
        ("expected_peak_kind", result.expected_peak_kind),
        ("tokens_per_s_per_gpu_at_t_opt", round(result.tokens_per_s_per_gpu(), 1)),
        ("mfu_at_t_opt", round(result.mfu(), 4)),
        ("mbu_at_t_opt", round(result.mbu(), 4)),
        ("i_work_flops_per_byte", round(result.i_work_flops_per_byte, 2)),
        ("i_ridge_flops_per_byte", round(result.i_ridge_flops_per_byte, 2)),
    ]
    if placement is not None:
        rows += [
            ("measured_ns", placement.measured_ns),
            ("position", round(placement.position, 3)),
            ("residual_ratio", round(placement.residual_ratio, 3)),
            ("attainable_ratio", round(placement.attainable_ratio, 3)),
            ("verdict", placement.verdict),
            ("mfu_at_measured", round(placement.mfu, 4)),
            ("mbu_at_measured", round(placement.mbu, 4)),
            ("reason", placement.reason),
        ]
    return [{"key": k, "value": v} for k, v in rows]


def wall_rows(walls: WallsResult) -> list[dict[str, Any]]:
    order = walls.ordering
    by_name = {w.name: w for w in walls.walls}
    return [
        {
            "rank": i + 1,
            "wall": n,
            "batch": by_name[n].batch,
            "reachable": by_name[n].reachable,
            "t_opt_ns": by_name[n].t_opt_ns,
            "note": by_name[n].note,
        }
        for i, n in enumerate(order)
    ]


def frontier_rows(walls: WallsResult) -> list[dict[str, Any]]:
    return [
        {
            "batch": p.batch,
            "t_opt_ns": p.t_opt_ns,
            "t_sum_ns": p.t_sum_ns,
            "tokens_per_s_per_gpu": round(p.tokens_per_s_per_gpu, 1),
            "binding": p.binding,
        }
        for p in walls.frontier
    ]


def extra_rows(walls: WallsResult) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if walls.slo:
        s = walls.slo
        rows.append(
            {
                "key": "tpot_slo",
                "value": f"{format_ns(s.target_ns)}: "
                + (
                    f"reachable up to {s.max_batch} concurrent requests "
                    f"({s.tokens_per_s_per_gpu:.1f} tok/s/GPU)"
                    if s.reachable
                    else f"unreachable: the floor at 1 request is {format_ns(s.t_opt_min_ns)}"
                ),
            }
        )
    if walls.crossover:
        rows.append({"key": "crossover", "value": walls.crossover.note})
    for p in walls.at_batch:
        value = (f"{format_ns(p.t_opt_ns)} t_opt, {p.binding} binds; past: {', '.join(p.past) or 'no wall'}"
                 if p.fits else f"does not fit: {p.batch} requests exceed the KV capacity")
        rows.append({"key": f"{p.config} at batch {p.batch}", "value": value})
    return rows


def config_rows(configs: list[DeploymentConfig | str]) -> list[dict[str, Any]]:
    """One row per named config (a string entry is a config that failed to load, with its error)."""
    rows = []
    for c in configs:
        if isinstance(c, str):
            rows.append(
                {"name": c, "model": "", "hardware": "", "n_gpus": "", "layout": "", "description": "error"}
            )
            continue
        rows.append(
            {
                "name": c.name,
                "model": c.model.key,
                "hardware": c.hardware.key,
                "n_gpus": c.n_gpus,
                "layout": (f"dp={c.dp or c.n_gpus // (c.tp * c.sp * c.pp)} tp={c.tp} cp={c.sp} pp={c.pp} ep={c.ep}"
                           if c.phase == "training" else f"tp={c.tp} dp_attention={c.dp_attention} ep={c.ep}"),
                "description": c.description,
            }
        )
    return rows


def text_table(rows: list[dict[str, Any]], title: str = "") -> str:
    """Fixed-width plain-text table (numbers right-aligned, thousands separated)."""
    if not rows:
        return f"{title}\n(none)\n" if title else "(none)\n"
    cols = list(rows[0])

    def cell(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, bool) or not isinstance(v, int | float):
            return str(v)
        return f"{v:,}" if isinstance(v, int) else f"{v:,.4g}"

    body = [[cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    numeric = [
        all(
            isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool) or r.get(c) is None
            for r in rows
        )
        for c in cols
    ]
    lines = [title] if title else []
    lines.append(
        "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cols, widths, numeric, strict=True))
    )
    for b in body:
        lines.append(
            "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(b, widths, numeric, strict=True))
        )
    return "\n".join(lines) + "\n"
