"""Verdicts on the real traces in ../shared/traces: one row per trace for which a named config fits
(budgets/configs/*.toml), with the expected step source, step count, verdict and top over-budget class, and why.

These assertions are the judgement itself: turning every verdict into ``inconclusive``, losing the engine's
step annotation, or taking graph launches for steps again fails here. Traces with no row have no config that
describes them (FastVideo, DLRM, ResNet, BERT, Qwen1.5-0.5B: no model in the floor's catalog).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracekit.cli import main

B200 = "tracelens__b200__eager_trace.json.gz"
PIECEWISE = "tracelens__vllm_prefilldecode_piecewise/graph_execution.json.gz"
PIECEWISE_CAPTURE = ("tracelens__vllm_prefilldecode_piecewise/"
                     "capture_traces__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz")
SGLANG_CAPTURE = "tracelens__sglang_decode_capture/bs_32_rank0.json.gz"
SGLANG_DECODE = "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
VLLM_DECODE = "tracelens__inference__vllm_decode_full__graph_execution.json.gz"
SGLANG_PREFILL = "tracelens__sglang_prefilldecode__sglang_Qwen3-8B_prefilldecode.json.gz"
TIMESFORMER = "tracelens__h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz"


@dataclass(frozen=True)
class Row:
    trace: str
    config: str
    source: str
    steps: int
    verdict: str
    top: str | None  # the over-budget class with the largest excess (None: no class is over budget)
    why: str


ROWS = [
    Row(B200, "gptoss-120b-vllm-b200-tp8", "engine_annotation", 1, "pipeline", "moe_experts",
        "vLLM's execute_context_1(888_...) annotation is the step (one 888-token prefill); in this eager run "
        "72.9 ms of host gaps (63.6 ms host code before launches) and 2.1 ms of exposed all-reduce are 90% of "
        "the 83.0 ms residual over the 1.46 ms physical floor; the TRT-LLM-gen MoE GEMMs are ~4.6x their budget"),
    Row(PIECEWISE, "gptoss-20b-vllm-mi300x-prefill", "engine_annotation", 1, "kernel", "moe_experts",
        "vLLM's annotation groups the 25 piecewise graph launches of one forward (8,155 prefill + 37 decode "
        "tokens) into one 156 ms step; against the 38.5 ms compute-bound prefill floor the MXFP4 "
        "_matmul_ogs MoE GEMMs are 4.1x their budget"),
    Row(VLLM_DECODE, "gptoss-20b-vllm-mi300x", "engine_annotation", 1, "kernel", "moe_experts",
        "one full-graph decode step of 32 requests (context 1721 from the annotation's KV total, 55086 / 32); "
        "the MXFP4 MoE GEMMs are 3.7x their budget"),
    Row(SGLANG_DECODE, "qwen3-8b-sglang-mi300x", "engine_annotation", 1, "kernel", "gemm",
        "the step waits 463 ms, before its first kernel, on work launched before the engine's profiler started: "
        "that wait is left out and the 10.8 ms GPU-bound rest (one 544-kernel graph replay at batch 32) is "
        "judged: 2.8x the 3.8 ms floor, GEMMs 2.0x their budget (until 2026-12 the step was refused instead)"),
    Row(SGLANG_PREFILL, "qwen3-8b-sglang-mi300x", "engine_annotation", 1, "kernel", "gemm",
        "SGLang's step[EXTEND bs=15 toks=15360]: a 493 ms hipMemcpyWithStream wait on unseen GPU work is left "
        "out, the prefill step the engine states is taken over the decode config's point, and the 494 ms "
        "GPU-bound prefill is 2.96x its floor with GEMMs 2.57x their budget"),
    Row(SGLANG_CAPTURE, "qwen3-8b-sglang-mi300x", "profiler_step", 1, "inconclusive", None,
        "a graph-capture trace: 544 launches captured, 2 kernels run; nothing to judge"),
    Row(PIECEWISE_CAPTURE, "gptoss-20b-vllm-mi300x-prefill", "whole_capture", 1, "inconclusive", None,
        "the capture of the piecewise graphs (25 stream captures, 361 launches captured, 99 kernels run)"),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tracekit-cache")


@pytest.fixture(scope="module")
def torch_dir(shared_traces: Path) -> Path:
    return shared_traces / "torch"


def analyze(path: Path, cache: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["analyze", str(path), "--cache-dir", str(cache), "--format", "json", *args])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return json.loads(result.stdout)


def top_over_budget(report: dict[str, Any]) -> str | None:
    over = [c for c in report["classes"] if c["over_budget"]]
    return max(over, key=lambda c: c["excess_ns"])["name"] if over else None


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.trace.split("/")[-1][:40])
def test_real_trace_verdict(row: Row, cache_dir: Path, torch_dir: Path) -> None:
    report = analyze(torch_dir / row.trace, cache_dir, "--config", row.config)
    steps = report["steps"]
    assert (steps["source"], steps["count"], report["verdict"]) == ([row.source], row.steps, row.verdict), \
        report["reasons"]
    assert report["fit"]["reasons"] == [], "the named config must fit the capture"
    assert top_over_budget(report) == row.top


def test_some_real_verdicts_are_decisive() -> None:
    """The table itself: at least three traces get a verdict other than inconclusive."""
    assert sum(r.verdict != "inconclusive" for r in ROWS) >= 3


def test_the_b200_trace_step_hardware_and_operating_point(
    cache_dir: Path, torch_dir: Path,
) -> None:
    report = analyze(torch_dir / B200, cache_dir, "--config", "gptoss-120b-vllm-b200-tp8")
    fit = report["fit"]
    assert fit["gpu"]["identified_as"] == "b200" and fit["gpu"]["evidence"] == "name"
    assert fit["world_size"] == 8
    assert fit["operating_point"]["phase"] == "prefill" and fit["operating_point"]["context"] == 888
    assert report["host_gaps"]["by_cause"]["launch_call"] == pytest.approx(7.07e6, rel=0.01)
    # 63.6 ms between launches plus 2.5 ms of host code before the step's first kernel (part of the step since
    # the step is the host step joined with its GPU work)
    assert report["host_gaps"]["by_cause"]["host_code"] == pytest.approx(66.1e6, rel=0.01)
    wrong = analyze(torch_dir / B200, cache_dir, "--config", "qwen3-8b-tp1-h100")
    reasons = " | ".join(wrong["reasons"])
    assert wrong["verdict"] == "inconclusive"
    assert "NVIDIA B200" in reasons and "world size is 8" in reasons
    assert any("the floor models the trace's step" in n for n in wrong["fit"]["notes"])  # its prefill, as stated


def test_the_piecewise_trace_is_one_step_on_an_identified_mi300x_with_rocprof_targets(
    cache_dir: Path, torch_dir: Path,
) -> None:
    report = analyze(torch_dir / PIECEWISE, cache_dir, "--config", "gptoss-20b-vllm-mi300x-prefill")
    assert report["fit"]["gpu"]["identified_as"] == "mi300x" and report["fit"]["gpu"]["evidence"] == "properties"
    targets = report["ncu_targets"]
    assert targets and all(t["tool"] == "rocprofv3" and not t["command"].startswith("ncu") for t in targets)
    h100 = analyze(torch_dir / PIECEWISE, cache_dir, "--config", "qwen3-8b-tp1-h100")
    assert h100["verdict"] == "inconclusive"
    assert any("an AMD GPU, but the config describes h100" in r for r in h100["reasons"])
    decode = analyze(torch_dir / PIECEWISE, cache_dir, "--config", "gptoss-20b-vllm-mi300x")
    # the engine states a mixed step (9 prefill requests, 8155 tokens, 37 decodes): a decode or a prefill config
    # of the same deployment gives the floor of that very step
    assert decode["fit"]["reasons"] == [] and decode["floor"]["t_opt_ns"] == report["floor"]["t_opt_ns"]
    assert report["config"]["effective"]["prefill_tokens"] == 8155


def test_the_sglang_prefill_step_leaves_its_outside_wait_out(cache_dir: Path, torch_dir: Path) -> None:
    report = analyze(torch_dir / SGLANG_PREFILL, cache_dir, "--config", "qwen3-8b-sglang-mi300x")
    assert report["steps"]["step_ns_p50"] == pytest.approx(493e6, rel=0.01)
    [wait] = report["steps"]["outside_waits"]
    assert (wait["kind"], wait["api_call"]) == ("blocking_call", "hipMemcpyWithStream")
    assert wait["dur_ns"] == pytest.approx(493e6, rel=0.01) and wait["step_offset_ns"] < 1e6
    assert any("hipMemcpyWithStream blocked" in c and "left out of the step" in c for c in report["caveats"])
    assert report["fit"]["operating_point"]["source"].startswith("SGLang step annotation")
    assert report["host_gaps"]["by_cause"]["dependency"] < 1e6


def test_timesformer_host_time_before_the_first_kernel_is_in_the_step(cache_dir: Path, torch_dir: Path) -> None:
    report = analyze(torch_dir / TIMESFORMER, cache_dir)
    assert report["steps"]["step_ns_p50"] == pytest.approx(382.5e6, rel=0.01)  # ProfilerStep#6 on the host
    assert report["host_gaps"]["fraction"] >= 0.55
    head = report["host_gaps"]["before_first_kernel"]
    assert head["fraction"] >= 0.55 and max(head["by_cause"], key=head["by_cause"].get) == "host_code"
    assert "preprocess" in head["longest"]["host"]["range"]  # the video processor's preprocessing


def test_a_capture_beside_its_replay_is_no_rank_and_attributes_the_replayed_kernels(
    cache_dir: Path, torch_dir: Path,
) -> None:
    folder = analyze(torch_dir / PIECEWISE.split("/")[0], cache_dir, "--config", "gptoss-20b-vllm-mi300x-prefill")
    alone = analyze(torch_dir / PIECEWISE, cache_dir, "--config", "gptoss-20b-vllm-mi300x-prefill")
    assert folder["steps"]["count_per_rank"] == {"0": 1} and folder["ranks"] is None
    assert [i["role"] for i in folder["inputs"]] == ["trace", "graph_capture"]
    assert (folder["verdict"], top_over_budget(folder)) == (alone["verdict"], top_over_budget(alone))
    assert folder["graphs"]["attributed_fraction"] >= 0.9 and alone["graphs"]["attributed_fraction"] == 0
    assert any("without the trace of their capture" in c for c in alone["caveats"])
    assert not any("without the trace of their capture" in c for c in folder["caveats"])
    assert any("capture_torch_profiler" in h for h in alone["graphs"]["how_to_attribute"])
    sglang = analyze(torch_dir / SGLANG_DECODE, cache_dir, "--config", "qwen3-8b-sglang-mi300x",
                     str(torch_dir / SGLANG_CAPTURE.split("/")[0]))
    graphs = sglang["graphs"]
    assert graphs["replayed_kernels"] == 544 and graphs["attributed_fraction"] >= 0.9
    assert sglang["verdict"] == "kernel" and sglang["steps"]["count_per_rank"] == {"0": 1}


def test_the_sglang_capture_folder_is_a_capture_trace_and_its_notes_file_is_skipped(
    cache_dir: Path, torch_dir: Path,
) -> None:
    folder = torch_dir / SGLANG_CAPTURE.split("/")[0]
    report = analyze(folder, cache_dir, "--config", "qwen3-8b-sglang-mi300x")
    assert report["steps"]["capture_only"] and report["verdict"] == "inconclusive"
    assert any("execution_details.json: not a profiler trace" in c for c in report["caveats"])
    result = CliRunner().invoke(main, ["diff", str(torch_dir / VLLM_DECODE), str(folder), "--cache-dir", str(cache_dir),
                                       "--fail-if-slower", "5%", "--format", "json"])
    assert result.exit_code == 12, result.output  # a capture is no step: never "faster", never passes


def test_a_two_process_nsys_export_reads_as_two_ranks(
    cache_dir: Path, torch_dir: Path,
) -> None:
    report = analyze(torch_dir.parent / "nsys" / "nsys-ai__mfu_2gpu_before.sqlite", cache_dir)
    assert report["inputs"][0]["ranks"] == [0, 1]
    assert sorted(report["steps"]["per_rank_p50_ns"]) == ["0", "1"]


def test_attention_shapes_give_the_operating_point_without_an_engine_annotation(
    cache_dir: Path, torch_dir: Path,
) -> None:
    """TraceLens's HF Qwen1.5-0.5B forward on an H100: SDPA over [16, 16, 559, 64], a 16 x 559-token prefill;
    a decode config is then another phase (no catalog model fits this trace, so it has no table row)."""
    report = analyze(torch_dir / "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", cache_dir,
                     "--config", "qwen3-8b-tp1-h100")
    point = report["fit"]["operating_point"]
    assert (point["phase"], point["batch"], point["context"]) == ("prefill", 16, 559)
    assert report["verdict"] == "inconclusive" and any("prefill step" in r for r in report["reasons"])
