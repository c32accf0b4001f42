"""The floor is monotone: t_opt, t_sum and every resource time never fall as batch or context grows, for every
named serving config, so each wall is crossed once and `walls` finds it exactly there."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.budgets.configs import list_configs, load_config
from tracekit.floor import DeploymentConfig, FloorResult, compute_floor
from tracekit.floor.walls import CROSSINGS, compute_walls

SERVING = [n for n in list_configs() if load_config(n).phase != "training"]
CONTEXTS = (256, 2048, 8192, 32768)


@cache
def base(name: str, context: int) -> DeploymentConfig | None:
    """The config at `context` with batch 1 (None where that context does not fit)."""
    try:
        return load_config(name, {"batch": "1", "context_tokens": str(context)})
    except Exception:  # noqa: BLE001 - a context that does not fit beside the weights is skipped
        return None


def floor_at(cfg: DeploymentConfig, batch: int, context: int | None = None) -> FloorResult:
    return compute_floor(replace(cfg, batch=batch, context_tokens=context or cfg.context_tokens))


def assert_not_lower(small: FloorResult, big: FloorResult) -> None:
    """t_opt, t_sum, every resource and the latency chain (its own term, inside both) never fall."""
    assert big.t_opt_ns >= small.t_opt_ns and big.t_sum_ns >= small.t_sum_ns
    assert big.latency_chain_ns >= small.latency_chain_ns
    for r in (small, big):
        assert r.t_opt_ns >= r.latency_chain_ns and r.t_sum_ns >= sum(r.resource_ns.values()) + r.latency_chain_ns
    for r, ns in small.resource_ns.items():
        assert big.resource_ns[r] >= ns, r


def test_every_serving_config_is_covered() -> None:
    assert len(SERVING) >= 9 and {"dsv32-ep16", "dsv32-tp16", "dsv3-ep144-h800"} <= set(SERVING)
    assert sum(compute_floor(load_config(n)).latency_chain_ns > 0 for n in SERVING) >= 5  # the chain is exercised


@pytest.mark.parametrize("name", SERVING)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_floor_never_falls_as_batch_grows(name: str, data: st.DataObject) -> None:
    context = data.draw(st.sampled_from([c for c in (*CONTEXTS, load_config(name).context_tokens) if base(name, c)]))
    cfg = base(name, context)
    cap = cfg.kv_capacity_requests
    b1 = data.draw(st.integers(1, cap))
    b2 = data.draw(st.integers(b1, cap))
    small, big = floor_at(cfg, b1), floor_at(cfg, b2)
    assert_not_lower(small, big)
    for wall, (crossed, _) in CROSSINGS.items():
        assert not crossed(small) or crossed(big), f"{wall} un-crosses between batch {b1} and {b2}"


@pytest.mark.parametrize("name", SERVING)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_floor_never_falls_as_context_grows(name: str, data: st.DataObject) -> None:
    fits = [c for c in CONTEXTS if base(name, c)]
    c1 = data.draw(st.integers(1, fits[-1]))
    c2 = data.draw(st.integers(c1, fits[-1]))
    cfg = base(name, fits[-1])
    batch = data.draw(st.integers(1, replace(cfg, context_tokens=c2).kv_capacity_requests))
    assert_not_lower(floor_at(cfg, batch, c1), floor_at(cfg, batch, c2))


@pytest.mark.parametrize("name", SERVING)
def test_each_wall_is_crossed_once_where_walls_finds_it(name: str) -> None:
    """Scan every batch up to the capacity (capped at 3000; beyond it about 3000 more, every 7th or wider): each
    crossing is a single step from false to true, at the concurrency `walls` reports. Each batch's floor is
    computed once for all walls."""
    cfg = base(name, load_config(name).context_tokens)
    cap = cfg.kv_capacity_requests
    stride = max(7, -(-(cap - 3000) // 3000))
    batches = [*range(1, min(cap, 3000) + 1), *range(3001, cap + 1, stride)]
    if batches[-1] != cap:
        batches.append(cap)
    found = {w.name: w.batch for w in compute_walls(cfg).walls}
    floors = [floor_at(cfg, b) for b in batches]
    for wall, (crossed, _) in CROSSINGS.items():
        states = [crossed(r) for r in floors]
        flips = [batches[i] for i in range(1, len(states)) if states[i] != states[i - 1]]
        assert len(flips) <= 1 and (not flips or states[-1]), f"{wall} flips at {flips}"
        first = batches[states.index(True)] if any(states) else None
        if first is not None and first > 3000:  # between scanned points: walls bisects to the exact batch
            assert crossed(floor_at(cfg, found[wall])) and not crossed(floor_at(cfg, found[wall] - 1))
        else:
            assert found[wall] == first, wall
