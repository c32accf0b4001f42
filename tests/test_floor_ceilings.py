"""Attainable ceilings and the stop rule on the attainable floor (issue 25): a published compute-bound kernel at
0.69-0.78 of the spec peak reads near-floor, a planted step 1.6x over the attainable floor reads kernel, a step
under the attainable floor (but over t_opt) is told to update the ceiling, and t_opt never moves."""

from __future__ import annotations

import pytest

from tracekit.analysis.options import AnalyzeOptions
from tracekit.analysis.verdict import Evidence, decide
from tracekit.budgets.configs import list_configs, load_config
from tracekit.floor import (
    BEATS_CEILING,
    ConfigError,
    ceiling,
    ceilings,
    compute_floor,
    get_gpu,
    gpu_names,
    place_kernel,
    place_measured,
)
from tracekit.floor.ceilings import RESOURCES, parse_ceilings, physical_peak

#: DeepGEMM FP8 GEMM M=4096 N=7168 K=16384 on H800: 1358 TFLOP/s (README 2025-02) and the README's best, 1550.
M, N, K = 4096, 7168, 16384
GEMM_FLOPS, GEMM_BYTES = 2 * M * N * K, M * K + N * K + 2 * M * N


def test_every_ceiling_is_sourced_and_not_above_its_physical_peak() -> None:
    rows = [c for g in gpu_names() for c in ceilings(g)]
    assert len(rows) >= 20 and {c.resource for c in rows} <= set(RESOURCES)
    for c in rows:
        assert c.source and c.measured
        assert 0 < c.rate_per_s <= physical_peak(get_gpu(c.gpu), c.resource, c.dtype), c


def test_lookup_falls_back_and_says_so() -> None:
    assert ceiling("h800", "gemm", "fp8").rate_per_s == 1550e12
    assert ceiling("h800", "gemm", "fp8", shape="grouped").rate_per_s == 1550e12  # no such shape: any shape
    mi = ceiling("mi300x", "gemm", "bf16")
    assert not mi.measured and mi.rate_per_s == get_gpu("mi300x").bf16_flops_per_s and mi.fraction_of_peak == 1
    assert ceiling("b200", "attention", "fp8") == ceiling("b200", "gemm", "fp8")  # attention -> gemm of its dtype
    assert ceiling("a100", "gemm", "fp8").dtype == "bf16"  # no FP8 unit: the BF16 rate
    with pytest.raises(ConfigError, match="unknown ceiling resource"):
        ceiling("h100", "tensorcores")


@pytest.mark.parametrize("text, match", [
    ('[[h100]]\nresource = "gemm"\ndtype = "bf16"\nrate = 2e15\nsource = "x"\n', "physical peak"),
    ('[[h100]]\nresource = "gemm"\ndtype = "bf16"\nrate = 1e14\n', "no source"),
    ('[[h100]]\nresource = "hbm"\ndtype = "bf16"\nrate = 1e12\nsource = "x"\n', "dtype"),
    ('[[h100]]\nresource = "flops"\nrate = 1e12\nsource = "x"\n', "resource 'flops'"),
])
def test_a_bad_ceiling_row_is_refused_with_its_place(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        parse_ceilings(text)
    assert "ceilings.toml: [[h100]] #1" in str(err.value)


def test_the_attainable_floor_is_never_below_t_opt_and_t_opt_is_unchanged() -> None:
    for name in list_configs():
        r = compute_floor(load_config(name))
        assert r.attainable_ns >= r.t_opt_ns, name
        assert r.t_opt_ns == max(r.resource_ns.values()), name
        assert all(p.attainable_ns >= p.floor_ns for p in r.parts), name
        assert r.floor_used == ("attainable" if r.attainable_ns > r.t_opt_ns else "physical")


@pytest.mark.parametrize("rate, physical_ratio", [(1550e12, 1.28), (1358e12, 1.46)])
def test_a_published_compute_bound_gemm_reads_near_floor_on_the_attainable_floor(rate: float,
                                                                                 physical_ratio: float) -> None:
    """DeepGEMM on H800 at 0.78 and 0.69 of the FP8 spec peak: 1.28x and 1.46x t_opt, within 1.3x of the
    attainable floor (its best measured rate), so the verdict says stop."""
    p = place_kernel(get_gpu("h800"), round(GEMM_FLOPS / rate * 1e9), flops=GEMM_FLOPS, hbm_bytes=GEMM_BYTES,
                     flops_dtype="fp8")
    assert p.residual_ratio == pytest.approx(physical_ratio, abs=0.01)
    assert p.floor_used == "attainable" and p.attainable_ratio < 1.3 and p.verdict == "near-floor"
    assert not p.beats_ceiling


def test_fa3_at_075_of_spec_is_above_the_physical_threshold_but_near_the_attainable_floor() -> None:
    flops = 4 * 16384**2 * 128 * 16 / 2  # FA3 paper shape, causal
    p = place_kernel(get_gpu("h100"), round(flops / 740e12 * 1e9), flops=flops, hbm_bytes=4 * 16384 * 128 * 16 * 2,
                     compute="attention")
    assert p.residual_ratio > 1.3 and p.attainable_ratio == pytest.approx(1.0, abs=1e-6)
    assert p.verdict == "near-floor"


def test_faster_than_a_ceiling_reads_near_floor_and_asks_for_the_ceiling() -> None:
    r = compute_floor(load_config("dsv3-ep144-h800"))
    assert r.attainable_ns > 1.05 * r.t_opt_ns
    p = place_measured(r, round(r.t_opt_ns * 1.02))
    assert p.verdict == "near-floor" and p.beats_ceiling and BEATS_CEILING in p.reason
    assert place_measured(r, round(r.t_opt_ns * 0.9)).verdict == "inconclusive"  # below t_opt stays impossible


def _evidence(result, step_ns: int, over: bool) -> Evidence:
    placement = place_measured(result, step_ns)
    floor = {"t_opt_ns": result.t_opt_ns, "peak_kind": result.peak_kind}
    classes = [{"name": "moe_experts", "over_budget": over, "ratio": 2.1, "excess_ns": step_ns // 3}]
    return Evidence(blocking=[], whole_capture=False, step_p50=step_ns, floor=floor, placement=placement,
                    fit_reasons=[], host_gaps={"total_ns": step_ns // 100}, exposed_comm={"exposed_ns": 0},
                    classes=classes)


def test_planted_steps_against_the_attainable_floor() -> None:
    """1.6x over the attainable floor with a class over budget reads kernel; 1.2x over it (1.34x t_opt, which
    the physical floor alone would send to the kernels) reads near-floor; both say which floor decided."""
    r = compute_floor(load_config("dsv3-ep144-h800"))
    opts = AnalyzeOptions()
    verdict, reasons = decide(_evidence(r, round(r.attainable_ns * 1.6), over=True), opts)
    assert verdict == "kernel" and "attainable floor" in reasons[0]
    near = round(r.attainable_ns * 1.2)
    assert near / r.t_opt_ns > 1.3
    verdict, reasons = decide(_evidence(r, near, over=True), opts)
    assert verdict == "near-floor" and "1.20x the attainable floor" in reasons[0]


def test_a_gpu_without_ceilings_keeps_the_physical_stop_rule() -> None:
    r = compute_floor(load_config("dsv32-ep16"))  # H20: nothing measured
    assert r.floor_used == "physical" and r.attainable_ns == r.t_opt_ns and r.attainable_ceilings == []
    assert place_measured(r, round(r.t_opt_ns * 1.35)).verdict == "above-floor"
