"""Op floor coverage: replayed graph kernels get their capturing op's floor, the engines' ops have work models,
NVTX ranges with shapes (nsys --pytorch=autograd-shapes-nvtx) are ops with shapes, and no op instance on any
shared trace that records shapes beats its floor (one analysis per trace, module-scoped)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from fixtures.spec import Device, Kernel, Process, Range, Thread, TraceSpec
from fixtures.synth_nsys import write_nsys
from tracekit.cli import main
from tracekit.floor.ops import UNRECORDED_DTYPE, op_work
from tracekit.parsers.nsys_shapes import UNRECORDED_DTYPE as READ_DTYPE
from tracekit.parsers.nsys_shapes import read_nvtx_shapes
from tracekit.parsers.schema import create_tables

VLLM_PIECEWISE = ("torch/tracelens__vllm_prefilldecode_piecewise",)
SGLANG_DECODE = ("torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
                 "torch/tracelens__sglang_decode_capture/bs_32_rank0.json.gz")
B200 = ("torch/tracelens__b200__eager_trace.json.gz",)
SGLANG_PREFILL = ("torch/tracelens__sglang_prefilldecode__sglang_Qwen3-8B_prefilldecode.json.gz",)
FLUX = ("torch/tracelens__xdit_flux1_aiter_sage__profile_trace_rank_0.json.gz",)
VLLM_FULL = ("torch/tracelens__inference__vllm_decode_full__graph_execution.json.gz",)
#: the shared traces that record shapes and are not analysed in test_opfloor.py
TRACES = (VLLM_PIECEWISE, SGLANG_DECODE, B200, SGLANG_PREFILL, FLUX, VLLM_FULL)


@pytest.fixture(scope="module")
def reports(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], dict]:
    cache = tmp_path_factory.mktemp("coverage-cache")
    out = {}
    for group in TRACES:
        args = ["analyze", *(str(shared_traces / p) for p in group), "--format", "json", "-q", "--cache-dir",
                str(cache)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        out[group] = json.loads(result.stdout)
    return out


def _ops(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in report["op_floor"]["ops"]:
        out.setdefault(row["op"], []).append(row)
    return out


@pytest.mark.parametrize("group", TRACES, ids=lambda g: Path(g[0]).name.split("__")[1][:24])
def test_no_op_instance_beats_its_floor(reports: dict, group: tuple[str, ...]) -> None:
    op = reports[group]["op_floor"]
    assert op is not None and op["min_instance_ratio"]["ratio"] >= 1.0, op["min_instance_ratio"]


def test_vllm_piecewise_replays_get_their_capturing_ops_floors(reports: dict) -> None:
    """361 replayed kernels (25 graph launches) get the capture's ops: 4 % of the step had a floor before."""
    r = reports[VLLM_PIECEWISE]
    assert r["graphs"]["attributed_kernels"] == r["graphs"]["replayed_kernels"] == 361
    assert r["op_floor"]["covered_fraction"] >= 0.9
    ops = _ops(r)
    moe = ops["vllm::moe_forward"][0]  # owns the routing, sorting and expert GEMM kernels under it
    assert moe["family"] == "moe" and moe["floor_model"] == "bytes only" and moe["instances_per_step"] == 24
    assert moe["class"] == "moe_experts"
    # one unit per layer and replay: the 24 layers' QKV projections are 24 instances, not one
    assert any(row["instances_per_step"] == 24 and row["family"] == "gemm" for row in ops["aten::linear"])
    # but moe_forward's floor is a bytes bound (its expert weights are not among its inputs): no verdict rests on it
    assert r["op_floor"]["tight_fraction"] < 0.8 and r["verdict"] == "inconclusive" and r["floor_used"] is None
    assert "bounds only" in r["reasons"][0] and "vllm::moe_forward" in r["reasons"][0]


def test_sglang_decode_graph_gets_its_capture_shapes(reports: dict) -> None:
    r = reports[SGLANG_DECODE]
    assert r["graphs"]["attributed_kernels"] == r["graphs"]["replayed_kernels"] == 544
    assert r["op_floor"]["covered_fraction"] >= 0.9
    linear = {row["shapes"]: row for row in _ops(r)["aten::linear"]}
    assert linear["M 32 N 24576 K 4096"]["instances_per_step"] == 36  # 36 layers' gate and up projection
    assert r["model_shape"]["hidden"] == 4096  # Qwen3-8B, inferred from the capture's projections


def test_b200_moe_forward_has_a_floor(reports: dict) -> None:
    r = reports[B200]
    assert r["op_floor"]["covered_fraction"] >= 0.9
    moe = _ops(r)["vllm::moe_forward"][0]
    assert moe["family"] == "moe" and moe["ratio"] > 1
    assert r["verdict"] == "inconclusive" and "vllm::moe_forward" in r["reasons"][0]
    # its tensor-parallel all-reduces stay communication, even those launched inside the attention module
    # (73 multimem_all_reduce kernels, 2.12 ms: 36 of them, 0.90 ms, were attn_core)
    assert r["op_floor"]["classes"]["allreduce"]["measured_ns"] > 2.1e6


def test_sglang_prefill_engine_ops_have_floors(reports: dict) -> None:
    r = reports[SGLANG_PREFILL]
    assert r["op_floor"]["covered_fraction"] >= 0.99
    ops = _ops(r)
    assert ops["aiter::mha_batch_prefill"][0]["floor_model"] == "flops and bytes"
    assert ops["aiter::mha_batch_prefill"][0]["class"] == "attn_core"
    assert {row["family"] for row in ops["aiter::rmsnorm"]} == {"norm"}
    assert r["op_floor"]["tight_fraction"] >= 0.99 and r["floor_used"] == "op" and r["verdict"] == "kernel"


def test_flux_compiled_region_records_no_shapes(reports: dict) -> None:
    """FLUX's transformer runs in one torch.compile region whose kernels (hipBLASLt GEMMs, sage_fwd, Triton) have
    no op of their own: no shapes, no floor. The report names it as the largest op without one."""
    op = reports[FLUX]["op_floor"]
    assert op["covered_fraction"] < 0.2 and op["unmodelled"][0]["op"] == "Torch-Compiled Region: 0/0"


def test_fused_moe_with_weights_counts_the_routed_gemms_and_top_k_experts_weights() -> None:
    t, h, e, inter, k = 64, 1024, 8, 512, 2
    work = op_work("vllm::outplace_fused_experts", [[t, h], [e, 2 * inter, h], [e, h, inter], [t, k], [t, k]],
                   ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "float", "int"])
    assert work.family == "moe" and work.flops == 2.0 * t * k * (2 * inter * h + h * inter)
    weights = k * (2 * inter * h + h * inter) * 2  # only k experts are sure to be used
    assert work.hbm_bytes == t * h * 2 * 2 + t * k * 4 * 2 + weights


def test_paged_prefill_attention_is_at_least_equal_causal_sequences() -> None:
    dims = [[2048, 32, 128], [100000, 8, 128], [100000, 8, 128], [3], [3], [2100]] + [[]] * 7
    concrete = ["", "", "", "", "", "", "1024", "1024", "0.", "0.088", "0.", "False", "True"]
    work = op_work("aiter::mha_batch_prefill", dims, ["c10::BFloat16"] * 3 + ["int"] * 3 + ["Scalar"] * 7, None,
                   concrete)
    # two sequences of 1024 new tokens, causal: each sees 1024*1025/2 keys at least
    assert work.flops == 2.0 * 32 * 256 * 2 * 1024 * 1025 / 2
    assert work.hbm_bytes == 2 * 2048 * 32 * 128 * 2 + 2048 * 8 * 256 * 2  # q, out, each new token's k and v


SIZES = "aten::mm, seq = 7, op_id = 12, sizes = [[4096, 4096], [4096, 4096]], input_op_ids = [(10,0), (11,0)]"


def test_nvtx_op_ranges_with_sizes_become_ops_with_shapes() -> None:
    con = duckdb.connect()
    create_tables(con)
    texts = [SIZES, "aten::add, op_id = 13", "aten::cat, sizes = [[2, 3], [], [4, 5]]", "ProfilerStep#1"]
    for i, text in enumerate(texts):
        con.execute("INSERT INTO ranges (pid, tid, start_ns, end_ns, name, source, kind) VALUES "
                    "(1, 1, ?, ?, ?, 'nvtx', 'range')", [i * 10, i * 10 + 5, text])
    assert read_nvtx_shapes(con) == 2
    assert con.execute("SELECT name, input_dims, input_types FROM op_shapes ORDER BY start_ns").fetchall() == [
        ("aten::mm", "[[4096,4096],[4096,4096]]", json.dumps([READ_DTYPE, READ_DTYPE])),
        ("aten::cat", "[[2,3],[],[4,5]]", json.dumps([READ_DTYPE, "", READ_DTYPE]))]
    assert con.execute("SELECT name, kind FROM ranges ORDER BY start_ns").fetchall() == [
        ("aten::mm", "op"), ("aten::add, op_id = 13", "range"), ("aten::cat", "op"), ("ProfilerStep#1", "range")]
    assert READ_DTYPE == UNRECORDED_DTYPE  # the floor counts one byte and the FP8 peak for it: a lower bound


def test_an_nsys_trace_with_nvtx_shapes_gets_an_op_floor(tmp_path: Path) -> None:
    """Three profiler steps of one 4096^3 GEMM each inside PyTorch's NVTX op range with sizes."""
    pid = tid = 77
    us = 1000
    kernels, ranges = [], []
    for i in range(3):
        t = 1000 * us * i
        ranges += [Range(f"ProfilerStep#{i}", pid, tid, t, t + 400 * us), Range(SIZES, pid, tid, t + 10 * us,
                                                                                 t + 40 * us)]
        kernels.append(Kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0, 7, t + 50 * us,
                              300 * us, pid, tid, t + 20 * us, 5 * us))
    spec = TraceSpec(devices=[Device(0, "NVIDIA H100 80GB HBM3", 132, 80 * 2**30)],
                     processes=[Process(pid, "python3")], threads=[Thread(pid, tid, "python3")],
                     kernels=kernels, ranges=ranges)
    path = write_nsys(spec, tmp_path / "shapes.sqlite")
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    op = json.loads(result.stdout)["op_floor"]
    assert op is not None and op["covered_fraction"] == 1.0
    row = op["ops"][0]
    assert row["op"] == "aten::mm" and row["family"] == "gemm" and row["flops"] == 2.0 * 4096**3
    assert row["hbm_bytes"] == 3 * 4096 * 4096  # one byte an element: NVTX records no dtype
    assert op["min_instance_ratio"]["ratio"] >= 1.0
