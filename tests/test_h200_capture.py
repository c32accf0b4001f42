"""A real PyTorch-profiler capture from an H200 (bench/device/qwen3_decode.py, unfused decode attention in CUDA
graphs): tracekit's ncu targets on it must stay the ones that ncu, run on that GPU, profiled exactly
(bench/device/results/check_ncu.json records the function, grid and block it saw)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import main

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "fixtures" / "h200" / "qwen3_b64_p2048_graphs_math.pt.trace.json.gz"
CHECK = ROOT / "bench" / "device" / "results" / "check_ncu.json"


def test_ncu_targets_are_the_launches_ncu_profiled_on_the_gpu(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [
        "analyze", str(TRACE), "--config", "qwen3-8b-tp1-h100", "--set", "hardware=h200", "--batch", "64",
        "--context", "2052", "--skip-steps", "1", "--format", "json", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["verdict"] == "kernel" and report["steps"]["count"] == 8
    checked = json.loads(CHECK.read_text())["ncu_checks"]
    assert all(c["profiled"] and c["function_matches"] and c["grid_matches"] and c["block_matches"] for c in checked)
    # The launch index follows the median step, which moved one step earlier when a step began to hold its
    # host time before the first kernel (issue 24); the device record is of the next step's launch of the same
    # kernel. What ncu verified stays pinned: the function-name filter, the kernel, its graph membership, and a
    # --launch-skip that counts launches of that function from the process start (one step's launches apart).
    for c in checked:
        target = next(t for t in report["ncu_targets"] if t["function"] == c["function"] and t["kernel"] == c["kernel"])
        assert target["in_graph"] == c["in_graph"]
        assert 0 < c["launch_skip"] - target["launch_skip"] < c["launch_skip"] / 4
        assert f"--kernel-name-base function --kernel-name 'regex:^{c['function']}$' " \
               f"--launch-skip {target['launch_skip']}" in target["command"]


def _caveat_kinds(path: Path, cache: Path) -> set[str]:
    result = CliRunner().invoke(main, ["info", str(path), "--format", "json", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    return {c["kind"] for c in json.loads(result.output)["caveats"]}


def test_a_capture_from_process_start_has_exact_skips_and_a_late_one_says_it(tmp_path: Path,
                                                                             shared_traces: Path) -> None:
    """The H200 capture starts at ProfilerStep#0; HTA's call-stack sample starts at ProfilerStep#552, so
    launches before it are missing and --launch-skip cannot count them."""
    assert "late_start" not in _caveat_kinds(TRACE, tmp_path)
    assert "late_start" in _caveat_kinds(shared_traces / "torch" / "hta__call_stack__backward_thread.json", tmp_path)
