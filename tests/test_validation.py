"""Every tested row of docs/validation.md (bench/validation.py): measured training throughput at each run's
published layout, FlashAttention figures and measured NCCL busbw. A row inside its tolerance passes; a row with a
stated gap is a strict xfail, so a gap that closes fails here until GAPS and the doc are updated."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bench.validation import GAPS, RUNS, TRAIN_TOLERANCE, Row, render, rows, train_tolerance
from tracekit.budgets.configs import load_config
from tracekit.cli import main
from tracekit.floor.training import predict_training

ROWS = rows()


def _param(r: Row):
    marks = [pytest.mark.xfail(strict=True, reason=r.gap)] if r.gap else []
    return pytest.param(r, id=r.config or r.figure, marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in ROWS if r.tolerance is not None])
def test_row_within_its_tolerance(row: Row) -> None:
    assert abs(row.error) <= row.tolerance, f"{row.figure}: {row.error:+.1%} (tolerance {row.tolerance:.0%})"


def test_every_measured_training_run_is_a_row_with_the_issue_tolerance() -> None:
    train = {r.config: r for r in ROWS if r.section == "training"}
    assert set(train) == {run.config for run in RUNS}
    assert all(r.tolerance == train_tolerance(c) and r.kind == "measured" for c, r in train.items())
    # issue 25: Megatron and Llama 3 8K within 10 %, 128K (and DeepSeek, issue 19) within 15 %
    assert {train_tolerance(c) for c in train if c.startswith(("megatron-gpt-", "llama3-405b-8k-"))} == {0.10}
    assert train_tolerance("llama3-405b-128k-h100") == TRAIN_TOLERANCE == 0.15
    assert set(GAPS) <= set(train) | {r.figure for r in ROWS}  # every stated gap belongs to a row


def test_gpt3_row_is_derived_and_untested() -> None:
    [gpt3] = [r for r in ROWS if r.config == "gpt3-175b-megatron-a100"]
    assert gpt3.kind == "derived, not a measurement" and gpt3.tolerance is None


#: a run that trained but the memory model does not fit (docs/validation.md, "Memory of the Nemotron-4 340B runs")
MEMORY_GAP = {"nemotron4-340b-128gpu-h100": "fits only with BF16 gradient buffers, which the recipe does not state"}


@pytest.mark.parametrize("name", [pytest.param(run.config, marks=[pytest.mark.xfail(strict=True, reason=MEMORY_GAP[
    run.config])] if run.config in MEMORY_GAP else []) for run in RUNS])
def test_published_layouts_fit_in_memory(name: str) -> None:
    mem = predict_training(load_config(name)).memory
    assert mem.feasible, mem.verdict()


def test_configs_lists_every_measured_run() -> None:
    out = CliRunner().invoke(main, ["configs", "--format", "csv"])
    assert out.exit_code == 0
    assert all(run.config in out.stdout for run in RUNS)


def test_doc_is_current() -> None:
    """docs/validation.md is what bench/validation.py writes today (regenerate it after a model change)."""
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "validation.md"
    assert doc.read_text(encoding="utf-8") == render()


def test_the_nemotron_recipe_fits_with_bf16_gradient_buffers() -> None:
    mem = predict_training(load_config("nemotron4-340b-128gpu-h100", {"grad_dtype": "bf16"})).memory
    assert mem.feasible and mem.total > 0.99 * mem.capacity  # 85.3 of 85.5 GB: it barely fits
