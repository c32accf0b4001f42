"""Walls, frontier, crossover and TPOT-SLO reachability: each result checked against direct floors."""

from __future__ import annotations

from dataclasses import replace

from tracekit.budgets.configs import load_config
from tracekit.floor import compute_floor, compute_walls, crossover, slo_reach


def floor_at(cfg, batch):
    return compute_floor(replace(cfg, batch=batch))


def test_wall_ordering_and_brackets():
    cfg = load_config("dsv32-ep16")
    w = compute_walls(cfg)
    names = {x.name for x in w.walls}
    assert names == {"weight_bandwidth", "kv_bandwidth", "compute", "network", "kv_capacity"}
    assert sorted(w.ordering) == sorted(names)
    cap = cfg.kv_capacity_requests
    assert w.kv_capacity_requests == cap
    by = {x.name: x for x in w.walls}
    assert by["kv_capacity"].batch == cap
    comp = by["compute"]
    assert comp.reachable
    # the ridge crossing: compute < HBM one request below, compute >= HBM at the wall
    below, at = floor_at(cfg, comp.batch - 1), floor_at(cfg, comp.batch)
    assert below.resource_ns["compute"] < below.resource_ns["hbm"]
    assert at.resource_ns["compute"] >= at.resource_ns["hbm"]
    # reachable walls come first, in concurrency order; unreachable ones say so
    reach = [by[n].batch for n in w.ordering if by[n].reachable]
    assert reach == sorted(reach)
    for x in w.walls:
        if not x.reachable:
            assert x.batch is None and "unreachable" in x.note or x.name == "weight_bandwidth"


def test_kv_bandwidth_wall_for_dense_model():
    cfg = load_config("llama3-70b-tp8-h100")
    kv = next(x for x in compute_walls(cfg).walls if x.name == "kv_bandwidth")
    assert kv.reachable
    r0, r1 = floor_at(cfg, kv.batch - 1), floor_at(cfg, kv.batch)
    assert r0.total("kv_bytes") < r0.total("weight_bytes") <= r1.total("kv_bytes")


def test_frontier_is_monotone_tradeoff():
    w = compute_walls(load_config("dsv32-ep16"))
    pts = w.frontier
    assert pts[0].batch == 1
    for a, b in zip(pts, pts[1:], strict=False):
        assert b.t_opt_ns >= a.t_opt_ns and b.tokens_per_s_per_gpu > a.tokens_per_s_per_gpu


def test_slo_reachability():
    cfg = load_config("dsv32-ep16")
    t_min = floor_at(cfg, 1).t_opt_ns
    assert not slo_reach(cfg, t_min - 1).reachable
    s = slo_reach(cfg, 50_000_000)
    assert s.reachable and s.t_opt_min_ns == t_min
    assert floor_at(cfg, s.max_batch).t_opt_ns <= 50_000_000
    if s.max_batch < cfg.kv_capacity_requests:
        assert floor_at(cfg, s.max_batch + 1).t_opt_ns > 50_000_000


def test_crossover_ep_vs_tp():
    ep, tp = load_config("dsv32-ep16"), load_config("dsv32-tp16")
    c = crossover(ep, tp)
    assert c.batch is not None and c.below == "dsv32-tp16" and c.above == "dsv32-ep16"
    before_ep, before_tp = floor_at(ep, c.batch - 1), floor_at(tp, c.batch - 1)
    assert before_tp.tokens_per_s_per_gpu() > before_ep.tokens_per_s_per_gpu()
    if c.batch <= tp.kv_capacity_requests:
        assert floor_at(ep, c.batch).tokens_per_s_per_gpu() >= floor_at(tp, c.batch).tokens_per_s_per_gpu()
    assert c.batch <= tp.kv_capacity_requests + 1  # TP replicates the latent: it runs out first


def test_walls_to_dict_is_json_ready():
    import json

    w = compute_walls(
        load_config("qwen3-8b-tp1-h100"), tpot_slo_ns=20_000_000, vs=load_config("qwen3-8b-tp1-mi300x")
    )
    doc = json.loads(json.dumps(w.to_dict()))
    assert doc["ordering"] and doc["slo"]["target_ns"] == 20_000_000 and doc["crossover"]
