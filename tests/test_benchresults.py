"""Benchmark result readers: each tool's format parsed from the hand-written fixtures (values read back as
written there), format recognition and the errors for files that are not results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.compare.benchresults import read_result_file
from tracekit.errors import InputError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench_results"


def test_vllm_serve_result() -> None:
    [r] = read_result_file(FIX / "vllm_serve_rate4.json")
    assert (r.tool, r.request_rate_per_s, r.max_concurrency, r.num_requests) == ("vllm", 4.0, None, 400)
    assert r.input_len_mean == 409600 / 400 and r.output_len_mean == 192000 / 400
    assert r.input_len_std is None and r.output_len_std is None  # no --save-detailed: spread unknown
    assert (r.tpot_ns_p50, r.tpot_ns_p99, r.tpot_ns_mean) == (9_100_000, 12_400_000, 9_300_000)
    assert (r.ttft_ns_p50, r.ttft_ns_p99) == (45_200_000, 180_500_000)
    assert r.e2e_ns_mean is None and r.duration_ns == 101_300_000_000
    assert r.output_tokens_per_s == pytest.approx(1895.3603158933859)


def test_vllm_benchmark_serving_result_with_per_request_lengths() -> None:
    [r] = read_result_file(FIX / "vllm_benchmark_serving_closed.json")
    assert math.isinf(r.request_rate_per_s) and r.max_concurrency == 4
    assert (r.input_len_mean, r.input_len_std, r.output_len_mean, r.output_len_std) == (1024, 0, 8, 0)
    assert r.e2e_ns_mean == 114_800_000 and r.e2e_ns_p99 == 120_100_000


def test_sglang_jsonl_sweep() -> None:
    runs = read_result_file(FIX / "sglang_bench_serving_sweep.jsonl")
    assert [r.tool for r in runs] == ["sglang"] * 3
    assert [r.request_rate_per_s for r in runs][:2] == [1.0, 4.0] and math.isinf(runs[2].request_rate_per_s)
    assert [r.concurrency_reported for r in runs] == [2.85, 13.8, 388.5]
    assert runs[1].e2e_ns_mean == 3_500_000_000 and runs[1].tpot_ns_p99 == 12_100_000
    assert runs[0].input_len_mean == 460800 / 600 and runs[0].input_len_std is None


def test_sglang_fixed_lengths_are_known(tmp_path: Path) -> None:
    line = json.loads((FIX / "sglang_bench_serving_sweep.jsonl").read_text().splitlines()[0])
    line["random_range_ratio"] = 1.0  # bench_serving then samples every length at its maximum
    path = tmp_path / "fixed.jsonl"
    path.write_text(json.dumps(line) + "\n")
    [r] = read_result_file(path)
    assert r.input_len_std == 0 and r.output_len_std == 0


def test_genai_perf_export() -> None:
    [r] = read_result_file(FIX / "genai_perf_profile_export_genai_perf.json")
    assert r.tool == "genai-perf" and math.isinf(r.request_rate_per_s) and r.max_concurrency == 16
    assert (r.num_requests, r.input_len_mean, r.input_len_std, r.output_len_mean, r.output_len_std) == (
        320, 1000.0, 100.0, 500.0, 50.0)
    assert (r.tpot_ns_p50, r.tpot_ns_p99, r.itl_ns_p50) == (9_800_000, 13_000_000, None)
    assert r.e2e_ns_mean == 5_080_000_000 and r.throughput_requests_per_s == 3.1


def test_guidellm_report_gives_one_run_per_benchmark() -> None:
    runs = read_result_file(FIX / "guidellm_benchmarks.json")
    assert [(r.tool, r.request_rate_per_s, r.num_requests) for r in runs] == [
        ("guidellm", 2.0, 520), ("guidellm", 6.0, 1500)]
    r = runs[0]
    assert r.concurrency_reported == 7.6 and r.throughput_requests_per_s == 520 / 260.0
    assert (r.input_len_mean, r.input_len_std, r.output_len_std) == (1012.0, 180.0, 90.0)
    assert (r.tpot_ns_p50, r.tpot_ns_p99) == (7_400_000, 9_000_000)  # inter_token_latency_ms p50, p99
    assert (r.e2e_ns_p50, r.e2e_ns_mean) == (3_700_000_000, 3_800_000_000)  # request_latency is in seconds


@pytest.mark.parametrize("content", ['{"hello": 1}', "[1, 2]", '{"a": 1}\nnot json\n', ""])
def test_unrecognised_file_is_an_input_error_naming_it(tmp_path: Path, content: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(content)
    with pytest.raises(InputError, match="odd.json"):
        read_result_file(path)
    result = CliRunner().invoke(main, ["reconcile", str(path), "--config", "qwen3-8b-tp1-h100"])
    assert result.exit_code == 2 and "odd.json" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(("key", "value"), [("median_tpot_ms", {"nested": True}),
                                          ("request_throughput", "\x1b[31mfast"), ("duration", float("nan"))])
def test_wrong_value_type_names_the_field(tmp_path: Path, key: str, value: object) -> None:
    doc = json.loads((FIX / "vllm_serve_rate4.json").read_text())
    doc[key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=key) as err:
        read_result_file(path)
    assert "\x1b" not in str(err.value)
