"""Walls as concurrency grows, the goodput frontier, the crossover of two layouts and TPOT-SLO reachability.

Concurrency is `batch`: concurrent requests in the whole deployment, swept from 1 to the KV capacity whatever
the config's own batch. The floor is monotone in batch (physical peaks, no size-dependent efficiency), so
every wall below is crossed once and stays crossed. Each wall is the smallest concurrency at which that
resource starts to bind:
  weight_bandwidth  binds from 1 while weight reads dominate the step (the TPOT floor at light load);
  kv_bandwidth      KV-cache bytes read per step reach the weight bytes;
  compute           compute time reaches HBM time (the ridge crossing, I_work = I_ridge);
  network           network time reaches max(HBM, compute): exposed even with perfect overlap;
  kv_capacity       the largest concurrency whose KV cache fits (the next request does not).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .deployment import DeploymentConfig
from .result import FLOOR_PEAK_KIND, FloorResult
from .roofline import compute_floor
from .units import format_ns


@dataclass(frozen=True)
class Wall:
    name: str
    batch: int | None
    reachable: bool
    t_opt_ns: int | None
    note: str


@dataclass(frozen=True)
class FrontierPoint:
    batch: int
    t_opt_ns: int
    t_sum_ns: int
    tokens_per_s_per_gpu: float
    binding: str


@dataclass(frozen=True)
class SloResult:
    target_ns: int
    reachable: bool
    t_opt_min_ns: int
    max_batch: int | None
    tokens_per_s_per_gpu: float


@dataclass(frozen=True)
class Crossover:
    config_a: str
    config_b: str
    batch: int | None
    below: str
    above: str
    note: str


@dataclass(frozen=True)
class OperatingPoint:
    """One concurrency on the sweep: whether it fits, its floor and binding resource, the walls it is past."""

    config: str
    batch: int
    fits: bool
    t_opt_ns: int | None
    binding: str | None
    past: list[str]


@dataclass(frozen=True)
class WallsResult:
    config: str
    kv_capacity_requests: int
    walls: list[Wall]
    frontier: list[FrontierPoint]
    slo: SloResult | None
    crossover: Crossover | None
    at_batch: list[OperatingPoint] = field(default_factory=list)

    @property
    def ordering(self) -> list[str]:
        """Reachable walls by the concurrency where they bind, then the unreachable ones."""
        reach = sorted((w for w in self.walls if w.reachable), key=lambda w: w.batch or 0)
        return [w.name for w in reach] + [w.name for w in self.walls if not w.reachable]

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "peak_kind": FLOOR_PEAK_KIND,
            "kv_capacity_requests": self.kv_capacity_requests,
            "ordering": self.ordering,
            "walls": [vars(w) for w in self.walls],
            "frontier": [vars(p) for p in self.frontier],
            "slo": vars(self.slo) if self.slo else None,
            "crossover": vars(self.crossover) if self.crossover else None,
            "at_batch": [vars(p) for p in self.at_batch],
        }


#: The walls found by a crossing: once the predicate holds at a concurrency it holds at every larger one
#: (the floor is monotone in batch), so the smallest such concurrency is found by bisection.
CROSSINGS: dict[str, tuple[Callable[[FloorResult], bool], str]] = {
    "kv_bandwidth": (
        lambda r: r.total("kv_bytes") >= r.total("weight_bytes"),
        "KV reads reach weight reads",
    ),
    "compute": (
        lambda r: r.resource_ns["compute"] >= r.resource_ns["hbm"],
        "compute reaches HBM time (ridge)",
    ),
    "network": (
        lambda r: r.resource_ns["network"] >= max(r.resource_ns["hbm"], r.resource_ns["compute"]),
        "network time reaches max(HBM, compute)",
    ),
}


class _Sweep:
    """Floors of one config at any concurrency, memoised."""

    def __init__(self, cfg: DeploymentConfig) -> None:
        self.cfg = cfg
        self.capacity = cfg.kv_capacity_requests
        self._cache: dict[int, FloorResult] = {}

    def at(self, batch: int) -> FloorResult:
        if batch not in self._cache:
            self._cache[batch] = compute_floor(replace(self.cfg, batch=batch))
        return self._cache[batch]

    def first(self, pred: Callable[[FloorResult], bool]) -> int | None:
        """Smallest feasible batch where pred holds."""
        return first_true(lambda b: pred(self.at(b)), self.capacity)


def first_true(pred: Callable[[int], bool], upper: int) -> int | None:
    """Smallest b in [1, upper] with pred(b), for a pred that stays true once true (scan, then bisect)."""
    prev = 0
    for b in geometric_grid(upper, 48):
        if pred(b):
            lo, hi = prev, b  # pred false at lo (or lo = 0), true at hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if pred(mid) else (mid, hi)
            return hi
        prev = b
    return None


def geometric_grid(upper: int, points: int) -> list[int]:
    """Distinct integers from 1 to upper, roughly geometric, both ends included."""
    if upper < 1:
        return []
    vals = {1, upper}
    for i in range(points):
        vals.add(max(1, min(upper, round(math.exp(math.log(upper) * i / max(points - 1, 1))))))
    return sorted(vals)


def _walls(sw: _Sweep) -> list[Wall]:
    cap = sw.capacity
    one = sw.at(1)
    weight_bound = one.binding == "hbm" and one.total("weight_bytes") >= one.total("kv_bytes")
    walls = [
        Wall(
            "weight_bandwidth",
            1 if weight_bound else None,
            weight_bound,
            one.t_opt_ns if weight_bound else None,
            f"weight reads set the light-load floor of {format_ns(one.t_opt_ns)} per step"
            if weight_bound
            else f"{one.binding} binds from the first request, not weight reads",
        )
    ]
    for name, (pred, what) in CROSSINGS.items():
        b = sw.first(pred)
        if b is None:
            walls.append(
                Wall(name, None, False, None, f"unreachable: not before the KV capacity of {cap} requests")
            )
        else:
            walls.append(Wall(name, b, True, sw.at(b).t_opt_ns, f"{what} at {b} concurrent requests"))
    walls.append(
        Wall(
            "kv_capacity",
            cap,
            True,
            sw.at(cap).t_opt_ns,
            f"{cap} requests of {sw.cfg.context_tokens} tokens fit; request {cap + 1} does not",
        )
    )
    return walls


def frontier(cfg: DeploymentConfig, points: int = 24) -> list[FrontierPoint]:
    """Tokens/s per GPU against step time (TPOT in decode) over feasible concurrencies, undominated only."""
    sw = _Sweep(cfg)
    return _frontier(sw, points)


def _frontier(sw: _Sweep, points: int) -> list[FrontierPoint]:
    pts = []
    for b in geometric_grid(sw.capacity, points):
        r = sw.at(b)
        pts.append(FrontierPoint(b, r.t_opt_ns, r.t_sum_ns, r.tokens_per_s_per_gpu(), r.binding))
    return [
        p
        for p in pts
        if not any(
            (o.t_opt_ns <= p.t_opt_ns and o.tokens_per_s_per_gpu > p.tokens_per_s_per_gpu) for o in pts
        )
    ]


def slo_reach(cfg: DeploymentConfig, target_ns: int) -> SloResult:
    """Is a TPOT target reachable at all, and up to which concurrency (t_opt grows with load)? The floor per
    output token is t_opt / tokens_per_step."""
    return _slo(_Sweep(cfg), target_ns)


def _slo(sw: _Sweep, target_ns: int) -> SloResult:
    one = sw.at(1)
    t_min = one.per_token_ns(one.t_opt_ns)
    if t_min > target_ns:
        return SloResult(target_ns, False, t_min, None, 0.0)
    over = sw.first(lambda r: r.per_token_ns(r.t_opt_ns) > target_ns)
    best = sw.capacity if over is None else over - 1
    return SloResult(target_ns, True, t_min, best, sw.at(best).tokens_per_s_per_gpu())


def crossover(cfg_a: DeploymentConfig, cfg_b: DeploymentConfig) -> Crossover:
    """Concurrency where the layout with more tokens/s per GPU changes (a config past capacity loses)."""
    sa, sb = _Sweep(cfg_a), _Sweep(cfg_b)
    upper = max(sa.capacity, sb.capacity)

    def a_ahead(b: int) -> bool:
        ta = sa.at(b).tokens_per_s_per_gpu() if b <= sa.capacity else -1.0
        tb = sb.at(b).tokens_per_s_per_gpu() if b <= sb.capacity else -1.0
        return ta >= tb

    start = a_ahead(1)
    lead, other = (cfg_a.name, cfg_b.name) if start else (cfg_b.name, cfg_a.name)
    flip = first_true(lambda b: a_ahead(b) != start, upper)
    if flip is None:
        return Crossover(
            cfg_a.name,
            cfg_b.name,
            None,
            lead,
            lead,
            f"{lead} gives more tokens/s per GPU at every concurrency up to {upper}",
        )
    why = " (KV capacity)" if flip > min(sa.capacity, sb.capacity) else ""
    return Crossover(
        cfg_a.name,
        cfg_b.name,
        flip,
        lead,
        other,
        f"{lead} leads below {flip} concurrent requests, {other} from {flip}{why}",
    )


def _at(sw: _Sweep, walls: list[Wall], batch: int) -> OperatingPoint:
    """The sweep at one concurrency (a batch past the KV capacity does not fit and has no floor)."""
    if batch > sw.capacity:
        return OperatingPoint(sw.cfg.name, batch, False, None, None, ["kv_capacity"])
    r = sw.at(batch)
    past = [w.name for w in walls
            if w.reachable and w.batch is not None and w.batch <= batch and w.name != "kv_capacity"]
    return OperatingPoint(sw.cfg.name, batch, True, r.t_opt_ns, r.binding, past)


def compute_walls(
    cfg: DeploymentConfig,
    tpot_slo_ns: int | None = None,
    vs: DeploymentConfig | None = None,
    points: int = 24,
    at_batch: int | None = None,
) -> WallsResult:
    """Walls, their ordering, the frontier, and optionally SLO reachability, the crossover with `vs` and both
    configs at one concurrency `at_batch`. The sweep ignores cfg.batch."""
    sw = _Sweep(cfg)
    walls = _walls(sw)
    points_at = []
    if at_batch is not None:
        points_at.append(_at(sw, walls, at_batch))
        if vs is not None:
            other = _Sweep(vs)
            points_at.append(_at(other, _walls(other), at_batch))
    return WallsResult(
        config=cfg.name,
        kv_capacity_requests=sw.capacity,
        walls=walls,
        frontier=_frontier(sw, points),
        slo=_slo(sw, tpot_slo_ns) if tpot_slo_ns else None,
        crossover=crossover(cfg, vs) if vs else None,
        at_batch=points_at,
    )
