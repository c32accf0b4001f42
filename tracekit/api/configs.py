"""``tracekit.api.floor`` and ``tracekit.walls``: the config commands as functions with typed results.

``floor`` is reached as ``tracekit.api.floor`` (``tracekit.floor`` is the floor model's package); its result
holds the floor's own ``FloorResult`` and placement, ``walls``'s the floor's ``WallsResult``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracekit.api.base import NEAR_FLOOR_THRESHOLD, Rendered, overrides_of
from tracekit.budgets.configs import list_configs, load_config
from tracekit.errors import InputError
from tracekit.floor import (
    ConfigError,
    FloorResult,
    Placement,
    WallsResult,
    compute_floor,
    compute_walls,
    place_measured,
)
from tracekit.floor import parse_duration_ns as floor_parse_duration_ns
from tracekit.floor import report as frep
from tracekit.report.document import Document, Table, rows_frame


def parse_duration_ns(value: str | int | None, option: str) -> int | None:
    """'41ms', '350us', '1.2s' (or integer ns) -> ns; a bad value is an InputError naming the option."""
    if value is None or isinstance(value, int):
        return value
    try:
        return floor_parse_duration_ns(value)
    except ConfigError as exc:
        raise InputError(f"{option} {value!r}: {exc}") from None


class FloorReport(Rendered):
    """``tracekit floor``: ``result`` (the floor), ``placement`` (of ``measured``, or None), ``data`` (its JSON),
    ``parts`` and ``summary`` as DataFrames."""

    def __init__(self, result: FloorResult, placement: Placement | None) -> None:
        self.result, self.placement = result, placement

    @property
    def data(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "placement": self.placement.to_dict() if self.placement else None}

    @property
    def parts(self) -> pl.DataFrame:
        return rows_frame(frep.part_rows(self.result))

    @property
    def summary(self) -> pl.DataFrame:
        return rows_frame(frep.summary_rows(self.result, self.placement))

    def document(self) -> Document:
        tables = [Table("resources per GPU per step", self.parts,
                        note="bytes, FLOPs and messages per GPU per step (JSON and CSV: bytes and ns)"),
                  Table("floor", self.summary)]
        return Document(f"tracekit floor: {self.result.config.name}", tables, notes=list(self.result.notes),
                        data=self.data)


def floor_of(config: str, overrides: dict[str, str], measured_ns: int | None = None,
             threshold: float = NEAR_FLOOR_THRESHOLD) -> FloorReport:
    """The floor of a config with its overrides, and the placement of a measured step."""
    result = compute_floor(load_config(config, overrides))
    return FloorReport(result, place_measured(result, measured_ns, threshold) if measured_ns else None)


def floor(config: str, *, batch: int | None = None, context: int | None = None,
          sets: dict[str, object] | list[str] | None = None, measured: str | int | None = None,
          threshold: float = NEAR_FLOOR_THRESHOLD) -> FloorReport:
    """``tracekit floor --config CONFIG [--measured 41ms]``: the floor at physical peaks (``t_opt``, ``t_sum``,
    binding resource, MFU/MBU, the calibrated ``expected_ns``) and where a measurement sits against it."""
    return floor_of(config, overrides_of(config, batch, context, sets), parse_duration_ns(measured, "measured"),
                    threshold)


class WallsReport(Rendered):
    """``tracekit walls``: ``result`` (the floor's walls), ``walls`` and ``frontier`` as DataFrames."""

    def __init__(self, result: WallsResult) -> None:
        self.result = result

    @property
    def data(self) -> dict[str, Any]:
        return self.result.to_dict()

    @property
    def walls(self) -> pl.DataFrame:
        return rows_frame(frep.wall_rows(self.result))

    @property
    def frontier(self) -> pl.DataFrame:
        return rows_frame(frep.frontier_rows(self.result))

    def plot(self, path: str | Path) -> Path:
        """Latency and throughput against concurrency, walls marked, as a PNG (matplotlib)."""
        from tracekit.floor.plot import plot_walls

        plot_walls(self.result, Path(path))
        return Path(path)

    def document(self) -> Document:
        tables = [Table("walls (as concurrency grows)", self.walls),
                  Table("frontier (floor)", self.frontier,
                        note="tokens/s per GPU against t_opt (the step; TPOT in decode) over feasible concurrencies; "
                             "physical peaks")]
        extra = frep.extra_rows(self.result)
        if extra:
            tables.append(Table("targets", rows_frame(extra)))
        return Document(f"tracekit walls: {self.result.config}", tables, data=self.data)


def walls_of(config: str, overrides: dict[str, str], vs: str | None = None,
             tpot_slo_ns: int | None = None) -> WallsReport:
    """The walls of a config as concurrency grows from 1 (``--batch`` reports both configs at that batch)."""
    at_batch = int(overrides["batch"]) if "batch" in overrides else None
    swept = {**overrides, "batch": "1"}  # the sweep starts at 1 whatever the config's batch
    other = load_config(vs, swept) if vs else None
    return WallsReport(compute_walls(load_config(config, swept), tpot_slo_ns=tpot_slo_ns, vs=other,
                                     at_batch=at_batch))


def walls(config: str, *, vs: str | None = None, tpot_slo: str | int | None = None, batch: int | None = None,
          context: int | None = None, sets: dict[str, object] | list[str] | None = None) -> WallsReport:
    """``tracekit walls --config CONFIG [--vs OTHER] [--tpot-slo 50ms]``: wall ordering, KV capacity, the
    goodput frontier, the crossover of two layouts and TPOT-SLO reachability."""
    return walls_of(config, overrides_of(config, batch, context, sets), vs, parse_duration_ns(tpot_slo, "tpot_slo"))


def config_rows() -> list[dict[str, Any]]:
    """The named configs, one row each (``tracekit configs --format json``)."""
    return frep.config_rows([load_config(n) for n in list_configs()])


def named_configs() -> pl.DataFrame:
    """``tracekit configs``: the named configs."""
    return rows_frame(config_rows())
