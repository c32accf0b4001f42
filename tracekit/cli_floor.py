"""`tracekit floor`, `tracekit walls` and `tracekit configs`: thin click wrappers over tracekit.floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.output import Document, Table, emit, output_options


def _frame(rows: list[dict[str, Any]]) -> Any:
    """Rows -> polars frame; the value column of key/value tables becomes text."""
    import polars as pl

    if rows and "value" in rows[0]:
        rows = [{**r, "value": str(r["value"])} for r in rows]
    return pl.DataFrame(rows, infer_schema_length=None)


def _duration(value: str | None, option: str) -> int | None:
    from tracekit.floor import ConfigError, parse_duration_ns

    if value is None:
        return None
    try:
        return parse_duration_ns(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _overrides(batch: int | None, context: int | None, sets: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--set")
        out[key.strip()] = value.strip()
    if batch is not None:
        out["batch"] = str(batch)
    if context is not None:
        out["context_tokens"] = str(context)
    return out


_config_option = click.option(
    "--config", required=True, help="Named config (see `tracekit configs`) or a TOML file."
)
_batch_option = click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=None,
    help="Concurrent requests in the whole deployment (all GPUs).",
)
_context_option = click.option(
    "--context", type=click.IntRange(min=1), default=None, help="KV length per request, in tokens."
)
_set_option = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any config field, e.g. --set kv_format=fp8 (repeatable).",
)


@click.command("floor")
@_config_option
@_batch_option
@_context_option
@_set_option
@click.option(
    "--measured", default=None, metavar="DURATION", help="Measured step time, e.g. 41ms, 350us, 1.2s."
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=1.0),
    default=1.3,
    show_default=True,
    help="Residual ratio (measured / t_opt) under which to stop kernel tuning.",
)
@output_options
def floor_cmd(
    config: str,
    batch: int | None,
    context: int | None,
    sets: tuple[str, ...],
    measured: str | None,
    threshold: float,
    fmt: str,
    out_path: Path | None,
) -> None:
    """The analytical floor: resources by kernel class, t_opt, t_sum, binding resource, MFU/MBU."""
    from tracekit.floor import compute_floor, load_config, place_measured
    from tracekit.floor import report as frep

    measured_ns = _duration(measured, "--measured")
    cfg = load_config(config, _overrides(batch, context, sets))
    result = compute_floor(cfg)
    placement = place_measured(result, measured_ns, threshold) if measured_ns else None
    data = result.to_dict()
    data["placement"] = placement.to_dict() if placement else None
    tables = [
        Table(
            "resources per GPU per step",
            _frame(frep.part_rows(result)),
            note="bytes, FLOPs and messages per GPU per step; times in ns",
        ),
        Table("floor", _frame(frep.summary_rows(result, placement))),
    ]
    emit(Document(f"tracekit floor: {cfg.name}", tables, notes=result.notes, data=data), fmt, out_path)


@click.command("walls")
@_config_option
@_batch_option
@_context_option
@_set_option
@click.option("--vs", "vs", default=None, help="A second config: report the crossover concurrency.")
@click.option("--tpot-slo", default=None, metavar="DURATION", help="Time-per-output-token target, e.g. 50ms.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write latency and throughput against concurrency, walls marked, to FILE.png (matplotlib).",
)
@output_options
def walls_cmd(
    config: str,
    batch: int | None,
    context: int | None,
    sets: tuple[str, ...],
    vs: str | None,
    tpot_slo: str | None,
    plot_path: Path | None,
    fmt: str,
    out_path: Path | None,
) -> None:
    """Walls as concurrency grows (ordering, KV capacity), frontier, crossover and TPOT-SLO reachability."""
    from tracekit.floor import compute_walls, load_config
    from tracekit.floor import report as frep

    slo_ns = _duration(tpot_slo, "--tpot-slo")
    cfg = load_config(config, _overrides(batch, context, sets))
    other = load_config(vs) if vs else None
    walls = compute_walls(cfg, tpot_slo_ns=slo_ns, vs=other)
    if plot_path is not None:
        from tracekit.floor.plot import plot_walls

        plot_walls(walls, plot_path)
    tables = [
        Table("walls (as concurrency grows)", _frame(frep.wall_rows(walls))),
        Table(
            "frontier (floor)",
            _frame(frep.frontier_rows(walls)),
            note="tokens/s per GPU against t_opt (TPOT in decode) over feasible concurrencies",
        ),
    ]
    extra = frep.extra_rows(walls)
    if extra:
        tables.append(Table("targets", _frame(extra)))
    emit(Document(f"tracekit walls: {cfg.name}", tables, data=walls.to_dict()), fmt, out_path)


@click.command("configs")
@output_options
def configs_cmd(fmt: str, out_path: Path | None) -> None:
    """List the named deployment configs."""
    from tracekit.floor import list_configs, load_config
    from tracekit.floor import report as frep

    rows = frep.config_rows([load_config(n) for n in list_configs()])
    emit(
        Document("tracekit configs", [Table("configs", _frame(rows))], data={"configs": rows}), fmt, out_path
    )
