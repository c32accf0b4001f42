"""Bounded-memory analysis: reading a device a few steps at a time gives the very report of one read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures.scenarios import GapPlan, decode_capture
from fixtures.synth import write_kineto, write_nsys
from tests.test_analyze_planted import CONFIG, budgets
from tracekit.analysis import device
from tracekit.analysis.analyze import run_analysis
from tracekit.analysis.options import AnalyzeOptions
from tracekit.store.ingest import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GAPS = GapPlan(launch_ns=300_000, sync_ns=200_000, host_idle_ns=100_000, dependency_ns=150_000)
SMALL = 50  # operations per batch: a few steps of the planted capture
TINY = 1  # every step a batch of its own


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    spec, _ = decode_capture(budgets(), steps=12, gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="attn_core")
    out = tmp_path_factory.mktemp("planted")
    paths = {"nsys": out / "capture.sqlite", "kineto": out / "capture.json.gz"}
    write_nsys(spec, paths["nsys"])
    write_kineto(spec, paths["kineto"])
    return paths


def analyse(paths: list[Path], opts: AnalyzeOptions, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, list[int]]:
    """The report, and the number of operations of every batch read (not of the re-reads of single gaps
    and steps)."""
    loaded: list[int] = []
    read = device.load_ops

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a spy with load_ops's signature
        ops = read(*args, **kwargs)
        if sys._getframe(1).f_code.co_name == "_analyze_batch":
            loaded.append(len(ops))
        return ops

    monkeypatch.setattr(device, "load_ops", counting)
    with open_store(paths, use_cache=False) as store:
        report = json.loads(json.dumps(run_analysis(store, opts).report))
    monkeypatch.undo()
    return report, loaded


def assert_same_when_batched(paths: list[Path], monkeypatch: pytest.MonkeyPatch, batch_rows: int,
                             **options: object) -> dict:
    whole, whole_loads = analyse(paths, AnalyzeOptions(**options), monkeypatch)
    batched, batch_loads = analyse(paths, AnalyzeOptions(**options, batch_rows=batch_rows), monkeypatch)
    assert batched == whole
    n_devices = len(whole_loads)  # one batch per device when nothing limits it
    assert len(batch_loads) >= 3 * n_devices, "the small budget did not split the devices into batches"
    assert max(batch_loads) < max(whole_loads) / 2
    return whole


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_planted_capture_same_report_in_small_batches(planted: dict[str, Path], fmt: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    report = assert_same_when_batched([planted[fmt]], monkeypatch, SMALL, config=CONFIG)
    assert report["verdict"] == "kernel" and report["ncu_targets"]  # launch skips, top gaps: all compared
    assert report["steps"]["count"] == 12 and report["host_gaps"]["top"]


def test_skipped_steps_and_step_regex_same_report_in_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    report = assert_same_when_batched([FIXTURES / "dsv32_ep16_decode.sqlite"], monkeypatch, TINY, config=CONFIG,
                                      step_regex=r"^ProfilerStep#\d+$", skip_steps=1)
    assert report["steps"]["count"] > 1


def test_multi_rank_real_set_same_report_in_small_batches(monkeypatch: pytest.MonkeyPatch,
                                                          shared_traces: Path) -> None:
    ranks = sorted((shared_traces / "torch" / "dlrm8_v100").glob("*.json*"))
    assert len(ranks) == 8
    # One ProfilerStep per rank: nested annotations as steps give each rank many steps to batch.
    report = assert_same_when_batched(ranks, monkeypatch, SMALL, step_regex=r"^(## |nccl:|DistributedDataParallel)")
    assert len(report["inputs"]) == 8 and report["steps"]["count"] >= 8 * 10


def test_step_detail_matches_the_step_summary(planted: dict[str, Path]) -> None:
    """A step's operations re-read from the store account to exactly the summary kept for it."""
    with open_store([planted["nsys"]], use_cache=False) as store:
        analysis = run_analysis(store, AnalyzeOptions(config=CONFIG, batch_rows=SMALL))
        dev = analysis.devices[0]
        for acc in dev.accounts:
            assert acc.gaps is None and acc.ops_in_window is None  # summaries only
            detail, full = analysis.step_detail(dev, acc)
            assert full.summary() == acc
            assert len(full.ops_in_window) and np.all(detail.ops.start_ns[full.ops_in_window] < acc.window.end_ns)
