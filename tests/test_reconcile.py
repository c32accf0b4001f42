"""`tracekit reconcile`: operating points by Little's law (checked by hand), TPOT placed against a floor
computed here at the hand-derived point, each discipline rule triggered, sweeps, plot and hostile text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit import floor
from tracekit.budgets.configs import load_config
from tracekit.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench_results"
CONFIG = "qwen3-8b-tp1-h100"


def run(*args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(main, ["reconcile", *args, "--config", CONFIG, "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else {}, result.stderr


def one(path: Path, *args: str) -> dict:
    code, doc, err = run(str(path), *args)
    assert code == 0, err
    assert doc["schema"] == "tracekit.reconcile/v1"
    return doc["results"][0]


def rules(entry: dict) -> dict[str, str]:
    return {r["rule"]: r["status"] for r in entry["discipline"]}


def test_littles_law_from_throughput_and_mean_e2e() -> None:
    e = one(FIX / "vllm_benchmark_serving_closed.json")
    op = e["operating_point"]
    # 19.35483870967742 requests/s x 114.8 ms mean E2E = 2.222 in flight; context 1024 + 8 / 2.
    assert op["concurrency_source"] == "littles_law"
    assert op["concurrency"] == pytest.approx(19.35483870967742 * 0.1148)
    assert (op["batch"], op["context_tokens"]) == (2, 1028)


def test_littles_law_over_tokens_when_no_mean_e2e() -> None:
    op = one(FIX / "vllm_serve_rate4.json")["operating_point"]
    # 1895.36 output tokens/s x 9.3 ms mean TPOT = 17.63 decoding; context 1024 + 480 / 2 = 1264.
    assert op["concurrency_source"] == "littles_law_tokens"
    assert op["concurrency"] == pytest.approx(1895.3603158933859 * 0.0093)
    assert (op["batch"], op["context_tokens"]) == (18, 1264)


def test_reported_concurrency_is_preferred() -> None:
    op = one(FIX / "guidellm_benchmarks.json")["operating_point"]
    assert (op["concurrency_source"], op["concurrency"], op["batch"]) == ("reported", 7.6, 8)


def test_tpot_placed_against_the_floor_at_the_hand_derived_point() -> None:
    e = one(FIX / "genai_perf_profile_export_genai_perf.json")
    # 3.1 requests/s x 5.080 s = 15.75 -> 16 in flight; context 1000 + 500 / 2 = 1250.
    r = floor.compute_floor(load_config(CONFIG, {"batch": "16", "context_tokens": "1250"}))
    assert (e["floor"]["t_opt_ns"], e["floor"]["t_sum_ns"]) == (r.t_opt_ns, r.t_sum_ns)
    for pct, tpot_ns in (("p50", 9_800_000), ("p99", 13_000_000)):
        p = e["tpot"][pct]
        assert p["residual_ratio"] == pytest.approx(tpot_ns / r.t_opt_ns)
        assert p["position"] == pytest.approx((tpot_ns - r.t_opt_ns) / (r.t_sum_ns - r.t_opt_ns))
        assert p["verdict"] == ("near-floor" if tpot_ns / r.t_opt_ns < 1.3 else "above-floor")
    assert e["verdict"] == e["tpot"]["p50"]["verdict"]
    walls = floor.compute_walls(load_config(CONFIG, {"batch": "16", "context_tokens": "1250"}))
    reach = [w for w in walls.walls if w.reachable]
    import math

    nearest = min(reach, key=lambda w: abs(math.log(16 / w.batch)))
    assert e["closest_wall"]["name"] == nearest.name


def test_below_the_floor_is_inconclusive(tmp_path: Path) -> None:
    doc = json.loads((FIX / "vllm_serve_rate4.json").read_text())
    doc["median_tpot_ms"] = 2.0  # far under any Qwen3-8B floor on one H100
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(doc))
    e = one(path)
    assert e["tpot"]["p50"]["verdict"] == "inconclusive" and e["verdict"] == "inconclusive"
    assert "does not describe the run" in e["reasons"][0]


def test_discipline_rules_each_triggered_and_still_reconciled(tmp_path: Path) -> None:
    closed = one(FIX / "vllm_benchmark_serving_closed.json")
    assert rules(closed) == {"open_loop": "broken", "length_distribution": "broken", "steady_state": "broken",
                             "no_failed_requests": "unknown", "tail_percentiles": "ok"}
    assert closed["tpot"]["p50"] is not None  # broken rules do not stop the reconciliation
    assert any("12 requests < 10 x concurrency 2.2" in r for r in closed["reasons"])
    serve = one(FIX / "vllm_serve_rate4.json")
    assert rules(serve) == {"open_loop": "ok", "length_distribution": "unknown", "steady_state": "ok",
                            "no_failed_requests": "ok", "tail_percentiles": "ok"}
    assert rules(one(FIX / "guidellm_benchmarks.json")) == dict.fromkeys(rules(serve), "ok")
    doc = json.loads((FIX / "vllm_serve_rate4.json").read_text())
    del doc["p99_tpot_ms"], doc["p99_ttft_ms"]  # e.g. --metric-percentiles 50,90
    path = tmp_path / "no_tail.json"
    path.write_text(json.dumps(doc))
    no_tail = one(path)
    assert rules(no_tail)["tail_percentiles"] == "broken" and no_tail["tpot"]["p99"] is None
    assert any("missing: TPOT P99, TTFT P99" in r for r in no_tail["reasons"])


def test_sweep_points_and_frontier() -> None:
    code, doc, _ = run(str(FIX / "sglang_bench_serving_sweep.jsonl"))
    assert code == 0 and len(doc["results"]) == 3
    sw = doc["sweep"]
    assert [p["batch"] for p in sw["points"]] == [3, 14, 388]
    assert sw["context_tokens"] == 960 and sw["frontier"]
    for p, e in zip(sw["points"], doc["results"], strict=True):
        assert p["tokens_per_s_per_gpu"] == pytest.approx(e["benchmark"]["output_tokens_per_s"] / 1)
    _, single, _ = run(str(FIX / "vllm_serve_rate4.json"))
    assert single["sweep"] is None and single["plot"] is None


def test_kv_capacity_caps_the_decode_batch() -> None:
    code, doc, _ = run(str(FIX / "sglang_bench_serving_sweep.jsonl"), "--set", "reserve_per_gpu_bytes=60GB")
    assert code == 0
    e = doc["results"][2]
    cap = e["floor"]["kv_capacity_requests"]
    assert e["operating_point"]["batch"] == cap < 388
    assert any("exceed the KV capacity" in r for r in e["reasons"])


def test_plot_and_missing_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "sweep.png"
    code, doc, _ = run(str(FIX / "sglang_bench_serving_sweep.jsonl"), "--plot", str(png))
    assert code == 0 and doc["plot"] == str(png) and png.read_bytes()[:4] == b"\x89PNG"
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    code, _, err = run(str(FIX / "vllm_serve_rate4.json"), "--plot", str(tmp_path / "no.png"))
    assert code == 2 and "needs matplotlib" in err and not (tmp_path / "no.png").exists()


def test_hostile_text_is_inert_in_every_format(tmp_path: Path) -> None:
    doc = json.loads((FIX / "guidellm_benchmarks.json").read_text())
    doc["benchmarks"][0]["args"]["strategy"] = {"type_": "\x1b[2J| **evil** <script>`x`\n# head"}
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    for fmt in ("table", "markdown", "csv", "json"):
        result = CliRunner().invoke(main, ["reconcile", str(path), "--config", CONFIG, "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.stdout
    md = CliRunner().invoke(main, ["reconcile", str(path), "--config", CONFIG, "--format", "markdown"]).stdout
    assert "\\*\\*evil\\*\\*" in md and "\n# head" not in md and "<script>" not in md
    entry = json.loads(CliRunner().invoke(main, ["reconcile", str(path), "--config", CONFIG, "--format",
                                                 "json"]).stdout)["results"][0]
    assert rules(entry)["open_loop"] == "unknown"


def test_bad_config_and_set_are_usage_errors() -> None:
    for args in (["--config", "no-such-config"], ["--config", CONFIG, "--set", "nonsense"]):
        result = CliRunner().invoke(main, ["reconcile", str(FIX / "vllm_serve_rate4.json"), *args])
        assert result.exit_code == 2 and "Traceback" not in result.output


def test_markdown_names_each_run() -> None:
    result = CliRunner().invoke(main, ["reconcile", str(FIX / "sglang_bench_serving_sweep.jsonl"), "--config", CONFIG,
                                       "--format", "markdown"])
    assert result.exit_code == 0
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 3 | sglang | rate inf/s")]
    # 31.5 ms against the physical floor of 21.6 ms per token: 1.46x, above the 1.3 threshold
    assert rows and "| above-floor | kv\\_capacity |" in rows[0]


def edited(tmp_path: Path, name: str, change) -> Path:
    doc = json.loads((FIX / "vllm_serve_rate4.json").read_text())
    change(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_result_for_another_model_is_inconclusive(tmp_path: Path) -> None:
    same = one(FIX / "vllm_serve_rate4.json")  # Qwen/Qwen3-8B against qwen3-8b
    assert same["model"] == {"recorded": "Qwen/Qwen3-8B", "config": "qwen3-8b", "matches": True}
    assert same["verdict"] != "inconclusive"
    other = one(edited(tmp_path, "vl.json", lambda d: d.update(model_id="Qwen/Qwen2.5-VL-3B-Instruct")))
    assert other["model"]["matches"] is False and other["verdict"] == "inconclusive"
    assert other["reasons"][0].startswith("the result is for model Qwen/Qwen2.5-VL-3B-Instruct, the config "
                                          "describes Qwen3-8B")


def test_failed_requests_are_flagged(tmp_path: Path) -> None:
    e = one(edited(tmp_path, "failed.json", lambda d: d.update(failed=40)))
    assert rules(e)["no_failed_requests"] == "broken"
    assert any("40 requests failed of 440 (9.1%)" in r for r in e["reasons"])


def test_itl_is_placed_when_there_is_no_tpot(tmp_path: Path) -> None:
    def no_tpot(d: dict) -> None:
        for k in ("mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms"):
            del d[k]
    with_tpot = one(FIX / "vllm_serve_rate4.json")
    e = one(edited(tmp_path, "itl.json", no_tpot))
    assert e["operating_point"]["latency_source"] == "itl" and e["tpot"]["p50"]["measured_ns"] == 8_900_000
    assert e["reasons"][0].startswith("ITL P50 8.900 ms is") and any("no TPOT in the result" in r for r in e["reasons"])
    assert with_tpot["operating_point"]["latency_source"] == "tpot"


AIPERF = {  # the layout of ai-dynamo/aiperf's JsonExportData (export_models.py), values typed here
    "schema_version": "1.0", "aiperf_version": "0.3.0",
    "request_throughput": {"unit": "requests/sec", "avg": 4.0},
    "request_latency": {"unit": "ms", "avg": 4600.0, "p50": 4550.0, "p99": 5200.0, "std": 120.0},
    "request_count": {"unit": "requests", "avg": 400},
    "error_request_count": {"unit": "requests", "avg": 4},
    "time_to_first_token": {"unit": "ms", "avg": 60.0, "p50": 55.0, "p99": 120.0},
    "inter_token_latency": {"unit": "ms", "avg": 9.2, "p50": 9.1, "p99": 11.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 2000.0},
    "input_sequence_length": {"unit": "tokens", "avg": 1000.0, "std": 100.0},
    "output_sequence_length": {"unit": "tokens", "avg": 500.0, "std": 50.0},
    "benchmark_duration": {"unit": "sec", "avg": 100.0},
    "input_config": {"endpoint": {"model_names": ["Qwen/Qwen3-8B"]}, "loadgen": {"request_rate": 4.0}},
    "was_cancelled": False,
}


def test_aiperf_export_is_read(tmp_path: Path) -> None:
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(AIPERF))
    e = one(path)
    b = e["benchmark"]
    assert (b["tool"], b["model"], b["failed_requests"], b["num_requests"]) == ("aiperf", "Qwen/Qwen3-8B", 4, 400)
    assert (b["tpot_ns_p50"], b["ttft_ns_p99"], b["request_rate_per_s"]) == (9_100_000, 120_000_000, 4.0)
    assert e["operating_point"]["concurrency"] == pytest.approx(4.0 * 4.6)  # Little's law: 4/s x 4.6 s
    assert rules(e)["no_failed_requests"] == "broken" and e["model"]["matches"] is True
