"""Chiplet manufacturing cost of one GPU: dies per wafer, die yield, known-good dies, HBM stacks, assembly.

cost per good die = wafer cost / (dies per wafer x yield); the package is
(sum of known-good-die costs + HBM stacks + interposer + packaging) / assembly yield
(the structure of CATCH, Chiplet Actuary and arXiv 2507.02456; facts file section 7). Inputs live in
data/cost.toml with their sources. Standard library only, like the rest of the floor.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from .errors import ConfigError

YIELD_MODELS = ("poisson", "murphy", "seeds", "negative_binomial")


def dies_per_wafer(
    die_area_mm2: float, wafer_diameter_mm: float, edge_exclusion_mm: float = 0.0, scribe_mm: float = 0.0
) -> int:
    """Whole gross dies: pi d^2 / (4 A) - pi d / sqrt(2 A), floored.

    d = diameter - 2 x edge exclusion (the usable diameter); A = die area with scribe, the die taken square:
    (sqrt(area) + scribe)^2. The second term is the partial dies lost around the edge.
    """
    if die_area_mm2 <= 0:
        raise ConfigError(f"die area must be > 0 mm2, got {die_area_mm2}; fix area_mm2")
    d = wafer_diameter_mm - 2.0 * edge_exclusion_mm
    area = (math.sqrt(die_area_mm2) + scribe_mm) ** 2
    gross = math.pi * d * d / (4.0 * area) - math.pi * d / math.sqrt(2.0 * area)
    return max(math.floor(gross), 0)


def die_yield(
    area_mm2: float,
    defect_density_per_mm2: float,
    model: str = "negative_binomial",
    alpha: float = 2.0,
    critical_area_ratio: float = 1.0,
) -> float:
    """Fraction of dies without a killer defect; x = critical area x D0 (critical area = area x ratio).

    poisson e^-x; murphy ((1 - e^-x) / x)^2; seeds 1 / (1 + x);
    negative_binomial (1 + x / alpha)^-alpha (alpha = clustering: -> inf gives Poisson, 1 gives Seeds).
    """
    if area_mm2 <= 0 or defect_density_per_mm2 < 0:
        raise ConfigError(
            f"yield needs area > 0 and defect density >= 0, got {area_mm2} mm2 and {defect_density_per_mm2}/mm2"
        )
    if not 0 < critical_area_ratio <= 1:
        raise ConfigError(f"critical_area_ratio must be in (0, 1], got {critical_area_ratio}; fix the value")
    x = area_mm2 * critical_area_ratio * defect_density_per_mm2
    if model == "poisson":
        return math.exp(-x)
    if model == "murphy":
        return 1.0 if x == 0 else (-math.expm1(-x) / x) ** 2
    if model == "seeds":
        return 1.0 / (1.0 + x)
    if model == "negative_binomial":
        if alpha <= 0:
            raise ConfigError(f"clustering_alpha must be > 0, got {alpha}; fix the value")
        return math.exp(-alpha * math.log1p(x / alpha))
    raise ConfigError(f"yield_model '{model}' unknown; use one of: {', '.join(YIELD_MODELS)}")


@dataclass(frozen=True)
class Process:
    """A wafer process: wafer price and the defect statistics of its dies."""

    key: str
    description: str
    wafer_cost_usd: float
    defect_density_per_mm2: float
    critical_area_ratio: float
    clustering_alpha: float


@dataclass(frozen=True)
class Die:
    """One distinct die of a GPU package, `count` of them per GPU."""

    name: str
    process: str
    area_mm2: float
    count: int


@dataclass(frozen=True)
class GpuPackage:
    """What one GPU is built from (catalog key as in gpus.toml)."""

    key: str
    dies: tuple[Die, ...]
    interposer_area_mm2: float
    hbm_stacks: int
    hbm_stack_cost_usd: float
    packaging_cost_usd: float
    power_w: float


@dataclass(frozen=True)
class CostParams:
    """Wafer geometry, yield model, assembly and economics. None for a logic-process field = the process value."""

    wafer_diameter_mm: float
    edge_exclusion_mm: float
    scribe_mm: float
    yield_model: str
    assembly_yield_per_chip: float
    die_test_cost_usd: float
    lifetime_years: float
    energy_usd_per_kwh: float
    gpu_cost_usd: float = 0.0  # > 0 replaces the manufacturing cost (e.g. a purchase price)
    defect_density_per_mm2: float | None = None
    critical_area_ratio: float | None = None
    clustering_alpha: float | None = None


@dataclass(frozen=True)
class DieCost:
    """Cost of one die type: good-die cost = wafer / (DPW x Y); KGD adds probe test on every tested die."""

    name: str
    process: str
    count: int
    area_mm2: float
    dies_per_wafer: int
    yield_fraction: float
    good_die_usd: float
    kgd_usd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuCost:
    """Manufacturing cost of one GPU, line by line."""

    gpu: str
    dies: tuple[DieCost, ...]
    interposer: DieCost | None
    hbm_stacks: int
    hbm_usd: float
    packaging_usd: float
    chips_placed: int
    assembly_yield: float
    total_usd: float

    @property
    def before_assembly_usd(self) -> float:
        """Everything that goes into one assembly attempt."""
        interposer = self.interposer.kgd_usd if self.interposer else 0.0
        return sum(d.kgd_usd * d.count for d in self.dies) + interposer + self.hbm_usd + self.packaging_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "dies": [d.to_dict() for d in self.dies],
            "interposer": self.interposer.to_dict() if self.interposer else None,
            "hbm_stacks": self.hbm_stacks,
            "hbm_usd": self.hbm_usd,
            "packaging_usd": self.packaging_usd,
            "chips_placed": self.chips_placed,
            "assembly_yield": self.assembly_yield,
            "before_assembly_usd": self.before_assembly_usd,
            "assembly_loss_usd": self.total_usd - self.before_assembly_usd,
            "total_usd": self.total_usd,
        }


def die_cost(name: str, count: int, area_mm2: float, process: Process, params: CostParams, logic: bool) -> DieCost:
    """Dies per wafer, yield (logic dies take the parameter overrides), good-die and known-good-die cost."""
    d0, ratio, alpha = process.defect_density_per_mm2, process.critical_area_ratio, process.clustering_alpha
    if logic:
        d0 = d0 if params.defect_density_per_mm2 is None else params.defect_density_per_mm2
        ratio = ratio if params.critical_area_ratio is None else params.critical_area_ratio
        alpha = alpha if params.clustering_alpha is None else params.clustering_alpha
    dpw = dies_per_wafer(area_mm2, params.wafer_diameter_mm, params.edge_exclusion_mm, params.scribe_mm)
    if dpw < 1:
        raise ConfigError(f"{name}: a {area_mm2:g} mm2 die does not fit on a {params.wafer_diameter_mm:g} mm wafer")
    y = die_yield(area_mm2, d0, params.yield_model, alpha, ratio)
    if not y > MIN_YIELD:
        raise ConfigError(f"{name}: the {params.yield_model} yield of a {area_mm2:g} mm2 die is {y:.3g}, no good die; "
                          "lower defect_density_per_mm2 or critical_area_ratio")
    raw = process.wafer_cost_usd / dpw
    return DieCost(
        name=name,
        process=process.key,
        count=count,
        area_mm2=area_mm2,
        dies_per_wafer=dpw,
        yield_fraction=y,
        good_die_usd=raw / y,
        kgd_usd=(raw + params.die_test_cost_usd) / y,
    )


def gpu_cost(package: GpuPackage, processes: dict[str, Process], params: CostParams) -> GpuCost:
    """(sum KGD dies + interposer + HBM stacks + packaging) / assembly yield; yield = per-chip yield ^ chips."""
    dies = tuple(
        die_cost(d.name, d.count, d.area_mm2, _process(processes, d.process, package.key), params, logic=True)
        for d in package.dies
    )
    interposer = None
    if package.interposer_area_mm2 > 0:
        proc = _process(processes, "interposer", package.key)
        interposer = die_cost("interposer", 1, package.interposer_area_mm2, proc, params, logic=False)
    chips = sum(d.count for d in package.dies) + package.hbm_stacks
    assembly_yield = params.assembly_yield_per_chip**chips
    if not assembly_yield > MIN_YIELD:
        raise ConfigError(f"{package.key}: assembly yield {params.assembly_yield_per_chip:g} per chip over {chips} "
                          f"chips is {assembly_yield:.3g}, no good package; raise assembly_yield_per_chip or lower "
                          "hbm_stacks")
    partial = GpuCost(
        gpu=package.key,
        dies=dies,
        interposer=interposer,
        hbm_stacks=package.hbm_stacks,
        hbm_usd=package.hbm_stacks * package.hbm_stack_cost_usd,
        packaging_usd=package.packaging_cost_usd,
        chips_placed=chips,
        assembly_yield=assembly_yield,
        total_usd=0.0,
    )
    return replace(partial, total_usd=partial.before_assembly_usd / assembly_yield)


def _process(processes: dict[str, Process], key: str, gpu: str) -> Process:
    try:
        return processes[key]
    except KeyError:
        raise ConfigError(
            f"data/cost.toml: [gpu.{gpu}] uses process '{key}', which has no [process.{key}] table; add it"
        ) from None


# ---- catalog (data/cost.toml) and --set overrides ------------------------------------------------------------


@dataclass(frozen=True)
class CostCatalog:
    """Everything in data/cost.toml."""

    params: CostParams
    processes: dict[str, Process]
    packages: dict[str, GpuPackage]

    def package(self, gpu_key: str) -> GpuPackage:
        try:
            return self.packages[gpu_key]
        except KeyError:
            raise ConfigError(
                f"no cost data for hardware '{gpu_key}' (have: {', '.join(sorted(self.packages))}); add a "
                f"[gpu.{gpu_key}] table with its sources to floor/data/cost.toml"
            ) from None


def _get(table: dict[str, Any], key: str, where: str, typ: type = float) -> Any:
    if key not in table:
        raise ConfigError(f"data/cost.toml: [{where}] lacks '{key}'; add it with its source")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float) if typ is float else typ):
        raise ConfigError(f"data/cost.toml: [{where}] '{key}' must be {typ.__name__}, got {value!r}")
    return typ(value)


@cache
def load_catalog() -> CostCatalog:
    """Parse data/cost.toml (cached); a missing or mistyped key is a one-line ConfigError."""
    raw = tomllib.loads((resources.files(__package__) / "data" / "cost.toml").read_text(encoding="utf-8"))
    wafer, asm, eco = raw.get("wafer", {}), raw.get("assembly", {}), raw.get("economics", {})
    params = CostParams(
        wafer_diameter_mm=_get(wafer, "diameter_mm", "wafer"),
        edge_exclusion_mm=_get(wafer, "edge_exclusion_mm", "wafer"),
        scribe_mm=_get(wafer, "scribe_mm", "wafer"),
        yield_model="negative_binomial",
        assembly_yield_per_chip=_get(asm, "yield_per_chip", "assembly"),
        die_test_cost_usd=_get(asm, "die_test_cost_usd", "assembly"),
        lifetime_years=_get(eco, "lifetime_years", "economics"),
        energy_usd_per_kwh=_get(eco, "energy_usd_per_kwh", "economics"),
    )
    processes = {
        key: Process(
            key=key,
            description=str(row.get("description", key)),
            **{f: _get(row, f, f"process.{key}") for f in _PROCESS_FIELDS},
        )
        for key, row in raw.get("process", {}).items()
    }
    packages = {}
    for key, row in raw.get("gpu", {}).items():
        where = f"gpu.{key}"
        dies = tuple(
            Die(
                name=_get(d, "name", where, str),
                process=_get(d, "process", where, str),
                area_mm2=_get(d, "area_mm2", where),
                count=_get(d, "count", where, int),
            )
            for d in row.get("dies", [])
        )
        if not dies:
            raise ConfigError(f"data/cost.toml: [{where}] needs at least one entry in 'dies'")
        packages[key] = GpuPackage(
            key=key,
            dies=dies,
            hbm_stacks=_get(row, "hbm_stacks", where, int),
            **{f: _get(row, f, where) for f in _PACKAGE_FLOATS},
        )
    return CostCatalog(params=params, processes=processes, packages=packages)


_PROCESS_FIELDS = ("wafer_cost_usd", "defect_density_per_mm2", "critical_area_ratio", "clustering_alpha")
_PACKAGE_FLOATS = ("interposer_area_mm2", "hbm_stack_cost_usd", "packaging_cost_usd", "power_w")

#: `--set` keys that belong to the cost model (all others go to the floor config), and their types.
PARAM_KEYS: dict[str, type] = {
    "wafer_diameter_mm": float,
    "edge_exclusion_mm": float,
    "scribe_mm": float,
    "yield_model": str,
    "assembly_yield_per_chip": float,
    "die_test_cost_usd": float,
    "lifetime_years": float,
    "energy_usd_per_kwh": float,
    "gpu_cost_usd": float,
    "defect_density_per_mm2": float,
    "critical_area_ratio": float,
    "clustering_alpha": float,
}
PACKAGE_KEYS: dict[str, type] = {"hbm_stacks": int, **dict.fromkeys(_PACKAGE_FLOATS, float)}
COST_KEYS = (*PARAM_KEYS, *PACKAGE_KEYS)


def split_overrides(overrides: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """`--set` pairs -> (floor config overrides, cost overrides)."""
    floor = {k: v for k, v in overrides.items() if k not in COST_KEYS}
    cost = {k: v for k, v in overrides.items() if k in COST_KEYS}
    return floor, cost


def apply_overrides(
    package: GpuPackage, params: CostParams, overrides: dict[str, str]
) -> tuple[GpuPackage, CostParams]:
    """Cast and apply cost `--set` values, checking ranges; the message names the key."""
    pkg_kw: dict[str, Any] = {}
    par_kw: dict[str, Any] = {}
    for key, text in overrides.items():
        typ = PARAM_KEYS.get(key) or PACKAGE_KEYS[key]
        try:
            value = typ(text) if typ is not int else int(text)
        except (ValueError, OverflowError):
            kind = {int: "a whole number", float: "a number", str: "a name"}[typ]
            raise ConfigError(f"--set {key}={text}: not {kind}; give e.g. {key}=2") from None
        _check_range(key, value)
        (pkg_kw if key in PACKAGE_KEYS else par_kw)[key] = value
    return replace(package, **pkg_kw), replace(params, **par_kw)


COST_VALUE_MAX = 1e12  # no cost field (dollars, watts, years, mm, stacks) comes near it; keeps products finite
MIN_YIELD = 1e-9  # a yield below this leaves no good die or package: the cost would divide by (nearly) zero


def _check_range(key: str, value: Any) -> None:
    if isinstance(value, int | float) and not (math.isfinite(value) and abs(value) <= COST_VALUE_MAX):
        raise ConfigError(f"--set {key}={value}: must be a finite number up to {COST_VALUE_MAX:g}; fix the value")
    if key == "yield_model":
        ok, want = value in YIELD_MODELS, f"one of {', '.join(YIELD_MODELS)}"
    elif key in ("assembly_yield_per_chip", "critical_area_ratio"):
        ok, want = 0 < value <= 1, "in (0, 1]"
    elif key in ("hbm_stacks", "lifetime_years", "wafer_diameter_mm", "clustering_alpha"):
        ok, want = value > 0, "> 0"
    else:
        ok, want = value >= 0, ">= 0"
    if not ok:
        raise ConfigError(f"--set {key}={value}: must be {want}; fix the value")
