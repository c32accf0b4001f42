"""The op floor from the trace's own shapes: TraceLens agreement, verdicts with and without a config, classes
from the launching op, the inferred model shape and the per-layer table, on real traces (one analysis each)."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tracekit.analysis.attribution import nest
from tracekit.cli import main
from tracekit.floor.ops import op_work

TIMESFORMER = "torch/tracelens__h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz"
QWEN_H100 = "torch/tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
QWEN_MI300 = "torch/tracelens__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT = "torch/tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
MFU = "nsys/nsys-ai__mfu_2gpu_before.sqlite"
SHAPED_TRANSFORMERS = (TIMESFORMER, QWEN_H100, QWEN_MI300, BERT)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("opfloor-cache")


@pytest.fixture(scope="module")
def reports(shared_traces: Path, cache: Path) -> dict[tuple[str, str | None], dict]:
    out = {}
    runs = [(t, None) for t in SHAPED_TRANSFORMERS] + [(TIMESFORMER, "qwen3-8b-tp1-h100"),
                                                        (MFU, "mixtral-8x7b-ep8-h100")]
    for trace, config in runs:
        args = ["analyze", str(shared_traces / trace), "--format", "json", "-q", "--cache-dir", str(cache)]
        result = CliRunner().invoke(main, args + (["--config", config] if config else []))
        assert result.exit_code == 0, result.output
        out[(trace, config)] = json.loads(result.output)
    return out


def _tracelens_rows(shared_traces: Path) -> list[tuple[str, dict[str, str]]]:
    rows = []
    for folder in sorted((shared_traces / "torch" / "reference-tracelens").iterdir()):
        for name in ("GEMM.csv", "SDPA_fwd.csv", "CONV_fwd.csv"):
            if (folder / name).is_file():
                with (folder / name).open(encoding="utf-8") as f:
                    rows += [(f"{folder.name}/{name}", r) for r in csv.DictReader(f)]
    return rows


def test_every_tracelens_gemm_and_sdpa_row_agrees_within_1_percent(shared_traces: Path) -> None:
    rows = _tracelens_rows(shared_traces)
    assert sum(1 for where, _ in rows if "SDPA" in where) >= 3 and sum(1 for where, _ in rows if "GEMM" in where) >= 20
    for where, r in rows:
        lit = [ast.literal_eval(r[c]) for c in ("Input Dims_first", "Input type_first", "Input Strides_first",
                                                "Concrete Inputs_first")]
        work = op_work(r["name"], *lit)
        assert work is not None and work.flops, (where, r["name"])
        expected = float(r["GFLOPS_first"]) * 1e9
        assert abs(work.flops - expected) <= 0.01 * expected, (where, r["name"], work.flops, expected)
        moved = float(r["Data Moved (MB)_first"]) * 2**20  # TraceLens's MB are MiB
        assert abs(work.hbm_bytes - moved) <= 0.01 * moved, (where, r["name"], work.hbm_bytes, moved)


def test_causal_attention_does_half_the_score_work() -> None:
    dims = [[2, 8, 128, 64]] * 3 + [[]] * 4
    types = ["c10::BFloat16"] * 3 + ["Scalar"] * 4
    full = op_work("aten::_scaled_dot_product_flash_attention", dims, types, None, ["", "", "", "0.", "False"])
    causal = op_work("aten::_scaled_dot_product_flash_attention", dims, types, None, ["", "", "", "0.", "True"])
    assert full.flops == 4 * 2 * 8 * 128 * 128 * 64 and causal.flops == full.flops / 2


def test_vllm_custom_ops_get_a_bytes_floor() -> None:
    """vLLM's fused residual-add RMSNorm updates input and residual in place: both read and written once."""
    work = op_work("_C::fused_add_rms_norm", [[888, 2880], [888, 2880], [2880], []],
                   ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar"], None, None)
    assert work.family == "norm" and work.flops is None
    assert work.hbm_bytes == 2 * (888 * 2880 * 2) * 2 + 2880 * 2


def test_timesformer_with_a_qwen3_config_is_inconclusive_with_the_model_mismatch(reports: dict) -> None:
    r = reports[(TIMESFORMER, "qwen3-8b-tp1-h100")]
    assert r["verdict"] == "inconclusive" and r["ncu_targets"] == []
    mismatch = [x for x in r["reasons"] if "hidden 768" in x and "qwen3-8b" in x]
    assert len(mismatch) == 1 and "hidden 4096" in mismatch[0]
    assert r["floor_used"] == "model" and r["op_floor"] is not None
    assert r["work_inflation"]["ratio"] > 1  # the kernels that ran need more than the (wrong) model floor


def test_timesformer_without_a_config_gets_a_verdict_from_the_op_floor(reports: dict) -> None:
    r = reports[(TIMESFORMER, None)]
    # The ProfilerStep holds 218 ms of host preprocessing before its first kernel: the pipeline, against the op floor.
    assert r["floor_used"] == "op" and r["verdict"] == "pipeline"
    assert "op floor t_opt" in r["reasons"][0] and "host gaps" in r["reasons"][1]
    ops = {o["op"]: o["class"] for o in r["op_floor"]["ops"]}
    assert ops["aten::softmax"] == "attn_core" and ops["aten::matmul"] == "attn_core"
    assert ops["aten::linear"] == "gemm"  # the attention module's projections stay GEMMs
    kinds = {f["kind"]: f for f in r["work_inflation"]["findings"]}
    gpu_ns = sum(c["measured_ns"] for c in r["op_floor"]["classes"].values())
    assert "aten::softmax" in kinds["unfused_attention"]["ops"]
    assert kinds["unfused_attention"]["measured_ns"] > 0.5 * gpu_ns  # most of the GPU time
    assert r["model_shape"]["hidden"] == 768 and r["model_shape"]["layers"] == 12


@pytest.mark.parametrize("trace", SHAPED_TRANSFORMERS)
def test_shaped_transformer_traces_attribute_90_percent_and_no_op_beats_its_floor(reports: dict, trace: str) -> None:
    op = reports[(trace, None)]["op_floor"]
    # Of the GPU time whose launch the capture holds (Qwen1.5's step window also holds kernels launched before
    # the profiler started: they have no launching op to read shapes from).
    assert op["covered_launched_fraction"] >= 0.9
    assert op["min_instance_ratio"]["ratio"] >= 1.0, op["min_instance_ratio"]
    r = reports[(trace, None)]
    # A verdict from the op floor, unless too much of the step ran kernels launched before the capture (Qwen1.5:
    # 13 ms of 49 ms), which the op floor cannot judge: then inconclusive, saying so.
    assert r["verdict"] != "inconclusive" or ("the op floor speaks for only" in r["reasons"][0]
                                              and "no launching op in the capture" in r["reasons"][0])


@pytest.mark.parametrize("trace", [QWEN_H100, QWEN_MI300])
def test_qwen15_shape_and_its_24_decoder_layers(reports: dict, trace: str) -> None:
    r = reports[(trace, None)]
    s = r["model_shape"]
    assert (s["hidden"], s["intermediate"], s["heads"], s["vocab"], s["layers"]) == (1024, 2816, 16, 151936, 24)
    assert r["layers"]["block"] == "Qwen2DecoderLayer" and r["layers"]["count"] == 24
    assert {m["module"] for m in r["layers"]["module_types"]} >= {"Qwen2Attention", "Qwen2MLP"}
    assert r["op_floor"]["hardware"] == ("h100" if "h100" in trace else "mi300x")


def test_a_step_under_the_floor_is_a_reason_beside_the_others_and_world_size_comes_from_the_ranks(
        reports: dict) -> None:
    r = reports[(MFU, "mixtral-8x7b-ep8-h100")]
    assert r["verdict"] == "inconclusive" and r["fit"]["world_size"] == 2
    assert any("world size is 2" in x for x in r["reasons"])
    assert any("faster than the physical lower bound" in x and "mixtral-8x7b-ep8-h100" in x for x in r["reasons"])


def test_a_config_draft_from_the_trace_gives_the_model_floor_and_info_prints_the_shape(
        shared_traces: Path, cache: Path, tmp_path: Path) -> None:
    trace = str(shared_traces / QWEN_H100)
    draft = tmp_path / "draft.toml"
    result = CliRunner().invoke(main, ["config-draft", trace, "-q", "--cache-dir", str(cache), "--out", str(draft)])
    assert result.exit_code == 0, result.output
    text = draft.read_text()
    assert "d_model            = 1024  # inferred" in text and "n_layers           = 24  # inferred" in text
    assert "tp                 = 1  # assumed" in text
    result = CliRunner().invoke(main, ["analyze", trace, "--config", str(draft), "--format", "json", "-q",
                                       "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    r = json.loads(result.output)
    assert r["floor_used"] == "model" and r["verdict"] == "kernel" and not r["fit"]["reasons"]
    assert r["work_inflation"]["ratio"] > 1  # the kernels that ran do more than the model needs
    info = CliRunner().invoke(main, ["info", trace, "--format", "json", "-q", "--cache-dir", str(cache)])
    fields = {row["field"]: row["value"] for row in json.loads(info.output)["model_shape"]}
    assert (fields["hidden"], fields["intermediate"], fields["heads"], fields["vocab"], fields["layers"]) == (
        "1024", "2816", "16", "151936", "24")


def test_config_draft_refuses_a_trace_without_op_shapes(shared_traces: Path, cache: Path) -> None:
    trace = shared_traces / "nsys/nsys-ai__mock.sqlite"
    result = CliRunner().invoke(main, ["config-draft", str(trace), "-q", "--cache-dir", str(cache)])
    assert result.exit_code == 2 and "record no shapes" in result.output and str(trace) in result.output


def test_the_html_report_has_the_per_layer_chart(shared_traces: Path, cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["analyze", str(shared_traces / QWEN_MI300), "--format", "html", "--out",
                                       str(out), "-q", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'aria-label="per-layer time"' in page and page.count("<title>layer ") == 24


def _nested(rng: np.random.Generator, lo: int, hi: int, depth: int, out: list[tuple[int, int]]) -> None:
    t = lo
    while t < hi and depth < 4:
        a = t + int(rng.integers(0, 4))
        b = a + int(rng.integers(1, 25))
        if b > hi:
            return
        out.append((a, b))
        _nested(rng, a, b, depth + 1, out)
        t = b + int(rng.integers(0, 3))


def test_nest_finds_each_ranges_parent_and_each_launchs_innermost_open_range() -> None:
    """The vectorised sweep against a brute force on random nested ranges of three threads."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        ivs: list[tuple[int, int]] = []
        groups: list[int] = []
        for g in range(3):
            mine: list[tuple[int, int]] = []
            _nested(rng, 0, 200, 0, mine)
            ivs += mine
            groups += [g] * len(mine)
        perm = rng.permutation(len(ivs))
        ivs, groups = [ivs[i] for i in perm], [groups[i] for i in perm]
        start, end, group = (np.array([a for a, _ in ivs]), np.array([b for _, b in ivs]), np.array(groups))
        points, point_group = rng.integers(0, 200, 60), rng.integers(0, 3, 60)
        parent, inner = nest(group, start, end, point_group, points)
        for i, (a, b) in enumerate(ivs):
            if sum(1 for j, iv in enumerate(ivs) if iv == (a, b) and groups[j] == groups[i]) > 1:
                continue  # of two identical ranges either may be the other's parent
            around = [j for j, (c, d) in enumerate(ivs) if groups[j] == groups[i] and (c, -d) < (a, -b)
                      and c <= a < d and b <= d]
            want = max(around, key=lambda j: (ivs[j][0], -ivs[j][1])) if around else -1
            assert (ivs[parent[i]] if parent[i] >= 0 else None) == (ivs[want] if want >= 0 else None)
        for k, t in enumerate(points.tolist()):
            open_ = [j for j, (c, d) in enumerate(ivs) if groups[j] == point_group[k] and c <= t < d]
            want = max(open_, key=lambda j: (ivs[j][0], -ivs[j][1])) if open_ else -1
            assert (ivs[inner[k]] if inner[k] >= 0 else None) == (ivs[want] if want >= 0 else None)


def test_an_op_floor_that_speaks_for_little_of_the_gpu_time_does_not_decide(shared_traces: Path, cache: Path) -> None:
    """vLLM's piecewise graphs: replayed kernels have no launching op in the capture, so the op floor covers a few
    percent of the step; without a config the verdict stays inconclusive and says so."""
    trace = shared_traces / "torch/tracelens__vllm_prefilldecode_piecewise/graph_execution.json.gz"
    result = CliRunner().invoke(main, ["analyze", str(trace), "--format", "json", "-q", "--cache-dir", str(cache)])
    r = json.loads(result.output)
    assert r["verdict"] == "inconclusive" and r["floor_used"] is None and r["op_floor"]["covered_fraction"] < 0.8
    assert "the op floor speaks for only" in r["reasons"][0] and "config-draft" in r["reasons"][0]
