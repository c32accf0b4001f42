"""Steps as serving engines run them, graph-capture traces, and the config's fit to the capture, on small
synthetic Kineto traces whose truth is known by construction (tracekit.analysis.steps, caveats, fit, rocprof)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from fixtures.scenarios import decode_capture
from fixtures.spec import ApiCall, Device, GraphLaunch, Kernel, Process, Range, Thread, TraceSpec
from fixtures.synth import write_kineto
from tracekit import floor
from tracekit.analysis.point import parse_step_name
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

PID = TID = 4242
US = 1_000
H100 = Device(0, "NVIDIA H100 80GB HBM3", 132, 80 * 2**30)
MI300X = Device(0, "", 304, 192 * 2**30, compute_capability=(9, 4))
GEMM = "void deep_gemm::fp8_gemm_kernel<7168u, 2048u, 128u, 128u, 1u>(float*, int)"
DECODE_32 = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk65536sqsq32sqsk65536)"  # context 2048


def spec(kernels: list[Kernel], api_calls: list[ApiCall] = (), ranges: list[Range] = (), device: Device = H100,
         world_size: int = 1) -> TraceSpec:
    return TraceSpec(devices=[device], processes=[Process(PID, "python3")], threads=[Thread(PID, TID, "python3")],
                     kernels=kernels, api_calls=list(api_calls), ranges=list(ranges), rank=0, world_size=world_size)


def kernel(start_ns: int, launch_ns: int | None, api: str = "cudaLaunchKernel", **kw: object) -> Kernel:
    return Kernel(GEMM, 0, 7, start_ns, 100 * US, PID, TID, launch_ns, 5 * US, launch_api=api, **kw)


def engine_steps(name: str = DECODE_32, n: int = 3, api: str = "cudaLaunchKernel", device: Device = H100) -> TraceSpec:
    """``n`` engine steps of two kernels each, every step inside its own annotation."""
    kernels, ranges = [], []
    for i in range(n):
        t = 1_000_000 * (i + 1)
        ranges.append(Range(name, PID, TID, t - 50 * US, t + 400 * US))
        kernels += [kernel(t, t - 40 * US, api), kernel(t + 150 * US, t - 30 * US, api)]
    return spec(kernels, ranges=ranges, device=device)


def analyze(path: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def test_engine_step_names_state_their_operating_point() -> None:
    b200 = parse_step_name("execute_context_1(888_788544)_generation_0(0)")
    assert (b200.phase, b200.batch, b200.context) == ("prefill", 1, 888)
    mixed = parse_step_name("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37("
                            "sq37sk34489sqsq37sqsk34489)")
    # a mixed step: its decode side (37 requests, 34489 / 37 KV tokens each) and its prefill side (9, 8155)
    assert (mixed.phase, mixed.batch, mixed.context) == ("mixed", 37, 932)
    assert (mixed.prefill_requests, mixed.prefill_tokens) == (9, 8155)
    decode = parse_step_name(DECODE_32)
    assert (decode.phase, decode.batch, decode.context) == ("decode", 32, 2048)
    assert parse_step_name("step[DECODE bs=32]").batch == 32
    extend = parse_step_name("step[EXTEND bs=15 toks=15360]")  # SGLang's prefill, as its traces write it
    assert (extend.phase, extend.batch, extend.context, extend.prefill_tokens) == ("prefill", 15, 1024, 15360)
    assert parse_step_name("ProfilerStep#3") is None


def test_engine_annotations_are_the_steps_and_fit_the_config(tmp_path: Path) -> None:
    path = write_kineto(engine_steps(), tmp_path / "t.json")
    _, report = analyze(path, "--config", "qwen3-8b-tp1-h100")  # decode, batch 32, context 2048, 1x H100
    assert report["steps"]["source"] == ["engine_annotation"] and report["steps"]["count"] == 3
    fit = report["fit"]
    assert fit["gpu"]["identified_as"] == "h100" and fit["reasons"] == [] and fit["overrides"] == {}
    assert fit["operating_point"] == {"phase": "decode", "batch": 32, "context": 2048,
                                      "source": "vLLM step annotation (3 annotations)",
                                      "detail": "32 decode requests, 65536 KV tokens",
                                      "prefill_requests": None, "prefill_tokens": None}


def test_an_operating_point_beyond_twice_the_configs_is_a_reason_unless_given(tmp_path: Path) -> None:
    path = write_kineto(engine_steps(), tmp_path / "t.json")
    code, report = analyze(path, "--config", "qwen3-8b-tp1-h100", "--context", "8192", "--gate")
    assert report["fit"]["reasons"] == [] and report["floor"] is not None  # the user's --context wins
    near = DECODE_32.replace("sk65536", "sk98304")  # context 3072: within 2x of 2048, the floor takes it
    _, report = analyze(write_kineto(engine_steps(near), tmp_path / "n.json"), "--config", "qwen3-8b-tp1-h100")
    assert report["fit"]["overrides"] == {"context_tokens": "3072"}
    assert report["config"]["effective"]["context_tokens"] == 3072
    far = DECODE_32.replace("sk65536", "sk262144")  # context 8192: 4x the config's
    code, report = analyze(write_kineto(engine_steps(far), tmp_path / "f.json"), "--config", "qwen3-8b-tp1-h100",
                           "--gate")
    assert report["verdict"] == "inconclusive" and code == 12
    assert any("context is 8192 but the config's is 2048" in r for r in report["reasons"])


def test_another_gpu_or_world_size_is_a_reason_and_another_serving_phase_is_taken_from_the_engine(
        tmp_path: Path) -> None:
    prefill = "execute_context_2(4096_8388608)_generation_0(0)"
    path = write_kineto(replace(engine_steps(prefill), world_size=8), tmp_path / "t.json")
    _, report = analyze(path, "--config", "qwen3-8b-tp1-mi300x")
    reasons = " | ".join(report["reasons"])
    assert report["verdict"] == "inconclusive"
    assert "NVIDIA H100 80GB HBM3" in reasons and "mi300x" in reasons
    assert "world size is 8" in reasons and "prefill step" not in reasons
    # the engine states a 2 x 2048-token prefill: the floor models that step on the decode config's deployment
    _, fits = analyze(write_kineto(engine_steps(prefill), tmp_path / "p.json"), "--config", "qwen3-8b-tp1-h100")
    assert fits["fit"]["reasons"] == []
    assert fits["fit"]["overrides"] == {"phase": "prefill", "batch": "2", "context_tokens": "2048"}
    assert fits["config"]["effective"]["phase"] == "prefill"
    # a phase the user sets is theirs: then another phase is a reason again
    _, given = analyze(write_kineto(engine_steps(prefill), tmp_path / "g.json"), "--config", "qwen3-8b-tp1-h100",
                       "--set", "phase=decode")
    assert any("prefill step but the config describes decode" in r for r in given["reasons"])


def test_an_unnamed_amd_gpu_is_identified_by_its_properties(tmp_path: Path) -> None:
    path = write_kineto(engine_steps(api="hipLaunchKernel", device=MI300X), tmp_path / "t.json")
    _, report = analyze(path, "--config", "qwen3-8b-tp1-h100")
    assert report["fit"]["gpu"]["identified_as"] == "mi300x"
    assert any("an AMD GPU, but the config describes h100 (NVIDIA)" in r for r in report["reasons"])


def test_device_information_that_contradicts_itself_is_a_caveat_not_a_crash(tmp_path: Path) -> None:
    path = write_kineto(engine_steps(api="hipLaunchKernel"), tmp_path / "t.json")  # "NVIDIA H100" on HIP
    code, report = analyze(path, "--config", "qwen3-8b-tp1-h100")
    assert code == 0
    assert any("contradicts itself" in c for c in report["caveats"])
    assert any(n.startswith("hardware not checked") for n in report["fit"]["notes"])


def test_no_device_information_means_hardware_not_checked(tmp_path: Path) -> None:
    path = write_kineto(engine_steps(), tmp_path / "t.json")
    doc = json.loads(path.read_text())
    del doc["deviceProperties"]
    path.write_text(json.dumps(doc))
    _, report = analyze(path, "--config", "qwen3-8b-tp1-h100")
    assert any(n.startswith("hardware not checked") for n in report["fit"]["notes"])


def test_the_graph_launches_of_one_host_step_are_one_step(tmp_path: Path) -> None:
    """Piecewise graphs: three graph launches per forward, a sync at its end; no step annotation."""
    kernels, calls = [], []
    for step in range(4):
        t = 2_000_000 * (step + 1)
        for piece in range(3):
            g = GraphLaunch(10 * step + piece, PID, TID, t - 90 * US + piece * 10 * US, 5 * US)
            kernels += [replace(kernel(t + piece * 300 * US + j * 120 * US, None), graph_launch=g,
                                graph_node_id=j + 1) for j in range(2)]
        calls.append(ApiCall("cudaStreamSynchronize", PID, TID, t + 950 * US, 50 * US))
    _, report = analyze(write_kineto(spec(kernels, calls), tmp_path / "t.json"))
    assert report["steps"]["source"] == ["graph_launch"] and report["steps"]["count"] == 4


def capture_only(tmp_path: Path) -> Path:
    calls = [ApiCall("cudaStreamBeginCapture", PID, TID, 1_000_000, 5 * US)]
    calls += [ApiCall("cudaLaunchKernel", PID, TID, 1_010_000 + i * 10 * US, 5 * US) for i in range(40)]
    calls.append(ApiCall("cudaStreamEndCapture", PID, TID, 1_500_000, 5 * US))
    return write_kineto(spec([kernel(2_000_000, 1_900_000)], calls), tmp_path / "capture.json")


def test_a_graph_capture_trace_is_said_and_refused(tmp_path: Path) -> None:
    code, report = analyze(capture_only(tmp_path), "--config", "qwen3-8b-tp1-h100", "--gate")
    assert report["verdict"] == "inconclusive" and code == 12 and report["steps"]["capture_only"]
    assert report["reasons"] == [r for r in report["caveats"] if "graph-capture trace" in r]
    assert "40 kernel launches were captured" in report["reasons"][0]


def test_diff_against_a_graph_capture_trace_never_passes_a_gate(tmp_path: Path) -> None:
    real = write_kineto(engine_steps(), tmp_path / "real.json")
    capture = capture_only(tmp_path)
    result = CliRunner().invoke(main, ["diff", str(real), str(capture), "--no-cache", "--format", "json",
                                       "--fail-if-slower", "5%"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 12 and doc["inconclusive"] and doc["gate"]["exit_status"] == 12
    plain = CliRunner().invoke(main, ["diff", str(real), str(real), "--no-cache", "--format", "json",
                                      "--fail-if-slower", "5%"])
    assert plain.exit_code == 0 and json.loads(plain.stdout)["inconclusive"] == []


def test_a_serving_engine_capture_is_a_late_start(tmp_path: Path) -> None:
    _, report = analyze(write_kineto(engine_steps(), tmp_path / "t.json"))
    assert any("starts at a serving engine's profiler start" in c for c in report["caveats"])


def test_hip_kernels_get_rocprofv3_commands_never_ncu(tmp_path: Path) -> None:
    config, on_amd = "dsv32-ep16", {"hardware": "mi300x"}  # the planted decode, as if on 16 MI300X
    budgets = class_budgets(floor.compute_floor(load_config(config, on_amd)).parts, load_rules())
    planted, _ = decode_capture(budgets, slow_class="moe_experts", slow_factor=2.0)
    amd = replace(planted, devices=[MI300X],
                  kernels=[replace(k, launch_api="hipLaunchKernel") for k in planted.kernels])
    _, report = analyze(write_kineto(amd, tmp_path / "amd.json"), "--config", config, "--set", "hardware=mi300x")
    assert report["verdict"] == "kernel" and report["ncu_targets"]
    for t in report["ncu_targets"]:
        args = shlex.split(t["command"])
        assert t["tool"] == "rocprofv3" and args[0] == "rocprofv3" and "ncu" not in args
        n = t["launch_skip"] + 1
        assert args[args.index("--kernel-iteration-range") + 1] == f"[{n}-{n}]"
        assert args[args.index("--kernel-include-regex") + 1].startswith("^")
    nv_budgets = class_budgets(floor.compute_floor(load_config(config)).parts, load_rules())
    nv, _ = decode_capture(nv_budgets, slow_class="attn_core")
    _, nvidia = analyze(write_kineto(nv, tmp_path / "nv.json"), "--config", config)
    assert nvidia["ncu_targets"] and all(t["tool"] == "ncu" for t in nvidia["ncu_targets"])


def test_attention_input_shapes_state_batch_and_context(tmp_path: Path) -> None:
    """No engine annotation: SDPA's q [B, H, 1, D] and k [B, H, S, D] say decode at batch B, context S."""
    path = write_kineto(spec([kernel(1_000_000, 900_000)]), tmp_path / "t.json")
    doc = json.loads(path.read_text())
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_dot_product_flash_attention",
                               "pid": PID, "tid": TID, "ts": 800.0, "dur": 50.0,
                               "args": {"Input Dims": [[32, 32, 1, 128], [32, 8, 2048, 128], [32, 8, 2048, 128]]}})
    path.write_text(json.dumps(doc))
    _, report = analyze(path, "--config", "qwen3-8b-tp1-h100")
    point = report["fit"]["operating_point"]
    assert (point["phase"], point["batch"], point["context"]) == ("decode", 32, 2048)
    assert point["source"] == "attention input shapes (aten::_scaled_dot_product_flash_attention)"
