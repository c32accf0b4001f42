"""Named baselines and the noise-aware gate of `tracekit diff`: two halves of one real capture read within
noise and pass `--fail-if-slower 5%`; a planted 10 % slowdown of one class (captures with run-to-run jitter)
reads regression, names the class and fails; two whole captures are gated on the kernel figure."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from fixtures.scenarios import decode_capture
from fixtures.synth import write_nsys
from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main
from tracekit.compare.noise import compare

CONFIG = "dsv32-ep16"
MFU = "nsys/nsys-ai__mfu_2gpu_before.sqlite"  # 2 ranks, 64 windows between NCCL group ends
WHOLE = "nsys/nsys-ai__h100_2gpu_1s.sqlite"  # no step markers


def run(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(main, [*args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    out = result.stdout
    return result.exit_code, json.loads(out) if out.startswith("{") else {}, out + result.stderr


def analyze_json(path: Path, out: Path, *args: str) -> dict[str, Any]:
    code, _, text = run("analyze", str(path), "--no-cache", "--format", "json", "--out", str(out), *args)
    assert code == 0, text
    return json.loads(out.read_text())


def half(report: dict[str, Any], idx: list[int], out: Path) -> Path:
    """The report restricted to the complete steps ``idx`` of its samples (step median recomputed)."""
    r = copy.deepcopy(report)
    s, t = report["samples"], r["samples"]
    for k in ("step_ns", "host_gap_ns", "exposed_comm_ns"):
        t[k] = [s[k][i] for i in idx]
    t["class_ns"] = {c: [v[i] for i in idx] for c, v in s["class_ns"].items()}
    r["steps"]["step_ns_p50"] = int(np.median(t["step_ns"]))
    out.write_text(json.dumps(r))
    return out


@pytest.fixture(scope="module")
def jittered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three 13-step captures with 2 % per-class jitter: two runs of one build, and the second run with
    moe_experts 10 % slower (the planted slowdown)."""
    budgets = class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())
    root = tmp_path_factory.mktemp("noise")
    out = {}
    for name, seed, slow in (("run1", 1, None), ("run2", 2, None), ("slower", 2, "moe_experts")):
        spec, _ = decode_capture(budgets, steps=13, slow_class=slow, slow_factor=1.1, jitter=0.02, seed=seed)
        write_nsys(spec, root / f"{name}.sqlite")
        analyze_json(root / f"{name}.sqlite", root / f"{name}.json", "--config", CONFIG)
        out[name] = root / f"{name}.json"
    return out


def test_two_halves_of_one_real_capture_are_within_noise(shared_traces: Path, tmp_path: Path) -> None:
    report = analyze_json(shared_traces / MFU, tmp_path / "mfu.json", "--step", "^ncclGroupEnd$")
    n = len(report["samples"]["step_ns"])
    assert n == report["steps"]["count"] - report["steps"]["incomplete"] == 62
    even = half(report, list(range(0, n, 2)), tmp_path / "even.json")
    odd = half(report, list(range(1, n, 2)), tmp_path / "odd.json")
    code, doc, _ = run("diff", str(even), str(odd), "--fail-if-slower", "5%", "--format", "json")
    step = doc["noise"]["step"]
    assert code == 0 and step["verdict"] == "within noise" and step["samples"] == [31, 31]
    assert step["low_ns"] < 0 < step["high_ns"] and doc["noise"]["regressions"] == []
    assert "within noise" in doc["gate"]["reasons"][0]


def test_two_runs_of_one_build_are_within_noise(jittered: dict[str, Path]) -> None:
    code, doc, _ = run("diff", str(jittered["run1"]), str(jittered["run2"]), "--fail-if-slower", "5%",
                       "--format", "json")
    assert code == 0 and doc["noise"]["step"]["verdict"] == "within noise"
    assert doc["noise"]["regressions"] == [] and doc["comparability"]["fraction"] == 1.0


def test_planted_class_slowdown_is_a_regression_that_fails_the_gate(jittered: dict[str, Path]) -> None:
    code, doc, _ = run("diff", str(jittered["run1"]), str(jittered["slower"]), "--fail-if-slower", "2%",
                       "--format", "json")
    noise = doc["noise"]
    assert code == 13 and noise["step"]["verdict"] == "regression" and noise["step"]["low_ns"] > 0
    assert noise["regressions"] == ["moe_experts"]
    assert noise["classes"]["moe_experts"]["own_fraction"] == pytest.approx(0.1, abs=0.03)
    assert "moe_experts" in doc["gate"]["reasons"][0]
    code, _, text = run("diff", str(jittered["run1"]), str(jittered["slower"]), "--format", "markdown")
    assert code == 0 and "\\*\\*regression\\*\\*" in text and "regression: moe\\_experts" in text
    assert "-&gt;" not in text and "→" in text


def test_named_baseline_round_trip(jittered: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    code, _, text = run("baseline", "save", "main", str(jittered["run1"]), "--baselines", str(store))
    assert code == 0 and (store / "main.json").is_file(), text
    assert json.loads((store / "main.json").read_text()) == json.loads(jittered["run1"].read_text())
    code, doc, _ = run("baseline", "list", "--baselines", str(store), "--format", "json")
    assert [b["name"] for b in doc["baselines"]] == ["main"]
    code, doc, _ = run("diff", str(jittered["slower"]), "--against", "baseline:main", "--baselines", str(store),
                       "--fail-if-slower", "2%", "--format", "json")
    assert code == 13 and doc["before"]["baseline"] == "baseline:main"
    assert doc["noise"]["regressions"] == ["moe_experts"]
    code, _, err = run("diff", str(jittered["slower"]), "--against", "baseline:nope", "--baselines", str(store))
    assert code == 2 and "no baseline 'nope'" in err and "main" in err
    code, _, err = run("baseline", "save", "../x", str(jittered["run1"]), "--baselines", str(store))
    assert code == 2 and "baseline name" in err


def test_whole_captures_are_gated_on_the_kernel_figure(shared_traces: Path, tmp_path: Path) -> None:
    report = analyze_json(shared_traces / WHOLE, tmp_path / "whole.json")
    assert report["steps"]["source"] == ["whole_capture"]
    slower = copy.deepcopy(report)
    for k in slower["kernels"]:
        k["total_ns"] = int(k["total_ns"] * 1.1)
        k["mean_ns"] = int(k["mean_ns"] * 1.1)
        k["per_step_ns"] = int(k["per_step_ns"] * 1.1)
    (tmp_path / "slower.json").write_text(json.dumps(slower))
    code, doc, _ = run("diff", str(tmp_path / "whole.json"), str(tmp_path / "whole.json"),
                       "--fail-if-slower", "5%", "--format", "json")
    assert code == 0 and doc["gate_basis"] == "kernels" and doc["kernel_figure"]["delta_fraction"] == 0
    assert doc["conclusive"] is False  # the step (the capture's length) still does not compare
    code, doc, _ = run("diff", str(tmp_path / "whole.json"), str(tmp_path / "slower.json"),
                       "--fail-if-slower", "5%", "--format", "json")
    assert code == 13 and doc["kernel_figure"]["delta_fraction"] == pytest.approx(0.1, abs=0.001)
    assert doc["kernels"] and doc["kernels"][0]["per_step_ns"]["delta"] > 0


def test_bootstrap_interval_brackets_a_known_shift() -> None:
    rng = np.random.default_rng(7)
    before = (1e6 * (1 + 0.01 * rng.standard_normal(40))).astype(int).tolist()
    same = compare(before, [x + 0 for x in before[::-1]], 1_000_000)
    assert same.verdict == "within noise" and same.low_ns <= 0 <= same.high_ns
    shifted = compare(before, [x + 50_000 for x in before], 1_000_000)
    assert shifted.verdict == "regression" and shifted.low_ns < 50_000 < shifted.high_ns
    tiny = compare(before, [x + 5_000 for x in before], 1_000_000)  # 0.5 %: under the practical threshold
    assert tiny.verdict == "within noise"
    assert compare([1, 2], [3, 4], 10).verdict == "untested"
