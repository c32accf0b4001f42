"""`tracekit floor`, `tracekit walls` and `tracekit configs`: thin click wrappers over tracekit.floor."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.cli.common import NEAR_FLOOR_THRESHOLD, THRESHOLD, config_options, output_options


def _duration(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    from tracekit.floor import ConfigError, parse_duration_ns

    try:
        return parse_duration_ns(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@click.command("floor")
@config_options(required=True)
@click.option(
    "--measured", default=None, metavar="DURATION", help="Measured step time, e.g. 41ms, 350us, 1.2s."
)
@click.option(
    "--threshold",
    type=THRESHOLD,
    default=NEAR_FLOOR_THRESHOLD,
    show_default=True,
    help="Residual ratio (measured / t_opt) under which to stop kernel tuning.",
)
@output_options
def floor_cmd(
    config: str,
    overrides: dict[str, str],
    measured: str | None,
    threshold: float,
    fmt: str,
    out_path: Path | None,
) -> None:
    """The analytical floor at physical peaks: resources by kernel class, t_opt, t_sum, binding resource,
    MFU/MBU, and the calibrated estimate expected_ns beside it."""
    from tracekit.budgets.configs import load_config
    from tracekit.floor import compute_floor, place_measured
    from tracekit.floor import report as frep
    from tracekit.report.document import Document, Table, rows_frame
    from tracekit.report.render import emit

    measured_ns = _duration(measured, "--measured")
    cfg = load_config(config, overrides)
    result = compute_floor(cfg)
    placement = place_measured(result, measured_ns, threshold) if measured_ns else None
    data = result.to_dict()
    data["placement"] = placement.to_dict() if placement else None
    tables = [
        Table(
            "resources per GPU per step",
            rows_frame(frep.part_rows(result)),
            note="bytes, FLOPs and messages per GPU per step (JSON and CSV: bytes and ns)",
        ),
        Table("floor", rows_frame(frep.summary_rows(result, placement))),
    ]
    emit(Document(f"tracekit floor: {cfg.name}", tables, notes=result.notes, data=data), fmt, out_path)


@click.command("walls")
@config_options(required=True)
@click.option("--vs", "vs", default=None,
              help="A second config: report the crossover concurrency (--context, --batch, --set apply to both).")
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
    overrides: dict[str, str],
    vs: str | None,
    tpot_slo: str | None,
    plot_path: Path | None,
    fmt: str,
    out_path: Path | None,
) -> None:
    """Walls as concurrency grows from 1 (ordering, KV capacity), frontier, crossover and TPOT-SLO
    reachability. --batch does not limit the sweep; it reports both configs at that concurrency."""
    from tracekit.budgets.configs import load_config
    from tracekit.floor import compute_walls
    from tracekit.floor import report as frep
    from tracekit.report.document import Document, Table, rows_frame
    from tracekit.report.render import emit

    slo_ns = _duration(tpot_slo, "--tpot-slo")
    at_batch = int(overrides["batch"]) if "batch" in overrides else None
    swept = {**overrides, "batch": "1"}  # the sweep starts at 1 whatever the config's batch
    cfg = load_config(config, swept)
    other = load_config(vs, swept) if vs else None
    walls = compute_walls(cfg, tpot_slo_ns=slo_ns, vs=other, at_batch=at_batch)
    if plot_path is not None:
        from tracekit.files import write_with
        from tracekit.floor.plot import plot_walls

        vs_walls = compute_walls(other, tpot_slo_ns=slo_ns) if other is not None else None
        kind = plot_path.suffix.lstrip(".").lower() or "png"
        write_with(plot_path, "--plot", lambda tmp: plot_walls(walls, tmp, vs_walls, fmt=kind))
    tables = [
        Table("walls (as concurrency grows)", rows_frame(frep.wall_rows(walls))),
        Table(
            "frontier (floor)",
            rows_frame(frep.frontier_rows(walls)),
            note="tokens/s per GPU against t_opt (the step; TPOT in decode) over feasible concurrencies; "
                 "physical peaks",
        ),
    ]
    extra = frep.extra_rows(walls)
    if extra:
        tables.append(Table("targets", rows_frame(extra)))
    emit(Document(f"tracekit walls: {cfg.name}", tables, data=walls.to_dict()), fmt, out_path)


@click.command("configs")
@output_options
def configs_cmd(fmt: str, out_path: Path | None) -> None:
    """List the named deployment configs."""
    from tracekit.budgets.configs import list_configs, load_config
    from tracekit.floor import report as frep
    from tracekit.report.document import Document, Table, rows_frame
    from tracekit.report.render import emit

    rows = frep.config_rows([load_config(n) for n in list_configs()])
    emit(
        Document("tracekit configs", [Table("configs", rows_frame(rows))], data={"configs": rows}), fmt, out_path
    )
