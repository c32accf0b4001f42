"""The step as the host step joined with its GPU work, and waits on work outside the trace left out of it, on
small synthetic Kineto traces whose truth is known by construction (tracekit.analysis.steps, waits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.spec import ApiCall, Device, Kernel, Process, Range, Thread, TraceSpec
from fixtures.synth import write_kineto
from tracekit.cli import main

PID = TID = 4242
US, MS = 1_000, 1_000_000
H100 = Device(0, "NVIDIA H100 80GB HBM3", 132, 80 * 2**30)
GEMM = "void deep_gemm::fp8_gemm_kernel<7168u, 2048u, 128u, 128u, 1u>(float*, int)"


def kernel(start_ns: int, launch_ns: int, dur_ns: int = 100 * US) -> Kernel:
    return Kernel(GEMM, 0, 7, start_ns, dur_ns, PID, TID, launch_ns, 5 * US)


def write(tmp_path: Path, kernels: list[Kernel], ranges: list[Range], calls: list[ApiCall] = ()) -> Path:
    spec = TraceSpec(devices=[H100], processes=[Process(PID, "python3")], threads=[Thread(PID, TID, "python3")],
                     kernels=kernels, api_calls=list(calls), ranges=ranges, rank=0, world_size=1)
    return write_kineto(spec, tmp_path / "t.json")


def analyze(path: Path) -> dict:
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_host_time_before_the_first_kernel_is_the_steps_with_its_cause(tmp_path: Path) -> None:
    """Two profiler steps, each 8 ms of data loading (a host range) before 2 ms of kernels."""
    kernels, ranges = [], []
    for i in range(3):
        t = 20 * MS * i
        ranges += [Range(f"ProfilerStep#{i}", PID, TID, t, t + 10 * MS), Range("load_batch", PID, TID, t, t + 8 * MS)]
        kernels += [kernel(t + 8 * MS + 100 * US, t + 8 * MS + 50 * US, 1 * MS),
                    kernel(t + 9 * MS + 100 * US, t + 8 * MS + 60 * US, 1 * MS)]
    report = analyze(write(tmp_path, kernels, ranges))
    assert report["steps"]["source"] == ["profiler_step"] and report["steps"]["count_per_rank"] == {"0": 3}
    assert report["steps"]["step_ns_p50"] == 20 * MS  # from one step's host start to the next one's
    head = report["host_gaps"]["before_first_kernel"]
    assert head["ns"] == 8 * MS + 100 * US  # from the host step's start to its first kernel
    assert head["by_cause"]["host_code"] == 8 * MS and head["longest"]["host"]["range"] == "load_batch"
    assert report["host_gaps"]["statistic"] == "median over steps"


def test_a_step_whose_gpu_work_runs_behind_the_host_is_not_moved_before_it(tmp_path: Path) -> None:
    """GPU-bound: each host step is over before its kernels run; windows stay on the GPU work."""
    kernels, ranges = [], []
    for i in range(4):
        t = 1 * MS * i
        ranges.append(Range(f"ProfilerStep#{i}", PID, TID, t, t + 100 * US))
        kernels.append(kernel(15 * US + 3 * MS * i, t + 10 * US, 3 * MS))  # back to back on the GPU
    report = analyze(write(tmp_path, kernels, ranges))
    # steps 1 and 2 are their 3 ms of GPU work (step 0 also holds its 15 us of host time before its kernel)
    assert report["steps"]["step_ns_p50"] == 3 * MS and report["host_gaps"]["total_ns"] == 0
    assert report["steps"]["step_ns_p99"] == pytest.approx(3 * MS + 15 * US, abs=1 * US)


@pytest.mark.parametrize("busy", [False, True])
def test_a_blocking_call_the_trace_cannot_explain_is_left_out(tmp_path: Path, busy: bool) -> None:
    """A 50 ms cudaStreamSynchronize at the step's start; the device runs nothing of the trace meanwhile
    (left out), or a kernel the sync waits for (explained: kept, the step is GPU time)."""
    t0 = 10 * MS
    sync = ApiCall("cudaStreamSynchronize", PID, TID, t0 + 100 * US, 50 * MS)
    kernels = [kernel(t0 + 50 * US, t0 + 10 * US, 20 * US)]
    if busy:
        kernels.append(kernel(t0 + 200 * US, t0 + 90 * US, 49_900 * US - 200 * US))
    after = t0 + 50 * MS + 200 * US
    kernels += [kernel(after, after - 50 * US, 2 * MS)]
    report = analyze(write(tmp_path, kernels, [Range("ProfilerStep#1", PID, TID, t0, after + 2 * MS)], [sync]))
    waits = report["steps"]["outside_waits"]
    if busy:
        assert waits == [] and report["steps"]["step_ns_p50"] == pytest.approx(52.2 * MS, rel=0.01)
    else:
        [w] = waits
        assert (w["kind"], w["api_call"]) == ("blocking_call", "cudaStreamSynchronize")
        assert w["dur_ns"] == pytest.approx(50 * MS, rel=0.01)
        assert report["steps"]["step_ns_p50"] == pytest.approx(2.2 * MS, rel=0.05)  # the wait left out
        assert any("cudaStreamSynchronize blocked" in c for c in report["caveats"])


def test_pytorch_graph_annotations_attribute_replayed_kernels(tmp_path: Path) -> None:
    """A graph replay whose kernels carry PyTorch's cuda_graph_annotations (graph node id, module_fqn)."""
    from dataclasses import replace

    from fixtures.spec import GraphLaunch

    g = GraphLaunch(1, PID, TID, 1 * MS, 5 * US)
    kernels = [replace(kernel(2 * MS + j * 200 * US, None), graph_launch=g, graph_node_id=j + 1) for j in range(4)]
    path = write(tmp_path, kernels, [Range("ProfilerStep#1", PID, TID, 900 * US, 3 * MS)])
    plain = analyze(path)["graphs"]
    assert plain["attributed_fraction"] == 0 and any("enable-profile-cuda-graph" in h
                                                     for h in plain["how_to_attribute"])
    doc = json.loads(path.read_text())
    modules = iter(["layers.0.attention", "layers.0.attention", "layers.0.mlp", "layers.0.mlp"])
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"] |= {"graph node id": 7, "module_fqn": next(modules)}
    path.write_text(json.dumps(doc))
    graphs = analyze(path)["graphs"]
    assert graphs["attributed_kernels"] == 4 and graphs["attributed_fraction"] == 1.0
    assert {m["module"] for m in graphs["top_modules"]} == {"layers.0.attention", "layers.0.mlp"}
    assert graphs["how_to_attribute"] == []


def test_nsys_graph_node_records_give_replayed_kernels_their_capturing_op(tmp_path: Path) -> None:
    """--cuda-graph-trace=node: kernels carry their executable node; CUDA_GRAPH_NODE_EVENTS records each node's
    creation during capture (on the thread, inside the op's NVTX range) and the clones instantiation made."""
    import sqlite3
    from dataclasses import replace

    from fixtures.spec import GraphLaunch
    from fixtures.synth import write_nsys
    from fixtures.synth_nsys import global_tid

    g = GraphLaunch(1, PID, TID, 10 * MS, 5 * US)
    kernels = [replace(kernel(11 * MS + j * 200 * US, None), graph_launch=g, graph_node_id=101 + j) for j in range(2)]
    ops = [Range("aten::mm, op_id = 1", PID, TID, 1 * MS, 2 * MS),
           Range("aten::add, op_id = 2", PID, TID, 3 * MS, 4 * MS)]
    spec = TraceSpec(devices=[H100], processes=[Process(PID, "python3")], threads=[Thread(PID, TID, "python3")],
                     kernels=kernels, ranges=[*ops, Range("ProfilerStep#1", PID, TID, 9 * MS, 12 * MS)], rank=0,
                     world_size=1)
    path = write_nsys(spec, tmp_path / "t.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE CUDA_GRAPH_NODE_EVENTS (start INTEGER NOT NULL, end INTEGER, eventClass INTEGER, "
                   "globalTid INTEGER, nameId INTEGER, graphNodeId INTEGER, originalGraphNodeId INTEGER)")
        gtid = global_tid(PID, TID)
        db.executemany("INSERT INTO CUDA_GRAPH_NODE_EVENTS VALUES (?, ?, 77, ?, NULL, ?, ?)", [
            (int(1.5 * MS), int(1.5 * MS) + 10, gtid, 1, None), (int(3.5 * MS), int(3.5 * MS) + 10, gtid, 2, None),
            (5 * MS, 5 * MS + 10, gtid, 101, 1), (5 * MS, 5 * MS + 10, gtid, 102, 2)])
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    graphs = json.loads(result.stdout)["graphs"]
    assert graphs["replayed_kernels"] == 2 and graphs["attributed_fraction"] == 1.0
    assert {m["module"] for m in graphs["top_modules"]} == {"aten::mm, op_id = 1", "aten::add, op_id = 2"}
