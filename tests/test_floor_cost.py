"""Chiplet cost and performance-cost (tracekit.floor.cost, cost_perf, `tracekit cost`).

Formulas are checked against hand calculations written out here; no test reads a number from
floor/data/cost.toml as an expected value (those are estimates, marked (?) there).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tracekit.budgets.configs import list_configs, load_config
from tracekit.cli import main
from tracekit.floor import gpu_names
from tracekit.floor.cost import (
    YIELD_MODELS,
    CostParams,
    Die,
    GpuPackage,
    Process,
    die_yield,
    dies_per_wafer,
    gpu_cost,
    load_catalog,
)
from tracekit.floor.cost_perf import token_cost
from tracekit.floor.roofline import compute_floor

# ---- dies per wafer --------------------------------------------------------------------------------------------


def test_dies_per_wafer_textbook_examples():
    # 300 mm wafer, no edge exclusion or scribe (the Hennessy & Patterson example shape), by hand:
    # 1.5 cm side, A = 225 mm2: pi*300^2/(4*225) - pi*300/sqrt(450) = 314.159 - 44.429 = 269.73 -> 269 whole dies
    assert dies_per_wafer(225.0, 300.0) == 269
    # 1.0 cm side, A = 100 mm2: 706.858 - pi*300/sqrt(200) = 706.858 - 66.643 = 640.22 -> 640
    assert dies_per_wafer(100.0, 300.0) == 640


def test_dies_per_wafer_edge_exclusion_and_scribe():
    # 814 mm2 die, 3 mm edge exclusion (d = 294 mm), 0.1 mm scribe: side 28.5307 + 0.1 = 28.6307, A = 819.72 mm2
    # pi*294^2/(4*819.72) - pi*294/sqrt(2*819.72) = 82.816 - 22.811 = 60.0 -> 60
    assert dies_per_wafer(814.0, 300.0, edge_exclusion_mm=3.0, scribe_mm=0.1) == 60
    # the same die without edge exclusion or scribe: 86.84 - 23.36 = 63.5 -> 63
    assert dies_per_wafer(814.0, 300.0) == 63


def test_dies_per_wafer_falls_with_area_and_hits_zero():
    counts = [dies_per_wafer(a, 300.0, 3.0, 0.1) for a in (50, 100, 200, 400, 800, 1600, 3200)]
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == len(counts)
    assert dies_per_wafer(40_000.0, 300.0) == 0


# ---- yield models ----------------------------------------------------------------------------------------------


def test_yield_hand_values():
    # Poisson, A = 100 mm2, D0 = 0.001/mm2: e^-0.1
    assert die_yield(100, 0.001, "poisson") == pytest.approx(0.904837, abs=1e-6)
    # x = A*D0 = 1: Murphy ((1 - e^-1)/1)^2 = 0.632121^2 = 0.399576; Seeds 1/2
    assert die_yield(1000, 0.001, "murphy") == pytest.approx(0.399576, abs=1e-6)
    assert die_yield(1000, 0.001, "seeds") == pytest.approx(0.5)
    # negative binomial, D0 = 0.4/cm2 = 0.004/mm2, alpha = 4 (the H&P 4th-edition form):
    # 2.25 cm2: (1 + 0.9/4)^-4 = 1.225^-4 = 0.44407; 1.00 cm2: 1.1^-4 = 0.68301
    assert die_yield(225, 0.004, "negative_binomial", alpha=4) == pytest.approx(0.44407, abs=1e-5)
    assert die_yield(100, 0.004, "negative_binomial", alpha=4) == pytest.approx(0.68301, abs=1e-5)
    # the facts file's standard parameters (D0 0.0007/mm2, critical area 0.6, alpha 2) on 814 mm2:
    # x = 814*0.6*0.0007 = 0.34188; (1 + 0.17094)^-2 = 0.72935
    assert die_yield(814, 0.0007, "negative_binomial", alpha=2, critical_area_ratio=0.6) == pytest.approx(
        0.72935, abs=1e-5
    )


@pytest.mark.parametrize("model", YIELD_MODELS)
def test_yield_falls_with_area_and_defect_density(model):
    areas = [10, 50, 100, 300, 800, 2000]
    d0s = [0.0001, 0.0005, 0.001, 0.003, 0.01]
    for d0 in d0s:
        ys = [die_yield(a, d0, model) for a in areas]
        assert all(a > b for a, b in zip(ys, ys[1:], strict=False)), (model, d0, ys)
    for a in areas:
        ys = [die_yield(a, d0, model) for d0 in d0s]
        assert all(a > b for a, b in zip(ys, ys[1:], strict=False)), (model, a, ys)
    assert die_yield(500, 0.0, model) == 1.0


def test_negative_binomial_tends_to_poisson_and_rises_with_clustering():
    area, d0 = 800, 0.001  # x = 0.8
    poisson = die_yield(area, d0, "poisson")
    alphas = [0.5, 1, 2, 5, 20, 100, 1e4, 1e7]
    nb = [die_yield(area, d0, "negative_binomial", alpha=a) for a in alphas]
    gaps = [y - poisson for y in nb]
    assert all(g > 0 for g in gaps)  # clustering (finite alpha) always yields more than Poisson
    assert all(a > b for a, b in zip(gaps, gaps[1:], strict=False))  # and the gap closes as alpha grows
    assert gaps[-1] < 1e-6
    # alpha = 1 is Seeds
    assert die_yield(area, d0, "negative_binomial", alpha=1) == pytest.approx(die_yield(area, d0, "seeds"))


def test_murphy_between_poisson_and_seeds():
    for x in (0.01, 0.1, 0.3, 1.0, 2.0, 5.0, 20.0):
        p, m, s = (die_yield(x * 1000, 0.001, k) for k in ("poisson", "murphy", "seeds"))
        assert p < m < s, (x, p, m, s)


def test_yield_rejects_bad_inputs():
    with pytest.raises(ValueError, match="yield_model 'x' unknown"):
        die_yield(100, 0.001, "x")
    with pytest.raises(ValueError, match="clustering_alpha"):
        die_yield(100, 0.001, "negative_binomial", alpha=0)
    with pytest.raises(ValueError, match="critical_area_ratio"):
        die_yield(100, 0.001, critical_area_ratio=1.5)


# ---- package cost ----------------------------------------------------------------------------------------------

_PROCESS = {
    "p": Process("p", "test", wafer_cost_usd=10_000.0, defect_density_per_mm2=0.001, critical_area_ratio=1.0,
                 clustering_alpha=2.0),
    "interposer": Process("interposer", "test", wafer_cost_usd=1_000.0, defect_density_per_mm2=0.0,
                          critical_area_ratio=1.0, clustering_alpha=2.0),
}
_PARAMS = CostParams(wafer_diameter_mm=300.0, edge_exclusion_mm=0.0, scribe_mm=0.0, yield_model="negative_binomial",
                     assembly_yield_per_chip=0.99, die_test_cost_usd=0.0, lifetime_years=4.0,
                     energy_usd_per_kwh=0.1)


def _package(**kw) -> GpuPackage:
    base = dict(key="t", dies=(Die("logic", "p", 100.0, 2),), interposer_area_mm2=0.0, hbm_stacks=4,
                hbm_stack_cost_usd=100.0, packaging_cost_usd=50.0, power_w=500.0)
    return GpuPackage(**{**base, **kw})


def test_gpu_cost_hand_calculation():
    # die: 100 mm2 -> 640 per wafer; Y = (1 + 0.1/2)^-2 = 0.907029; KGD = 10000/640/0.907029 = 17.2266
    # before assembly: 2 x 17.2266 + 4 x 100 + 50 = 484.453; assembly yield 0.99^(2 dies + 4 stacks) = 0.941480
    # total = 484.453 / 0.941480 = 514.566
    c = gpu_cost(_package(), _PROCESS, _PARAMS)
    (die,) = c.dies
    assert die.dies_per_wafer == 640
    assert die.yield_fraction == pytest.approx(0.907029, abs=1e-6)
    assert die.kgd_usd == pytest.approx(17.2266, abs=1e-4)
    assert c.chips_placed == 6 and c.assembly_yield == pytest.approx(0.941480, abs=1e-6)
    assert c.before_assembly_usd == pytest.approx(484.453, abs=1e-3)
    assert c.total_usd == pytest.approx(514.566, abs=1e-3)


def test_gpu_cost_test_cost_and_interposer():
    # probe test $1 on every die: KGD = (15.625 + 1) / 0.907029 = 18.3291
    params = CostParams(**{**_PARAMS.__dict__, "die_test_cost_usd": 1.0})
    assert gpu_cost(_package(), _PROCESS, params).dies[0].kgd_usd == pytest.approx(18.3291, abs=1e-4)
    # a defect-free 2500 mm2 interposer: 28.274 - 13.329 = 14.95 -> 14 per wafer, $1000/14 = 71.429; not a placed chip
    c = gpu_cost(_package(interposer_area_mm2=2500.0), _PROCESS, _PARAMS)
    assert c.interposer.dies_per_wafer == 14 and c.interposer.kgd_usd == pytest.approx(71.429, abs=1e-3)
    assert c.chips_placed == 6


def test_gpu_cost_monotone_in_stacks_area_and_defects():
    base = gpu_cost(_package(), _PROCESS, _PARAMS).total_usd
    assert gpu_cost(_package(hbm_stacks=5), _PROCESS, _PARAMS).total_usd > base
    assert gpu_cost(_package(dies=(Die("logic", "p", 200.0, 2),)), _PROCESS, _PARAMS).total_usd > base
    dirty = CostParams(**{**_PARAMS.__dict__, "defect_density_per_mm2": 0.002})
    assert gpu_cost(_package(), _PROCESS, dirty).total_usd > base


# ---- cost per token --------------------------------------------------------------------------------------------


def test_token_cost_hand_calculation():
    # $30,000 over 4 years: 30000 / (4 * 365.25 * 86400 s) = 30000 / 126,230,400 s = 2.376607e-4 $/s
    # 700 W at $0.10/kWh: 0.7 kW * 0.10 / 3600 s = 1.944444e-5 $/s
    # (2.376607e-4 + 1.944444e-5) / 1000 tok/s * 1e6 = $0.2571051 per million tokens
    t = token_cost(30_000.0, 4.0, 700.0, 0.10, 1000.0)
    assert t.capex_usd_per_s == pytest.approx(2.376607e-4, rel=1e-6)
    assert t.energy_usd_per_s == pytest.approx(1.944444e-5, rel=1e-6)
    assert t.usd_per_million_tokens == pytest.approx(0.2571051, rel=1e-6)
    with pytest.raises(ValueError, match="tokens/s > 0"):
        token_cost(30_000.0, 4.0, 700.0, 0.10, 0.0)


# ---- catalog ---------------------------------------------------------------------------------------------------


def test_catalog_covers_the_named_configs():
    cat = load_catalog()
    assert set(cat.packages) <= set(gpu_names())
    for name in list_configs():
        cat.package(load_config(name).hardware.key)  # raises if a named config's GPU has no cost data
    for pkg in cat.packages.values():
        assert all(d.process in cat.processes for d in pkg.dies)
        assert gpu_cost(pkg, cat.processes, cat.params).total_usd > 0


# ---- `tracekit cost` -------------------------------------------------------------------------------------------


def _cost_json(*args: str) -> dict:
    res = CliRunner().invoke(main, ["cost", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_cli_cost_per_token_matches_hand_formula():
    sets = ["--set", "gpu_cost_usd=30000", "--set", "lifetime_years=4", "--set", "power_w=700",
            "--set", "energy_usd_per_kwh=0.1"]
    doc = _cost_json("--config", "qwen3-8b-tp1-h100", *sets)
    tps = compute_floor(load_config("qwen3-8b-tp1-h100")).tokens_per_s_per_gpu()
    want = (30000 / (4 * 365.25 * 86400) + 0.7 * 0.1 / 3600) / tps * 1e6
    assert doc["per_gpu"]["tokens_per_s"] == pytest.approx(tps)
    assert doc["per_gpu"]["usd_per_million_tokens"] == pytest.approx(want, rel=1e-9)
    assert doc["gpu_cost_source"] == "gpu_cost_usd" and doc["token_kind"] == "output tokens served"


def test_cli_sensitivity_moves_the_right_way():
    doc = _cost_json("--config", "qwen3-8b-tp1-h100")
    rows = {r["change"]: r for r in doc["sensitivity"]}
    base = rows["baseline"]
    assert base["usd_per_million_tokens"] == pytest.approx(doc["per_gpu"]["usd_per_million_tokens"])
    assert base["binding"] == "hbm"  # one GPU at batch 32: memory-bound, so bandwidth moves cost per token
    assert rows["hbm_bandwidth x2"]["usd_per_million_tokens"] < base["usd_per_million_tokens"]
    assert rows["hbm_bandwidth x0.5"]["usd_per_million_tokens"] > base["usd_per_million_tokens"]
    # one GPU, no collectives: the network rows change nothing
    assert rows["network_bandwidth x2"]["usd_per_million_tokens"] == pytest.approx(base["usd_per_million_tokens"])
    n = doc["package"]["hbm_stacks"]
    up, down = rows[f"hbm_stacks={n + 1}"], rows[f"hbm_stacks={n - 1}"]
    assert down["gpu_cost_usd"] < base["gpu_cost_usd"] < up["gpu_cost_usd"]
    # HBM-bound: tokens/s in proportion to the stacks (per-stack bandwidth held); ns rounding only
    assert up["tokens_per_s"] / base["tokens_per_s"] == pytest.approx((n + 1) / n, rel=1e-3)


def test_cli_network_bound_config_feels_network_bandwidth():
    doc = _cost_json("--config", "dsv3-ep144-h800")
    rows = {r["change"]: r for r in doc["sensitivity"]}
    assert rows["network_bandwidth x0.5"]["usd_per_million_tokens"] > rows["baseline"]["usd_per_million_tokens"]


def test_cli_cost_overrides_reach_the_model():
    cat = load_catalog()
    doc = _cost_json("--config", "qwen3-8b-tp1-h100", "--set", "yield_model=poisson", "--set", "batch=8")
    die = doc["manufacturing"]["dies"][0]
    proc = cat.processes[die["process"]]
    assert die["yield_fraction"] == pytest.approx(
        die_yield(die["area_mm2"], proc.defect_density_per_mm2, "poisson", critical_area_ratio=proc.critical_area_ratio)
    )
    assert doc["config"]["batch"] == 8
    six = _cost_json("--config", "qwen3-8b-tp1-h100", "--set", "hbm_stacks=6")
    five = _cost_json("--config", "qwen3-8b-tp1-h100", "--set", "hbm_stacks=5")
    assert six["per_gpu"]["tokens_per_s"] / five["per_gpu"]["tokens_per_s"] == pytest.approx(1.2, rel=1e-3)


def test_cli_infeasible_variant_is_reported_not_raised():
    # a batch that fills the KV cache: one HBM stack less cannot hold it
    full = load_config("qwen3-8b-tp1-h100").kv_capacity_requests
    doc = _cost_json("--config", "qwen3-8b-tp1-h100", "--set", f"batch={full}")
    rows = {r["change"]: r for r in doc["sensitivity"]}
    n = doc["package"]["hbm_stacks"]
    assert rows[f"hbm_stacks={n - 1}"]["usd_per_million_tokens"] is None
    assert "KV capacity" in rows[f"hbm_stacks={n - 1}"]["reason"]


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_cli_cost_formats(fmt):
    res = CliRunner().invoke(main, ["cost", "--config", "qwen3-8b-tp1-mi300x", "--format", fmt])
    assert res.exit_code == 0, res.output
    if fmt == "csv":  # one table (the first); the others are named on stderr, for --table
        assert "IOD" in res.stdout and "cost-per-million-tokens" in res.stderr and "sensitivity" in res.stderr
        return
    assert "per million tokens" in res.output and "sensitivity" in res.output and "IOD" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "yield_model=bogus"], "--set yield_model=bogus: must be one of"),
        (["--set", "hbm_stacks=5.5"], "not a whole number"),
        (["--set", "assembly_yield_per_chip=1.5"], "must be in (0, 1]"),
        (["--set", "hardware=v100", "--set", "batch=1", "--set", "reserve_per_gpu_bytes=0"],
         "no cost data for hardware 'v100'"),
    ],
)
def test_cli_cost_usage_errors(args, message):
    res = CliRunner().invoke(main, ["cost", "--config", "qwen3-8b-tp1-h100", *args])
    assert res.exit_code == 2
    assert message in res.output and res.output.count("\n") == 1


def test_training_configs_are_priced_per_token_trained_at_the_floor():
    import json

    from tracekit.floor import compute_floor

    res = CliRunner().invoke(main, ["cost", "--config", "gpt2-small-dp8-a100", "--format", "json"])
    assert res.exit_code == 0, res.output
    floor = compute_floor(load_config("gpt2-small-dp8-a100"))
    want = floor.tokens_per_step / (floor.t_opt_ns * 1e-9) / 8  # tokens trained per s per GPU at t_opt
    doc = json.loads(res.stdout)
    assert doc["token_kind"] == "tokens trained"
    assert abs(doc["per_gpu"]["tokens_per_s"] - want) <= 1e-6 * want
