"""`tracekit doctor`: the capture health check on real traces, each finding with the engine's fix; `analyze`
lists the same findings as caveats; an MTIA capture is named as such and refused (exit 2) by every command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracekit.cli import main

MTIA = "torch/hta__mtia_inference_rank_0.json.gz"
SGLANG = "torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
VLLM = "torch/tracelens__vllm_prefilldecode_piecewise/graph_execution.json.gz"
NSYS_WINDOW = "nsys/nsys-ai__h100_2gpu_1s.sqlite"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("doctor-cache")


def run(cache: Path, *args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(cache)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    out = result.stdout
    return result.exit_code, json.loads(out) if out.startswith("{") else out, result.stderr


def doctor(shared: Path, cache: Path, name: str) -> tuple[int, dict[str, Any], str]:
    return run(cache, "doctor", str(shared / name), "--format", "json")


def finding(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(f for f in doc["findings"] if f["kind"] == kind)


def test_mtia_is_named_and_refused_everywhere(shared_traces: Path, cache: Path) -> None:
    code, doc, err = doctor(shared_traces, cache, MTIA)
    assert code == 2 and doc["unsupported"] is True and "MTIA accelerator: not supported" in err
    assert [f["kind"] for f in doc["findings"]] == ["unsupported_device"]
    assert "2,136 MTIA events on device ARTEMIS" in doc["findings"][0]["text"]
    assert "CPU-only" not in json.dumps(doc) and "ProfilerActivity.CUDA" not in json.dumps(doc)
    for command in ("kernels", "analyze"):
        code, out, err = run(cache, command, str(shared_traces / MTIA))
        assert code == 2 and "MTIA accelerator: not supported" in err and not out.strip(), command


def test_sglang_decode_names_the_missing_capture_trace(shared_traces: Path, cache: Path) -> None:
    code, doc, _ = doctor(shared_traces, cache, SGLANG)
    assert code == 0 and doc["engine"] == "sglang"
    f = finding(doc, "graph_replay_no_capture")
    assert "1 graph replays (544 kernels) without the trace of their capture" in f["text"]
    assert any("--enable-profile-cuda-graph" in x for x in f["fix"])
    assert finding(doc, "late_start")["severity"] == "warning"


def test_vllm_piecewise_prints_the_vllm_capture_options(shared_traces: Path, cache: Path) -> None:
    code, doc, _ = doctor(shared_traces, cache, VLLM)
    assert code == 0 and doc["engine"] == "vllm"
    f = finding(doc, "graph_replay_no_capture")
    assert "25 graph replays (361 kernels)" in f["text"]
    assert any("--profiler-config.capture_torch_profiler True" in x for x in f["fix"])
    code, text, _ = run(cache, "doctor", str(shared_traces / VLLM), "--format", "markdown")
    assert "--profiler-config.capture_torch_profiler True" in text  # the fix block, whole
    # analyze lists the same findings as caveats
    code, report, _ = run(cache, "analyze", str(shared_traces / VLLM), "--format", "json")
    assert code == 0 and f["text"] in report["caveats"]


def test_nsys_window_gets_nsys_flags(shared_traces: Path, cache: Path) -> None:
    code, doc, _ = doctor(shared_traces, cache, NSYS_WINDOW)
    assert code == 0 and doc["engine"] == "nsys"
    steps = finding(doc, "no_step_markers")
    assert steps["severity"] == "blocking" and any("nsys -t cuda,nvtx" in x for x in steps["fix"])
    assert "26 kernel launches after the last recorded kernel" in finding(doc, "dropped_events")["text"]
