"""End to end over every real trace in ../shared/traces: `tracekit analyze` answers or refuses clearly.

Negative traces with no GPU activity (HTA's CPU-only and rank-less fixtures) must exit 2 with one line
naming the file; every other trace must produce a report verdict, and the two MI300X decode
traces, with the configs that describe them, must sit above their floor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracekit.analysis.options import REPORT_SCHEMA
from tracekit.cli import main

MULTI_RANK = ("dlrm8_v100", "sampled2_rank0_1")
NEGATIVE_PREFIXES = ("hta__cpu_only__", "hta__distributed_info_unavailable__", "hta__rank_unavailable__",
                     "hta__mtia_inference_")  # an MTIA capture: an accelerator tracekit does not read
VERDICTS = {"near-floor", "pipeline", "kernel", "inconclusive"}
#: decode traces and the named config that fits each (budgets/configs/*.toml)
DECODE_CONFIGS = {
    "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz": "qwen3-8b-sglang-mi300x",
    "tracelens__inference__vllm_decode_full__graph_execution.json.gz": "gptoss-20b-vllm-mi300x",
}

#: every trace of the corpus, by its path under ../shared/traces (listed, so that no case vanishes when the
#: folder is absent; test_trace_set_is_complete checks the folder holds exactly these)
TRACE_NAMES = (
    *(f"nsys/{n}.sqlite" for n in (
        "extrap__concurrent_example__concurrent.s16__profile16", "extrap__concurrent_example__concurrent.s1__profile1",
        "extrap__nsys_db__con_kernel", "extrap__sampled_callchains__ex-gpu.s10__ex-gpu.s10", "nsys-ai__h100_2gpu_1s",
        "nsys-ai__mfu_2gpu_before", "nsys-ai__mock")),
    *(f"torch/{n}" for n in (
        "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz", "hta__call_stack__backward_thread.json",
        "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "hta__df_index_resolver__df_index_resolver.json.gz",
        "hta__distributed_info_unavailable__distributed_info_not_found.json.gz",
        "hta__nccl_parser_config__nccl_data.json.gz",
        "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "hta__mtia_inference_rank_0.json.gz",
        "hta__rank_unavailable__rank_not_found.json.gz", "hta__trace_diff__control__control.json.gz",
        "hta__trace_diff__test__test.json.gz",
        "kineto__tb_plugin__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        "tracelens__b200__eager_trace.json.gz", "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
        "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
        "tracelens__h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz",
        "tracelens__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "tracelens__sglang_prefilldecode__sglang_Qwen3-8B_prefilldecode.json.gz",
        "tracelens__xdit_flux1_aiter_sage__profile_trace_rank_0.json.gz", *MULTI_RANK)),
)


def _trace_paths() -> list[Path]:
    """Every trace of the corpus as a path relative to ../shared/traces."""
    return [Path(n) for n in TRACE_NAMES]


def _is_negative(path: Path) -> bool:
    return path.name.startswith(NEGATIVE_PREFIXES)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ingest cache shared by the module: a trace analysed twice is ingested once."""
    return tmp_path_factory.mktemp("tracekit-cache")


def _analyze(path: Path, cache_dir: Path, *extra: str) -> Any:
    """Run `tracekit analyze PATH --format json` in-process and return click's Result."""
    args = ["analyze", str(path), "--cache-dir", str(cache_dir), "--format", "json", *extra]
    return CliRunner().invoke(main, args)


def test_trace_set_is_complete(shared_traces: Path) -> None:
    """The corpus the issue names is all here: decode traces, negatives and multi-rank sets; the folder holds
    exactly the traces listed (every nsys export, every torch trace file, the multi-rank folders)."""
    on_disk = {p.relative_to(shared_traces).as_posix() for p in (shared_traces / "nsys").glob("*.sqlite")}
    on_disk |= {p.relative_to(shared_traces).as_posix() for p in (shared_traces / "torch").iterdir()
                if p.is_file() and p.name.endswith((".json", ".json.gz"))}
    on_disk |= {f"torch/{n}" for n in MULTI_RANK if (shared_traces / "torch" / n).is_dir()}
    assert on_disk == set(TRACE_NAMES)
    names = {p.name for p in _trace_paths()}
    assert set(DECODE_CONFIGS) <= names
    assert set(MULTI_RANK) <= names
    for prefix in NEGATIVE_PREFIXES:
        assert any(n.startswith(prefix) for n in names), prefix
    assert any(n.endswith(".sqlite") for n in names)


@pytest.mark.parametrize("path", _trace_paths(), ids=lambda p: p.name)
def test_trace_analyses_or_fails_clearly(path: Path, cache_dir: Path, shared_traces: Path) -> None:
    """Negatives: exit 2 and one error line naming the file. Others: a v1 report with a known verdict."""
    path = shared_traces / path
    extra = ("--config", DECODE_CONFIGS[path.name]) if path.name in DECODE_CONFIGS else ()
    result = _analyze(path, cache_dir, *extra)
    if _is_negative(path):
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1, result.output
        assert path.name in lines[0] and "error" in lines[0].lower()
        return
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    report = json.loads(result.stdout)
    assert report["schema"] == REPORT_SCHEMA
    assert report["verdict"] in VERDICTS
    if report["verdict"] == "inconclusive":
        assert report["reasons"], "an inconclusive verdict must say why"
        assert all(isinstance(r, str) and r for r in report["reasons"])


@pytest.mark.parametrize(("name", "config"), sorted(DECODE_CONFIGS.items()))
def test_decode_trace_sits_above_its_floor(name: str, config: str, cache_dir: Path, shared_traces: Path) -> None:
    """With its config, a decode trace's measured step p50 is not faster than the floor's t_opt."""
    result = _analyze(shared_traces / "torch" / name, cache_dir, "--config", config)
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    report = json.loads(result.stdout)
    floor, steps = report["floor"], report["steps"]
    assert floor is not None and floor["t_opt_ns"] > 0
    assert steps["step_ns_p50"] > 0
    assert floor["t_opt_ns"] <= steps["step_ns_p50"]
    assert floor["residual_ratio"] >= 1.0
    below = [r for r in report["reasons"] if "faster than a lower bound" in r]
    assert not below, below
    assert report["verdict"] in VERDICTS
