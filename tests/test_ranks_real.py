"""The cross-rank analysis on real multi-rank captures, against figures computed from the raw files by
``tests/ranks_expected.py`` (standard library only, not tracekit): matched collectives, clock offsets and
residuals, wait and transfer per rank, and the rank the others waited for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.ranks_expected import expected, expected_nsys
from tracekit.cli import main

KINETO_SETS = ["dlrm8_v100", "sampled2_rank0_1"]
MFU = "nsys/nsys-ai__mfu_2gpu_before.sqlite"


def analyze(path: Path, tmp_path: Path) -> dict:
    result = CliRunner().invoke(main, ["analyze", str(path), "--cache-dir", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", KINETO_SETS)
def test_kineto_ranks_agree_with_the_raw_json(shared_traces: Path, tmp_path: Path, name: str) -> None:
    folder = shared_traces / "torch" / name
    want = expected(folder)
    ranks = analyze(folder, tmp_path)["ranks"]
    assert ranks["instances"]["matched"] == want["matched"]
    assert ranks["instances"]["inconsistent"] == want["inconsistent"]
    assert {c["rank"]: c["offset_ns"] for c in ranks["clocks"]} == want["offsets"]
    assert {c["rank"]: c["residual_ns"] for c in ranks["clocks"]} == want["residuals"]
    assert {r["rank"]: r["wait_ns"] for r in ranks["per_rank"]} == want["wait"]
    assert {r["rank"]: r["transfer_ns"] for r in ranks["per_rank"]} == want["transfer"]
    assert {r["rank"]: r["waited_for_ns"] for r in ranks["per_rank"] if r["waited_for_ns"]} == want["waited_for"]
    assert ranks["straggler"]["rank"] == max(want["waited_for"], key=want["waited_for"].get)


def test_dlrm8_straggler_is_rank_7_and_its_steps_start_late(shared_traces: Path, tmp_path: Path) -> None:
    report = analyze(shared_traces / "torch" / "dlrm8_v100", tmp_path)
    s = report["ranks"]["straggler"]
    assert (s["rank"], s["cause"]["kind"]) == (7, "late_step_start")
    assert report["ranks"]["methods"] == ["order"] and report["ranks"]["reasons"] == []
    ec = report["exposed_comm"]  # exposed communication is mostly waiting for rank 7
    assert ec["wait_ns"] > 10 * ec["transfer_ns"] and ec["wait_ns"] > 0.9 * ec["exposed_ns"]


def test_sampled_pair_names_the_missing_ranks_and_the_collectives_left_out(shared_traces: Path,
                                                                            tmp_path: Path) -> None:
    ranks = analyze(shared_traces / "torch" / "sampled2_rank0_1", tmp_path)["ranks"]
    assert any(r.startswith("126 of 128 ranks are not in the capture (2-127)") for r in ranks["reasons"])
    assert any("6 inconsistent ones are left out" in r for r in ranks["reasons"])


def test_two_process_nsys_export_as_two_participants(shared_traces: Path, tmp_path: Path) -> None:
    want = expected_nsys(shared_traces / MFU)
    ranks = analyze(shared_traces / MFU, tmp_path)["ranks"]
    assert ranks["participants"] == 2 and ranks["instances"]["matched"] == want["matched"]
    assert len(ranks["clocks"]) == 1  # one export, one clock: nothing to estimate
    # Named by NCCL's NVTX ranges where the launch is in the capture, else by the kernel's class.
    assert ranks["name_sources"] == {"nvtx": want["launched_in_capture"],
                                     "class": 2 * want["matched"] - want["launched_in_capture"]}
    by_device = {r["device"]: r for r in ranks["per_rank"]}
    assert {d: r["wait_ns"] for d, r in by_device.items()} == {dev: v for (_, dev), v in want["wait"].items()}
    assert {d: r["transfer_ns"] for d, r in by_device.items()} == {dev: v for (_, dev), v in want["transfer"].items()}
    late = max(want["waited_for"], key=want["waited_for"].get)
    assert ranks["straggler"]["device"] == late[1]


def test_two_process_nsys_export_as_ranks_0_and_1(shared_traces: Path, tmp_path: Path) -> None:
    ranks = analyze(shared_traces / MFU, tmp_path)["ranks"]
    assert sorted(r["rank"] for r in ranks["per_rank"]) == [0, 1]
    assert ranks["devices_per_rank"] == 1
    assert [c["ranks"] for c in ranks["clocks"]] == [[0, 1]]  # one export: both ranks on its one clock


def test_wait_and_transfer_split_the_median_steps_exposed_communication(shared_traces: Path, tmp_path: Path) -> None:
    """exposed_comm is one step's figures (the median step), so its wait and transfer add up to at most its
    exposed time (the rest: exposed communication in no matched collective)."""
    ec = analyze(shared_traces / "torch" / "dlrm8_v100", tmp_path)["exposed_comm"]
    assert ec["wait_ns"] > 0 and ec["transfer_ns"] > 0
    assert ec["wait_ns"] + ec["transfer_ns"] <= ec["exposed_ns"]
