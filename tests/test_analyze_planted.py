"""Planted-truth captures in both formats: the analysis recovers what was planted (within 1%)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios import GapPlan, decode_capture
from fixtures.synth import write_kineto, write_nsys
from tracekit import floor
from tracekit.analysis.options import REPORT_SCHEMA
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

CONFIG = "dsv32-ep16"
GAPS = GapPlan(launch_ns=300_000, sync_ns=200_000, host_idle_ns=100_000, dependency_ns=150_000)


def budgets() -> dict[str, int]:
    return class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())


def write(spec, tmp_path: Path, fmt: str) -> Path:
    path = tmp_path / ("capture.sqlite" if fmt == "nsys" else "capture.json.gz")
    (write_nsys if fmt == "nsys" else write_kineto)(spec, path)
    return path


def analyze_json(path: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def close(got: int, want: int) -> bool:
    return abs(got - want) <= 0.01 * want


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_planted_gaps_exposed_comm_and_slow_class_are_recovered(tmp_path: Path, fmt: str) -> None:
    spec, truth = decode_capture(budgets(), gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="attn_core")
    code, report = analyze_json(write(spec, tmp_path, fmt), "--config", CONFIG, "--gate")
    assert report["schema"] == REPORT_SCHEMA
    assert report["steps"]["count"] == truth.steps
    assert close(report["steps"]["step_ns_p50"], truth.step_ns)
    for cause, ns in truth.gaps_by_cause_ns.items():
        assert close(report["host_gaps"]["by_cause"][cause], ns), cause
    # The totals, exactly: every planted time is a whole number of nanoseconds in both formats.
    assert report["host_gaps"]["total_ns"] == truth.host_gap_ns
    ec = report["exposed_comm"]
    assert (ec["comm_ns"], ec["exposed_ns"]) == (truth.comm_ns, truth.exposed_ns)
    assert ec["overlap_fraction"] == pytest.approx(1 - truth.exposed_ns / truth.comm_ns)
    by_coll = ec["by_collective"]
    assert by_coll["a2a_dispatch"]["exposed_ns"] == truth.exposed_by_collective_ns["a2a_dispatch"]
    assert by_coll["a2a_combine"]["exposed_ns"] == 0
    # The rows add up: kernel time less the concurrent collectives is the union; the shares are the exposed.
    assert sum(v["comm_ns"] for v in by_coll.values()) - ec["concurrent_ns"] == ec["comm_ns"]
    assert sum(v["exposed_ns"] for v in by_coll.values()) == ec["exposed_ns"]
    flagged = [c["name"] for c in report["classes"] if c["over_budget"]]
    assert flagged == ["attn_core"]
    measured = {c["name"]: c["measured_ns"] for c in report["classes"]}
    for cls, ns in truth.class_ns.items():
        assert close(measured[cls], ns), cls
    assert report["verdict"] == "kernel" and code == 11
    target = report["ncu_targets"][0]
    assert target["class"] == "attn_core" and "--launch-skip" in target["command"]


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_every_step_nanosecond_is_owned_once(tmp_path: Path, fmt: str) -> None:
    spec, _ = decode_capture(budgets(), gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="gemm")
    _, report = analyze_json(write(spec, tmp_path, fmt), "--config", CONFIG)
    attributed = sum(c["attributed_ns"] for c in report["classes"])
    owned = report["host_gaps"]["total_ns"] + attributed
    # Per-step medians of parts need not add exactly to the median step; here every step is alike.
    assert abs(owned - report["steps"]["step_ns_p50"]) <= 0.001 * report["steps"]["step_ns_p50"]


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_capture_at_the_floor_is_near_floor(tmp_path: Path, fmt: str) -> None:
    spec, _ = decode_capture(budgets())
    code, report = analyze_json(write(spec, tmp_path, fmt), "--config", CONFIG, "--gate")
    assert report["verdict"] == "near-floor" and code == 0
    assert report["floor"]["residual_ratio"] < 1.3
    assert not [c for c in report["classes"] if c["over_budget"]]
    assert report["ncu_targets"] == []


def scaled_to(multiple: float) -> tuple[dict[str, int], int]:
    """Class durations scaled alike so that the planted step (no gaps) is `multiple` x the physical t_opt."""
    t_opt = floor.compute_floor(load_config(CONFIG)).t_opt_ns
    _, at_budget = decode_capture(budgets())
    f = multiple * t_opt / at_budget.step_ns
    return {c: round(ns * f) for c, ns in budgets().items()}, t_opt


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_step_at_1_2x_the_physical_floor_is_near_floor(tmp_path: Path, fmt: str) -> None:
    """Every kernel a little slower than its physical budget (HBM-bound classes at ~83 % of the spec bandwidth,
    a rate tuned decode kernels reach): the step is 1.2x t_opt, under the stop threshold."""
    scaled, t_opt = scaled_to(1.2)
    spec, truth = decode_capture(scaled)
    assert truth.step_ns == pytest.approx(1.2 * t_opt, rel=0.002)
    code, report = analyze_json(write(spec, tmp_path, fmt), "--config", CONFIG, "--gate")
    assert report["verdict"] == "near-floor" and code == 0, report["reasons"]
    assert report["floor"]["residual_ratio"] == pytest.approx(1.2, abs=0.01)
    assert report["floor"]["peak_kind"] == "physical"
    assert report["floor"]["expected_ns"] > report["floor"]["t_opt_ns"]


def test_step_at_1_6x_is_kernel_or_pipeline_by_its_gaps(tmp_path: Path) -> None:
    """1.6x t_opt from slow kernels alone: kernel (the classes over budget named); 1.6x from host gaps with
    kernels at their budgets: pipeline."""
    scaled, t_opt = scaled_to(1.6)
    spec, truth = decode_capture(scaled)
    assert truth.step_ns == pytest.approx(1.6 * t_opt, rel=0.002)
    code, report = analyze_json(write(spec, tmp_path, "nsys"), "--config", CONFIG, "--gate")
    assert report["verdict"] == "kernel" and code == 11
    assert {"gemm", "moe_experts", "attn_core"} <= {c["name"] for c in report["classes"] if c["over_budget"]}
    _, at_budget = decode_capture(budgets())
    missing = round(1.6 * t_opt) - at_budget.step_ns  # spread over the four gap causes
    gaps = GapPlan(launch_ns=missing // 4, sync_ns=missing // 4, host_idle_ns=missing // 4, dependency_ns=missing // 4)
    spec, truth = decode_capture(budgets(), gaps=gaps)
    assert truth.step_ns == pytest.approx(1.6 * t_opt, rel=0.01)
    (tmp_path / "gaps").mkdir()
    code, report = analyze_json(write(spec, tmp_path / "gaps", "nsys"), "--config", CONFIG, "--gate")
    assert report["verdict"] == "pipeline" and code == 10


def test_step_under_the_physical_floor_is_a_broken_config(tmp_path: Path) -> None:
    """Faster than t_opt (beyond the tolerance) is impossible: the config does not describe the capture."""
    scaled, _ = scaled_to(0.9)
    spec, _ = decode_capture(scaled)
    code, report = analyze_json(write(spec, tmp_path, "nsys"), "--config", CONFIG, "--gate")
    assert report["verdict"] == "inconclusive" and code == 12
    assert "faster than the physical lower bound" in report["reasons"][0]


def test_pipeline_verdict_when_gaps_dominate(tmp_path: Path) -> None:
    big = GapPlan(launch_ns=4_000_000, sync_ns=3_000_000, host_idle_ns=2_000_000, dependency_ns=1_000_000)
    spec, _ = decode_capture(budgets(), gaps=big)
    code, report = analyze_json(write(spec, tmp_path, "nsys"), "--config", CONFIG, "--gate")
    assert report["verdict"] == "pipeline" and code == 10


def test_without_config_questions_are_answered_and_verdict_says_why(tmp_path: Path) -> None:
    spec, truth = decode_capture(budgets(), gaps=GAPS, exposed_dispatch_ns=400_000)
    code, report = analyze_json(write(spec, tmp_path, "nsys"), "--gate")
    assert report["verdict"] == "inconclusive" and code == 12
    assert any("--config" in r for r in report["reasons"])
    assert report["host_gaps"]["total_ns"] == truth.host_gap_ns
    assert (report["exposed_comm"]["comm_ns"], report["exposed_comm"]["exposed_ns"]) == (truth.comm_ns,
                                                                                         truth.exposed_ns)
    assert report["floor"] is None and all(c["budget_ns"] is None for c in report["classes"])


def test_skip_steps_drops_warmup_and_too_many_is_a_usage_error(tmp_path: Path) -> None:
    spec, truth = decode_capture(budgets(), steps=4)
    path = write(spec, tmp_path, "nsys")
    _, report = analyze_json(path, "--config", CONFIG, "--skip-steps", "2")
    assert report["steps"]["count"] == 2
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--skip-steps", "9"])
    assert result.exit_code == 2 and "--skip-steps" in result.stderr


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_slowest_rank_is_named_across_files(tmp_path: Path, fmt: str) -> None:
    import dataclasses

    fast, _ = decode_capture(budgets())
    slow, slow_truth = decode_capture(budgets(), gaps=GAPS)
    (tmp_path / "r0").mkdir()
    (tmp_path / "r1").mkdir()
    write(fast, tmp_path / "r0", fmt)
    write(dataclasses.replace(slow, rank=1), tmp_path / "r1", fmt)
    suffix = "capture.sqlite" if fmt == "nsys" else "capture.json.gz"
    _, report = analyze_json(tmp_path / "r0" / suffix, str(tmp_path / "r1" / suffix), "--config", CONFIG)
    steps = report["steps"]
    assert steps["slowest_rank"] == 1 and steps["count"] == 2 * slow_truth.steps
    assert close(steps["per_rank_p50_ns"]["1"], slow_truth.step_ns)
    assert steps["straggler_ratio"] > 1.0


def test_capture_on_other_gpu_than_the_config_is_inconclusive(tmp_path: Path) -> None:
    spec, _ = decode_capture(budgets(), slow_class="attn_core")  # recorded on an "NVIDIA H20"
    path = write(spec, tmp_path, "nsys")
    code, report = analyze_json(path, "--config", CONFIG, "--set", "hardware=h200", "--gate")
    assert report["verdict"] == "inconclusive" and code == 12
    assert any("NVIDIA H20" in r and "h200" in r for r in report["reasons"])
    _, report = analyze_json(path, "--config", CONFIG)
    assert report["verdict"] == "kernel" and report["floor"]["hardware"] == "h20"


@pytest.mark.parametrize(("trigger", "late"), [("Immediate", False), ("CudaProfilerApi", True)])
def test_a_triggered_nsys_capture_says_launch_skips_start_at_the_capture(tmp_path: Path, trigger: str,
                                                                         late: bool) -> None:
    spec, _ = decode_capture(budgets(), slow_class="attn_core")
    _, report = analyze_json(write(replace(spec, start_trigger=trigger), tmp_path, "nsys"), "--config", CONFIG)
    assert report["ncu_targets"]
    assert any("starts at a CudaProfilerApi start" in c for c in report["caveats"]) is late
