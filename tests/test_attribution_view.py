"""``kernel_ops`` of a capture with no cpu op and no module (an Nsight Systems export without PyTorch's ranges) is a
view over ``gpu_ops`` (``tracekit.analysis.unattributed``): the same rows, the launching NVTX range included, and
the same reports as the per-kernel table built for every capture before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from tracekit.analysis import attribution
from tracekit.analysis.nesting import nest
from tracekit.analysis.unattributed import timeline
from tracekit.budgets.classify import load_rules
from tracekit.cli import main
from tracekit.store.ingest import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: NVTX ranges and no cpu op (the ranges launch kernels); no host range at all; a Kineto trace without cpu ops
WITHOUT_OPS = ("sample_decode.sqlite", "dsv32_ep16_decode.sqlite", "sample_decode_rank0.json.gz")
COLUMNS = ("rank, device_id, stream_id, start_ns, end_ns, dur_ns, name::VARCHAR AS name, is_memop, tid, launch_ns, "
           "pid, node, unit, module, attention, class::VARCHAR AS class")


def _kernel_ops(trace: Path) -> tuple[pl.DataFrame, bool]:
    """``kernel_ops`` of ``trace`` in a total order, and whether it is a view."""
    with open_store([trace], use_cache=False) as store:
        attribution.register_attribution(store.con, load_rules())
        is_view = store.con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'kernel_ops'"
                                    ).fetchall()[0][0] == 1
        frame = store.con.sql(f"SELECT {COLUMNS} FROM kernel_ops").pl()
    return frame.sort(frame.columns, nulls_last=True), is_view


def _analyze(trace: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["analyze", str(trace), "--no-cache", "-q", "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("name", WITHOUT_OPS)
def test_the_view_holds_the_rows_of_the_per_kernel_table(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    view, is_view = _kernel_ops(FIXTURES / name)
    assert is_view and len(view) > 0
    monkeypatch.setattr(attribution, "unattributable", lambda nodes: False)
    table, was_view = _kernel_ops(FIXTURES / name)
    assert not was_view
    assert view.equals(table)
    if name == "sample_decode.sqlite":  # its kernels are launched inside NVTX ranges: the view finds them
        assert (view["node"] >= 0).all()


def test_a_capture_with_cpu_ops_keeps_the_per_kernel_table() -> None:
    frame, is_view = _kernel_ops(FIXTURES / "h200")
    assert not is_view and (frame["unit"] >= 0).any()


@pytest.mark.parametrize("name", ["sample_decode.sqlite", "dsv32_ep16_decode.sqlite"])
def test_reports_are_those_of_the_per_kernel_table(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = ("--config", "dsv32-ep16") if name == "dsv32_ep16_decode.sqlite" else ()
    with_view = _analyze(FIXTURES / name, *extra)
    monkeypatch.setattr(attribution, "unattributable", lambda nodes: False)
    assert with_view == _analyze(FIXTURES / name, *extra)


def test_the_timeline_gives_the_innermost_open_range_at_any_time() -> None:
    """At every instant, the timeline's last row at or before it names the node ``nest`` finds there: for nested,
    overlapping (not nesting) and equal-start ranges on two threads, at and between every boundary."""
    rng = np.random.default_rng(26)
    start = rng.integers(0, 200, 60).astype(np.int64)
    end = start + rng.integers(1, 80, 60).astype(np.int64)
    thread = rng.integers(0, 2, 60).astype(np.int64)
    order = np.lexsort((-end, start, thread))  # op_nodes' order: (thread, start, longest first)
    start, end, thread = start[order], end[order], thread[order]
    nodes = pl.DataFrame({"node": np.arange(60), "rank": 0, "pid": 7, "tid": thread + 100, "thread": thread,
                          "start_ns": start, "end_ns": end})
    steps = timeline(nodes)
    at = np.arange(-5, 300, dtype=np.int64)
    for th in (0, 1):
        _, inner = nest(thread, start, end, np.full(at.size, th), at)
        mine = steps.filter(pl.col("tid") == th + 100)
        k = np.searchsorted(mine["at_ns"].to_numpy(), at, side="right") - 1
        found = np.where(k >= 0, mine["node"].to_numpy()[np.maximum(k, 0)], -1)
        assert found.tolist() == inner.tolist()
