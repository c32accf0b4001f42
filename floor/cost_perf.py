"""Performance-cost: cost per million tokens of a floor config, and its sensitivity to HBM and network.

usd per million tokens = (GPU cost / lifetime + power x energy price) / tokens per second per GPU x 1e6,
with tokens per second from the floor (FloorResult.tokens_per_s_per_gpu at t_opt), so the figure is a lower
bound on what the configuration can cost. The sensitivity rows re-run the floor with one hardware field scaled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import Resolver, load_config
from .cost import CostParams, GpuCost, GpuPackage, apply_overrides, gpu_cost, load_catalog, split_overrides
from .deployment import DeploymentConfig
from .errors import ConfigError
from .roofline import compute_floor

SECONDS_PER_YEAR = 365.25 * 86400
#: what a token is, per floor phase
TOKEN_KINDS = {"decode": "output tokens served", "prefill": "prompt tokens processed", "training": "tokens trained"}
#: bandwidth factors of the sensitivity table; HBM stacks go one down and one up
BANDWIDTH_FACTORS = (0.5, 2.0)


@dataclass(frozen=True)
class TokenCost:
    """Per GPU: capital and energy cost per second, tokens per second, and the cost per million tokens."""

    gpu_cost_usd: float
    lifetime_years: float
    power_w: float
    energy_usd_per_kwh: float
    tokens_per_s: float
    capex_usd_per_s: float
    energy_usd_per_s: float
    usd_per_million_tokens: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def token_cost(
    gpu_cost_usd: float, lifetime_years: float, power_w: float, energy_usd_per_kwh: float, tokens_per_s: float
) -> TokenCost:
    """(gpu_cost_usd / lifetime_s + power_w / 1000 x energy_usd_per_kwh / 3600) / tokens_per_s x 1e6."""
    if tokens_per_s <= 0 or lifetime_years <= 0:
        raise ConfigError(f"cost per token needs tokens/s > 0 and lifetime > 0, got {tokens_per_s}, {lifetime_years}")
    capex = gpu_cost_usd / (lifetime_years * SECONDS_PER_YEAR)
    energy = power_w / 1000.0 * energy_usd_per_kwh / 3600.0
    return TokenCost(
        gpu_cost_usd=gpu_cost_usd,
        lifetime_years=lifetime_years,
        power_w=power_w,
        energy_usd_per_kwh=energy_usd_per_kwh,
        tokens_per_s=tokens_per_s,
        capex_usd_per_s=capex,
        energy_usd_per_s=energy,
        usd_per_million_tokens=(capex + energy) / tokens_per_s * 1e6,
    )


def with_hbm_stacks(cfg: DeploymentConfig, from_stacks: int, to_stacks: int) -> DeploymentConfig:
    """HBM capacity and bandwidth in proportion to the stacks (per-stack capacity and speed held)."""
    if to_stacks == from_stacks:
        return cfg
    k = to_stacks / from_stacks
    hw = cfg.hardware
    return replace(cfg, hardware=replace(hw, hbm_bytes=hw.hbm_bytes * k, hbm_bytes_per_s=hw.hbm_bytes_per_s * k))


def scale_hbm_bandwidth(cfg: DeploymentConfig, k: float) -> DeploymentConfig:
    return replace(cfg, hardware=replace(cfg.hardware, hbm_bytes_per_s=cfg.hardware.hbm_bytes_per_s * k))


def scale_network(cfg: DeploymentConfig, k: float) -> DeploymentConfig:
    """Scale-up (line rate and achievable) and scale-out bandwidth times k."""
    hw = cfg.hardware
    return replace(
        cfg,
        hardware=replace(
            hw,
            scaleup_bytes_per_s=hw.scaleup_bytes_per_s * k,
            scaleup_achievable_bytes_per_s=hw.scaleup_achievable_bytes_per_s * k,
            scaleout_bytes_per_s=hw.scaleout_bytes_per_s * k,
        ),
    )


@dataclass(frozen=True)
class Variant:
    """One row of the sensitivity table; infeasible when the config no longer fits (reason says why)."""

    change: str
    gpu_cost_usd: float
    tokens_per_s: float | None
    binding: str | None
    usd_per_million_tokens: float | None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def floor_tokens_per_s(cfg: DeploymentConfig) -> tuple[float, str]:
    """Tokens per second per GPU at the floor t_opt (a decode or prefill step, or a whole training step:
    forward, backward and optimizer), and the binding resource."""
    result = compute_floor(cfg)
    return result.tokens_per_s_per_gpu(), result.binding


def _variant(change: str, cfg: DeploymentConfig, package: GpuPackage, params: CostParams) -> Variant:
    """Manufacturing cost of `package` and the floor of `cfg` (hardware already scaled)."""
    manufactured = gpu_cost(package, load_catalog().processes, params).total_usd
    cost_usd = params.gpu_cost_usd or manufactured
    try:
        tps, binding = floor_tokens_per_s(cfg)
    except ConfigError as exc:
        return Variant(change, cost_usd, None, None, None, reason=str(exc))
    tc = token_cost(cost_usd, params.lifetime_years, package.power_w, params.energy_usd_per_kwh, tps)
    return Variant(change, cost_usd, tc.tokens_per_s, binding, tc.usd_per_million_tokens)


def sensitivity(cfg: DeploymentConfig, package: GpuPackage, params: CostParams) -> list[Variant]:
    """Baseline; HBM stacks -1/+1 (cost, capacity and bandwidth move); HBM and network bandwidth x0.5, x2
    (cost held: the price of faster memory or links is not modelled)."""
    rows = [_variant("baseline", cfg, package, params)]
    for n in (package.hbm_stacks - 1, package.hbm_stacks + 1):
        if n >= 1:
            pkg = replace(package, hbm_stacks=n)
            rows.append(_variant(f"hbm_stacks={n}", with_hbm_stacks(cfg, package.hbm_stacks, n), pkg, params))
    for k in BANDWIDTH_FACTORS:
        rows.append(_variant(f"hbm_bandwidth x{k:g}", scale_hbm_bandwidth(cfg, k), package, params))
    for k in BANDWIDTH_FACTORS:
        rows.append(_variant(f"network_bandwidth x{k:g}", scale_network(cfg, k), package, params))
    return rows


@dataclass(frozen=True)
class CostReport:
    """`tracekit cost`: the GPU's manufacturing cost, the cost per million tokens and the sensitivity table."""

    config: DeploymentConfig
    package: GpuPackage
    params: CostParams
    manufacturing: GpuCost
    tokens: TokenCost
    token_kind: str
    binding: str
    sensitivity: list[Variant]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": {"name": self.config.name, **self.config.settings()},
            "cost_params": {k: getattr(self.params, k) for k in self.params.__dataclass_fields__},
            "package": {
                "hbm_stacks": self.package.hbm_stacks,
                "hbm_stack_cost_usd": self.package.hbm_stack_cost_usd,
                "packaging_cost_usd": self.package.packaging_cost_usd,
                "interposer_area_mm2": self.package.interposer_area_mm2,
                "power_w": self.package.power_w,
            },
            "manufacturing": self.manufacturing.to_dict(),
            "gpu_cost_source": "gpu_cost_usd" if self.params.gpu_cost_usd else "manufacturing",
            "token_kind": self.token_kind,
            "binding": self.binding,
            "per_gpu": self.tokens.to_dict(),
            "sensitivity": [v.to_dict() for v in self.sensitivity],
            "notes": list(self.notes),
        }


def cost_report(path: str | Path, overrides: dict[str, str] | None = None,
                resolve: Resolver | None = None) -> CostReport:
    """Load the config at `path` (floor keys of `overrides`; `extends` names through `resolve`), cost its GPU
    (cost keys), price its tokens at the floor."""
    floor_over, cost_over = split_overrides(overrides or {})
    cfg = load_config(path, floor_over, resolve)
    catalog = load_catalog()
    base = catalog.package(cfg.hardware.key)
    package, params = apply_overrides(base, catalog.params, cost_over)
    cfg = with_hbm_stacks(cfg, base.hbm_stacks, package.hbm_stacks)
    manufacturing = gpu_cost(package, catalog.processes, params)
    tps, binding = floor_tokens_per_s(cfg)
    cost_usd = params.gpu_cost_usd or manufacturing.total_usd
    tokens = token_cost(cost_usd, params.lifetime_years, package.power_w, params.energy_usd_per_kwh, tps)
    notes = [
        "cost inputs are analyst estimates marked (?) in floor/data/cost.toml: read the GPU cost as an order of "
        "magnitude, not a quote; the manufacturing cost is not the purchase price (set gpu_cost_usd=... for that)",
        f"tokens/s per GPU at the floor t_opt ({cfg.phase}, physical peaks): the cost per token is a lower bound",
        "power is the GPU's rated board power only (no host, network, cooling); set power_w=... to include them",
        "sensitivity: bandwidth rows hold the GPU cost fixed; HBM-stack rows move cost, capacity and bandwidth "
        "together and hold the interposer and packaging cost",
    ]
    return CostReport(
        config=cfg,
        package=package,
        params=params,
        manufacturing=manufacturing,
        tokens=tokens,
        token_kind=TOKEN_KINDS[cfg.phase],
        binding=binding,
        sensitivity=sensitivity(cfg, package, params),
        notes=notes,
    )
