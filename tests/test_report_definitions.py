"""The report's definitions, each on a planted capture whose answer is known by construction: memory copies do
not hide communication, per-collective rows add up to the union, step percentiles leave the incomplete last
step out, and a capture without communication says so."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios import NAMES, decode_capture
from fixtures.synth import Kernel, MemOp, write_nsys
from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

CONFIG = "dsv32-ep16"
EXPOSED_NS = 400_000
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def budgets() -> dict[str, int]:
    return class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())


def analyze(spec, tmp_path: Path, *args: str) -> dict:
    path = tmp_path / "capture.sqlite"
    write_nsys(spec, path)
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def kernels_named(spec, cls: str) -> list[Kernel]:
    return sorted((k for k in spec.kernels if k.name == NAMES[cls]), key=lambda k: k.start_ns)


def test_memory_copies_do_not_hide_communication(tmp_path: Path) -> None:
    """A copy on its own stream under the exposed part of each dispatch: still exposed (HTA counts compute
    kernels only), and reported apart as exposed under memory operations."""
    spec, truth = decode_capture(budgets(), exposed_dispatch_ns=EXPOSED_NS)
    copies = [MemOp("memcpy", "DtoD", 1 << 20, 0, 9, d.start_ns + d.dur_ns - 300_000, 200_000, 4242, 4242,
                    d.start_ns - 100_000, 1_000) for d in kernels_named(spec, "a2a_dispatch")]
    report = analyze(dataclasses.replace(spec, memops=copies), tmp_path)
    ec = report["exposed_comm"]
    assert (ec["comm_ns"], ec["exposed_ns"]) == (truth.comm_ns, truth.exposed_ns)
    assert ec["exposed_under_memops_ns"] == 200_000
    assert ec["overlap_fraction"] == pytest.approx(1 - EXPOSED_NS / truth.comm_ns)
    assert ec["overlap_fraction_incl_memops"] == pytest.approx(1 - (EXPOSED_NS - 200_000) / truth.comm_ns)
    # Every nanosecond still owned once: the copy owns none of the exposed time it ran under.
    memcpy = next(c for c in report["classes"] if c["name"] == "memcpy")
    assert memcpy["measured_ns"] == 200_000 and memcpy["attributed_ns"] == 0


def test_collective_rows_add_up_to_the_union(tmp_path: Path) -> None:
    """An all-reduce overlapping each combine by 50 us: the rows (kernel time per collective) less the
    concurrent-collectives row give the union; the table shows that row."""
    spec, truth = decode_capture(budgets(), exposed_dispatch_ns=EXPOSED_NS)
    extra = [Kernel(ALLREDUCE, 0, 10, c.start_ns - 50_000, 100_000, 4242, 4242, c.start_ns - 200_000, 1_000)
             for c in kernels_named(spec, "a2a_combine")]
    report = analyze(dataclasses.replace(spec, kernels=spec.kernels + extra), tmp_path)
    ec = report["exposed_comm"]
    assert ec["exposed_ns"] == truth.exposed_ns  # the all-reduce runs under compute kernels
    assert ec["concurrent_ns"] == 50_000
    assert ec["comm_ns"] == truth.comm_ns + 100_000 - 50_000
    rows = ec["by_collective"]
    assert rows["allreduce"]["comm_ns"] == 100_000
    assert sum(v["comm_ns"] for v in rows.values()) - ec["concurrent_ns"] == ec["comm_ns"]
    markdown = CliRunner().invoke(main, ["analyze", str(tmp_path / "capture.sqlite"), "--no-cache",
                                         "--format", "markdown"]).stdout
    assert "| concurrent collectives (counted once) | -0.050 |" in markdown
    assert f"| total | {truth.comm_ns / 1e6 + 0.05:.3f} | {EXPOSED_NS / 1e6:.3f} |" in markdown


def test_the_incomplete_last_step_is_left_out_of_step_percentiles(tmp_path: Path) -> None:
    """The last ProfilerStep launches one more kernel 30 ms after its others: its window, which ends at its own
    last operation, runs long. p50 and p99 are those of the other steps, and the report says one was left out."""
    spec, truth = decode_capture(budgets(), steps=6)
    last = max(spec.kernels, key=lambda k: k.start_ns + k.dur_ns)
    late = Kernel(NAMES["sampling"], 0, 7, last.start_ns + last.dur_ns + 30_000_000, 10_000, 4242, 4242,
                  last.launch_start_ns + 1_000, 1_000)
    report = analyze(dataclasses.replace(spec, kernels=[*spec.kernels, late]), tmp_path, "--config", CONFIG)
    steps = report["steps"]
    assert (steps["count"], steps["incomplete"]) == (6, 1)
    assert steps["step_ns_p50"] == truth.step_ns
    # the first step also holds its host time before its first kernel: its ProfilerStep opens 54 us before it
    assert truth.step_ns < steps["step_ns_p99"] <= truth.step_ns + 54_000
    assert steps["per_rank_p50_ns"] == {"0": truth.step_ns}
    markdown = CliRunner().invoke(main, ["analyze", str(tmp_path / "capture.sqlite"), "--no-cache",
                                         "--format", "markdown"]).stdout
    assert "over 5 complete steps" in markdown


def test_a_capture_without_communication_says_so(tmp_path: Path) -> None:
    spec, _ = decode_capture(budgets())
    kernels = [k for k in spec.kernels if k.name not in (NAMES["a2a_dispatch"], NAMES["a2a_combine"])]
    report = analyze(dataclasses.replace(spec, kernels=kernels), tmp_path)
    assert report["exposed_comm"]["comm_ns"] == 0 and report["exposed_comm"]["overlap_fraction"] is None
    for fmt in ("table", "markdown"):
        out = CliRunner().invoke(main, ["analyze", str(tmp_path / "capture.sqlite"), "--no-cache",
                                        "--format", fmt]).stdout
        assert "no communication" in out and "None" not in out
    html = tmp_path / "report.html"
    CliRunner().invoke(main, ["analyze", str(tmp_path / "capture.sqlite"), "--no-cache", "--format", "html",
                              "--out", str(html)])
    assert "no communication" in html.read_text() and "None%" not in html.read_text()
