"""`tracekit diff`: planted captures before/after a kernel fix (attention 5x its budget vs at budget):
the change that explains the step difference comes first, and the gating exit statuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fixtures.scenarios import decode_capture
from fixtures.synth import write_nsys
from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

CONFIG = "dsv32-ep16"
SLOW = 5.0  # attention's share of the step at its physical budget is ~6 % (FP8 attention FLOPs): 5x takes it past 1.3x


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """slow: attn_core at 5x its budget; fixed: every class at its budget (no gaps, no exposed comm)."""
    budgets = class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())
    root = tmp_path_factory.mktemp("diff")
    out: dict[str, Any] = {"budget_attn_ns": budgets["attn_core"]}
    for name, slow in (("slow", "attn_core"), ("fixed", None)):
        spec, _ = decode_capture(budgets, slow_class=slow, slow_factor=SLOW)
        write_nsys(spec, root / f"{name}.sqlite")
        out[name] = root / f"{name}.sqlite"
        result = CliRunner().invoke(main, ["analyze", str(out[name]), "--config", CONFIG, "--no-cache",
                                           "--format", "json", "--out", str(root / f"{name}.json")])
        assert result.exit_code == 0, result.output
        out[f"{name}_report"] = root / f"{name}.json"
    return out


def diff(*args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(main, ["diff", *args, "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    body = json.loads(result.stdout) if result.stdout.startswith("{") else {}
    return result.exit_code, body, result.stderr


def test_fix_explained_by_its_class_first(captures: dict[str, Any]) -> None:
    code, doc, _ = diff(str(captures["slow"]), str(captures["fixed"]), "--config", CONFIG, "--no-cache")
    assert code == 0 and doc["schema"] == "tracekit.diff/v1"
    budget = (SLOW - 1) * captures["budget_attn_ns"]  # what the fix saves
    step = doc["step"]["p50_ns"]
    assert step["delta"] == pytest.approx(-budget, rel=0.01)
    top = doc["changes"][0]
    assert (top["kind"], top["name"]) == ("class", "attn_core")
    assert top["delta_ns"] == pytest.approx(-budget, rel=0.01) and top["share_of_step_delta"] == pytest.approx(1, 0.01)
    assert all(abs(c["delta_ns"]) <= 0.01 * budget for c in doc["changes"][1:])
    attn = next(c for c in doc["classes"] if c["name"] == "attn_core")
    assert attn["measured_ns"]["delta_fraction"] == pytest.approx(1 / SLOW - 1, abs=0.01)
    assert doc["verdict"] == {"before": "kernel", "after": "near-floor"}
    assert doc["floor"]["residual_ratio"]["delta"] < 0


def test_reports_give_the_same_diff_as_traces(captures: dict[str, Any]) -> None:
    _, from_traces, _ = diff(str(captures["slow"]), str(captures["fixed"]), "--config", CONFIG, "--no-cache")
    code, from_reports, _ = diff(str(captures["slow_report"]), str(captures["fixed_report"]))
    assert code == 0 and (from_reports["before"]["kind"], from_reports["after"]["kind"]) == ("report", "report")
    for key in ("step", "changes", "classes", "host_gaps", "exposed_comm", "verdict"):
        assert from_reports[key] == from_traces[key], key
    _, with_opts, _ = diff(str(captures["slow_report"]), str(captures["fixed_report"]), "--config", CONFIG)
    assert any("traces only" in c for c in with_opts["caveats"])


def test_gate_uses_the_after_verdict(captures: dict[str, Any]) -> None:
    fixed, slow = str(captures["fixed_report"]), str(captures["slow_report"])
    assert diff(slow, fixed, "--gate")[0] == 0  # AFTER near-floor
    code, doc, _ = diff(fixed, slow, "--gate")
    assert code == 11 and doc["gate"]["exit_status"] == 11  # AFTER kernel


def test_fail_if_slower(captures: dict[str, Any]) -> None:
    fixed, slow = str(captures["fixed_report"]), str(captures["slow_report"])
    code, doc, _ = diff(fixed, slow, "--fail-if-slower", "5%", "--gate")
    assert code == 13 and "beyond the allowed +5.0%" in doc["gate"]["reasons"][0]
    assert diff(fixed, slow, "--fail-if-slower", "30%")[0] == 0  # +22.7% is within 30%
    assert diff(slow, fixed, "--fail-if-slower", "0%")[0] == 0


def test_expect_faster(captures: dict[str, Any]) -> None:
    fixed, slow = str(captures["fixed_report"]), str(captures["slow_report"])
    assert diff(slow, fixed, "--expect-faster", "attn_core")[0] == 0
    assert diff(slow, fixed, "--expect-faster", "moe_experts")[0] == 14  # unchanged
    assert diff(fixed, slow, "--expect-faster", "attn_core")[0] == 14
    code, _, err = diff(slow, fixed, "--expect-faster", "no_such_class")
    assert code == 2 and "no_such_class" in err


@pytest.mark.parametrize("args", [["--fail-if-slower", "five"], ["--set", "batch=4"], ["--step", "("]])
def test_bad_options_are_usage_errors(captures: dict[str, Any], args: list[str]) -> None:
    code, _, err = diff(str(captures["slow_report"]), str(captures["fixed_report"]), *args)
    assert code == 2 and "Traceback" not in err


def test_other_json_documents_are_refused(tmp_path: Path, captures: dict[str, Any]) -> None:
    other = tmp_path / "reconcile.json"
    other.write_text(json.dumps({"schema": "tracekit.reconcile/v1", "results": []}))
    code, _, err = diff(str(other), str(captures["fixed_report"]))
    assert code == 2 and "tracekit.reconcile/v1" in err


def test_human_formats_render(captures: dict[str, Any]) -> None:
    for fmt in ("table", "markdown", "csv"):
        result = CliRunner().invoke(main, ["diff", str(captures["slow_report"]), str(captures["fixed_report"]),
                                           "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "attn_core" in result.stdout.replace("\\_", "_")  # markdown escapes the underscore


def edited(report: Path, tmp_path: Path, name: str, change) -> Path:
    """A copy of a v1 report with ``change`` applied to its dict."""
    doc = json.loads(report.read_text())
    change(doc)
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps(doc))
    return out


def test_a_step_change_within_noise_gets_absolute_deltas_and_no_shares(captures: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    """5 us more host-code gap in a ~25 ms step: the largest change is named with its absolute delta, and no
    'share of the step change' (which can run to thousands of percent) is given."""
    def five_us(doc: dict) -> None:
        doc["steps"]["step_ns_p50"] += 5_000
        doc["host_gaps"]["by_cause"]["host_code"] += 5_000
        doc["host_gaps"]["total_ns"] += 5_000

    fixed = captures["fixed_report"]
    after = edited(fixed, tmp_path, "after", five_us)
    code, doc, _ = diff(str(fixed), str(after))
    assert code == 0 and doc["step"]["significant"] is False and doc["conclusive"] is True
    assert all(c["share_of_step_delta"] is None for c in doc["changes"])
    assert (doc["changes"][0]["name"], doc["changes"][0]["delta_ns"]) == ("host_code", 5_000)
    table = CliRunner().invoke(main, ["diff", str(fixed), str(after), "--format", "markdown"]).stdout
    assert "largest change: host gap: host\\_code +0.005 ms" in table and "% of the step change" not in table
    assert "within noise" in table
    # A significant change keeps its shares.
    _, doc, _ = diff(str(captures["slow_report"]), str(fixed))
    assert doc["step"]["significant"] is True and doc["changes"][0]["share_of_step_delta"] is not None


def test_both_sides_reasons_and_caveats_are_shown(captures: dict[str, Any], tmp_path: Path) -> None:
    after = edited(captures["fixed_report"], tmp_path, "after",
                   lambda d: d["caveats"].append("rank 0: a caveat of the AFTER capture"))
    for fmt in ("table", "markdown"):
        out = CliRunner().invoke(main, ["diff", str(captures["slow_report"]), str(after), "--format", fmt]).stdout
        out = out.replace("\\", "")  # markdown escapes
        assert "caveat: AFTER: rank 0: a caveat of the AFTER capture" in out
        assert "reason: BEFORE: step p50" in out and "reason: AFTER: step p50" in out


INCOMPARABLE = {
    "other GPUs": (lambda d: [i.update(gpus=["NVIDIA H100 80GB HBM3"]) for i in d["inputs"]], "different GPUs"),
    "other config hardware": (lambda d: d["floor"].update(hardware="h200"), "different hardware"),
    "other config": (lambda d: d["config"]["effective"].update(batch=1), "different configs"),
    "other step source": (lambda d: d["steps"].update(source=["graph_launch"]), "steps were found differently"),
    "whole capture": (lambda d: d["steps"].update(source=["whole_capture"]), "AFTER has no step markers"),
}


@pytest.mark.parametrize("case", sorted(INCOMPARABLE))
def test_sides_that_do_not_compare_are_inconclusive_and_never_pass_a_gate(captures: dict[str, Any],
                                                                          tmp_path: Path, case: str) -> None:
    change, why = INCOMPARABLE[case]
    slow = captures["slow_report"]
    after = edited(captures["fixed_report"], tmp_path, "after", change)  # faster: it would pass every gate
    code, doc, _ = diff(str(slow), str(after))
    assert code == 0 and doc["conclusive"] is False and any(why in r for r in doc["inconclusive"])
    for gate_args in (["--fail-if-slower", "50%"], ["--expect-faster", "attn_core"]):
        code, doc, _ = diff(str(slow), str(after), *gate_args)
        assert code == 12 and doc["gate"]["exit_status"] == 12
        assert doc["gate"]["reasons"][0].startswith("the diff is inconclusive: ")
    table = CliRunner().invoke(main, ["diff", str(slow), str(after), "--format", "table"]).stdout
    assert "inconclusive: " in table and why in " ".join(table.split())
