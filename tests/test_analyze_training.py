"""Planted training-step captures in both formats: the analysis recovers the exposed gradient all-reduce and
flags exactly the slow class against budgets from the training floor (within 1 %)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from fixtures.scenarios_training import training_capture
from fixtures.synth import write_kineto, write_nsys
from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

CONFIG = "gpt2-small-dp8-a100"
EXPOSED_NS = 1_500_000


def budgets() -> dict[str, int]:
    return class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())


def attainable_budgets() -> dict[str, int]:
    """Each class at the attainable ceilings (the best measured rates): what tuned kernels reach."""
    parts = floor.compute_floor(load_config(CONFIG)).parts
    return class_budgets([SimpleNamespace(name=p.name, floor_ns=p.attainable_ns) for p in parts], load_rules())


def analyze_json(spec, tmp_path: Path, fmt: str) -> dict:
    path = tmp_path / ("capture.sqlite" if fmt == "nsys" else "capture.json.gz")
    (write_nsys if fmt == "nsys" else write_kineto)(spec, path)
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json", "--config", CONFIG])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


def close(got: int, want: int) -> bool:
    return abs(got - want) <= 0.01 * want


def test_training_budgets_cover_the_step_classes():
    b = budgets()
    assert {"gemm", "attn_core", "norm_elementwise", "optimizer", "allreduce"} <= set(b)


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_planted_training_step_is_recovered(tmp_path: Path, fmt: str) -> None:
    """Kernels at their attainable budgets, attention 5x slower: the step is ~1.5x the attainable floor (the
    stop rule's), so the verdict is kernel, and attention the one class over its budget. (At 2x, attention
    adds ~7 % to the step and the step stays within 1.3x of the attainable floor: near-floor.)"""
    spec, truth = training_capture(attainable_budgets(), exposed_allreduce_ns=EXPOSED_NS, slow_class="attn_core",
                                   slow_factor=5.0)
    report = analyze_json(spec, tmp_path, fmt)
    assert report["steps"]["count"] == truth.steps
    assert close(report["steps"]["step_ns_p50"], truth.step_ns)
    ar = report["exposed_comm"]["by_collective"]["allreduce"]
    assert close(ar["exposed_ns"], truth.exposed_allreduce_ns)
    flagged = [c["name"] for c in report["classes"] if c["over_budget"]]
    assert flagged == ["attn_core"]
    measured = {c["name"]: c["measured_ns"] for c in report["classes"]}
    for cls, ns in truth.class_ns.items():
        assert close(measured[cls], ns), cls
    assert report["verdict"] == "kernel"


def test_training_capture_at_budget_flags_nothing(tmp_path: Path) -> None:
    spec, _ = training_capture(budgets(), exposed_allreduce_ns=0)
    report = analyze_json(spec, tmp_path, "nsys")
    assert not [c for c in report["classes"] if c["over_budget"]]
    assert report["exposed_comm"]["by_collective"]["allreduce"]["exposed_ns"] == 0


def test_a_gemm_over_its_physical_budget_but_within_its_attainable_one_is_not_over(tmp_path: Path) -> None:
    """GEMMs at 1.4x their physical budget are 1.22x the A100's best measured matmul (271.2 of 312 TFLOP/s):
    cuBLAS at its limit, so the class is not over budget and no ncu target names it."""
    spec, _ = training_capture(budgets(), exposed_allreduce_ns=0, slow_class="gemm", slow_factor=1.4)
    report = analyze_json(spec, tmp_path, "nsys")
    gemm = next(c for c in report["classes"] if c["name"] == "gemm")
    assert gemm["ratio"] > 1.3 and gemm["attainable_ratio"] < 1.3 and not gemm["over_budget"]
    assert gemm["attainable_budget_ns"] > gemm["budget_ns"]
    assert not [t for t in report["ncu_targets"] if t["class"] == "gemm"]
