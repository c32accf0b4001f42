"""Bounded memory whatever the step source: a whole capture (or any long step) is accounted in time pieces of
about ``batch_rows`` operations and the pieces are merged exactly, so the report equals one read's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.scenarios import GapPlan, decode_capture
from fixtures.synth import write_nsys
from tests.test_analyze_planted import CONFIG, budgets
from tests.test_fuzz import COMM, device_ops
from tracekit import intervals as iv
from tracekit.analysis import device, steps
from tracekit.analysis.accounting import account_piece, account_step, merge
from tracekit.analysis.analyze import run_analysis
from tracekit.analysis.ops import DeviceOps
from tracekit.analysis.options import AnalyzeOptions
from tracekit.analysis.steps import StepWindow
from tracekit.store.ingest import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GAPS = GapPlan(launch_ns=300_000, sync_ns=200_000, host_idle_ns=100_000, dependency_ns=150_000)
TINY = 7  # operations per piece: a planted step of ~20 ops is cut in three or more


@pytest.fixture(scope="module")
def whole_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted decode capture (gaps of every cause, exposed dispatch) without its ProfilerStep ranges:
    no step markers, so the whole capture is one step."""
    spec, _ = decode_capture(budgets(), steps=6, gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="attn_core")
    spec = dataclasses.replace(spec, ranges=[r for r in spec.ranges if not r.name.startswith("ProfilerStep#")])
    path = tmp_path_factory.mktemp("whole") / "capture.sqlite"
    write_nsys(spec, path)
    return path


def analyse(paths: list[Path], opts: AnalyzeOptions, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, list]:
    """The report, and the batches read (each with its edges)."""
    plans: list = []
    plan = steps.batches

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - batches' signature
        out = plan(*args, **kwargs)
        plans.extend(out)
        return out

    monkeypatch.setattr(device, "batches", spy)
    with open_store(paths, use_cache=False) as store:
        analysis = run_analysis(store, opts)
        report = json.loads(json.dumps(analysis.report))
        exposed = [iv.Intervals(d.collectives.exposed_start_ns, d.collectives.exposed_end_ns) for d in analysis.devices]
        # ncu's launch skips and graph flags of the median step's kernels (the report shows those of targets)
        report["median_launches"] = [sorted(map(list, d.median_launches.items())) for d in analysis.devices]
        report["collectives"] = [[d.collectives.window_start_ns.tolist(), d.collectives.window_gap_ns.tolist(),
                                  {c: v.tolist() for c, v in d.collectives.window_class_ns.items()},
                                  d.collectives.step_tail_gap_ns.tolist(), d.collectives.name,
                                  d.collectives.start_ns.tolist(), d.collectives.end_ns.tolist()]
                                 for d in analysis.devices]
    monkeypatch.undo()
    return report, plans, exposed


def test_whole_capture_in_tiny_pieces_gives_the_report_of_one_read(whole_capture: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    whole, plans, exposed = analyse([whole_capture], AnalyzeOptions(config=CONFIG), monkeypatch)
    assert whole["steps"]["source"] == ["whole_capture"] and whole["steps"]["count"] == 1
    assert [p.edges for p in plans] == [()]
    cut, cut_plans, cut_exposed = analyse([whole_capture], AnalyzeOptions(config=CONFIG, batch_rows=TINY), monkeypatch)
    assert cut == whole  # to the nanosecond: gaps by cause, exposed communication, classes, ncu skips, top gaps
    assert whole["host_gaps"]["top"] and whole["exposed_comm"]["by_collective"] and all(whole["median_launches"])
    assert len(whole["collectives"][0][0]) > 0
    edges = np.array(cut_plans[0].edges)
    assert edges.size >= 10, "the tiny budget did not cut the capture into pieces"
    log = whole["collectives"][0]
    starts, ends, windows = (np.array(x) for x in (log[5], log[6], log[0]))
    # Edges fall inside collectives (their communication time is split there and added up again) ...
    assert ((edges[:, None] > starts) & (edges[:, None] < ends)).any()
    # ... and between a collective's start and the start of its window (carried across pieces) ...
    assert ((edges[:, None] > windows) & (edges[:, None] < starts)).any()
    assert np.array_equal(cut_exposed[0].starts, exposed[0].starts)
    # ... but never inside a gap: an edge is the start of an op of positive length.
    assert whole["host_gaps"]["total_ns"] > 0


def test_fixture_whole_capture_and_long_steps_in_tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two devices of a whole capture (sample_decode), and the planted fixture's ProfilerSteps each cut."""
    for path, batch_rows, options in ((FIXTURES / "sample_decode.sqlite", 15, {}),
                                      (FIXTURES / "dsv32_ep16_decode.sqlite", 5, {"config": CONFIG, "skip_steps": 1})):
        whole, _, _ = analyse([path], AnalyzeOptions(**options), monkeypatch)
        cut, plans, _ = analyse([path], AnalyzeOptions(**options, batch_rows=batch_rows), monkeypatch)
        assert cut == whole
        assert sum(len(p.edges) for p in plans) >= 8, path.name


def _draw_pieces(data: st.DataObject, lo: int, hi: int) -> list[int]:
    edges = sorted(set(data.draw(st.lists(st.integers(lo + 1, max(lo + 1, hi - 1)), max_size=6))))
    return [lo, *[e for e in edges if lo < e < hi], hi]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(device_ops(), st.integers(-100, 1_200), st.integers(1, 1_400), st.data())
def test_pieces_merge_to_the_account_of_one_read(ops: DeviceOps, lo: int, length: int, data: st.DataObject) -> None:
    """Any cut of a step (edges anywhere, inside gaps and communication too) merges to the one-piece account:
    lengths add, intervals touching at an edge join, class shares add as exact rationals."""
    window = StepWindow(0, "step", lo, lo + length)
    whole = account_step(ops, window, COMM)
    cuts = _draw_pieces(data, lo, lo + length)
    pieces = [account_piece(ops, window, COMM, a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    merged = merge(ops, window, pieces, COMM)
    assert merged.summary() == whole.summary()
    assert np.array_equal(merged.gaps.starts, whole.gaps.starts) and np.array_equal(merged.gaps.ends, whole.gaps.ends)
    assert np.array_equal(merged.exposed.starts, whole.exposed.starts)
    slim = merge(ops, window, [p.slim() for p in pieces], COMM, detail=False)
    assert slim == whole.summary()
    owned = np.concatenate([p.owned for p in pieces])
    assert owned.tolist() == whole.ops_in_window.tolist()  # each op of the step counted once, in order
