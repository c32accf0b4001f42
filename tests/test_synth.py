"""Golden checks of the synthetic trace generator: what a spec asks for is what the files hold.

Read back with stdlib ``sqlite3`` and ``json`` only, so these tests vouch for the fixtures
independently of tracekit's own readers.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from fixtures.synth import (
    ApiCall,
    Device,
    GraphLaunch,
    Kernel,
    MemOp,
    Process,
    Range,
    Thread,
    TraceSpec,
    global_tid,
    short_kernel_name,
    write_kineto,
    write_nsys,
    write_nsys_bulk,
)

GEMM = (
    "void deep_gemm::fp8_gemm_kernel<4096u, 7168u>(__nv_bfloat16*, float*, int*, unsigned int, CUtensorMap)"
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GRAPH = GraphLaunch(graph_id=3, pid=100, tid=100, start_ns=20_000, dur_ns=400)


def small_spec() -> TraceSpec:
    """Two processes on two GPUs: runtime, driver, graph and out-of-capture launches, memops, NVTX."""
    return TraceSpec(
        devices=[
            Device(0, "NVIDIA H100 80GB HBM3", 132, 85_520_809_984),
            Device(1, "NVIDIA H100 80GB HBM3", 132, 85_520_809_984),
        ],
        processes=[Process(100, "python3"), Process(200, "python3")],
        threads=[Thread(100, 100, "python3"), Thread(100, 105, "pt_autograd_0"), Thread(200, 200, "python3")],
        kernels=[
            Kernel("early_kernel", 0, 7, 500, 300, 100, 100, None, 0),
            Kernel(
                GEMM,
                0,
                7,
                2_000,
                1_000,
                100,
                100,
                1_000,
                400,
                launch_api="cuLaunchKernelEx",
                grid=(132, 1, 1),
                block=(384, 1, 1),
            ),
            Kernel(
                NCCL,
                0,
                13,
                3_500,
                2_000,
                100,
                105,
                3_000,
                200,
                launch_api="cuLaunchKernelEx",
                grid=(32, 1, 1),
                block=(640, 1, 1),
            ),
            Kernel("rms_norm_kernel", 1, 7, 1_800, 250, 200, 200, 1_200, 300),
            Kernel("graph_a", 0, 7, 20_500, 100, 100, 100, None, 0, graph_launch=GRAPH, graph_node_id=1),
            Kernel("graph_b", 0, 7, 20_700, 100, 100, 100, None, 0, graph_launch=GRAPH, graph_node_id=2),
        ],
        memops=[
            MemOp("memcpy", "HtoD", 4096, 0, 7, 6_000, 400, 100, 100, 5_500, 300),
            MemOp("memset", None, 512, 0, 7, 6_500, 20, 100, 100, 6_400, 50),
        ],
        api_calls=[ApiCall("cudaStreamSynchronize", 100, 100, 7_000, 3_000, device_id=0, stream_id=7)],
        ranges=[
            Range("ProfilerStep#1", 100, 100, 800, 10_500),
            Range("ncclAllReduce", 100, 105, 2_900, 3_300, domain="NCCL", registered=True),
            Range("ProfilerStep#1", 200, 200, 1_100, 2_500),
        ],
    )


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def nsys_file(tmp_path: Path) -> Path:
    return write_nsys(small_spec(), tmp_path / "small.sqlite")


def test_nsys_kernels_join_their_launches_by_process_and_correlation(nsys_file: Path) -> None:
    rows = query(
        nsys_file,
        """
        SELECT k.start, k."end", k.deviceId, k.streamId, (k.globalPid >> 24) & 16777215, d.value, s.value,
               k.gridX, k.blockX, r.start, r."end", n.value, r.eventClass, r.globalTid & 16777215
        FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName
        LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = k.correlationId AND k.globalPid = (r.globalTid >> 24) << 24
        LEFT JOIN StringIds n ON n.id = r.nameId
        ORDER BY k.start""",
    )
    assert rows == [
        (500, 800, 0, 7, 100, "early_kernel", "early_kernel", 1, 128, None, None, None, None, None),
        (
            1800,
            2050,
            1,
            7,
            200,
            "rms_norm_kernel",
            "rms_norm_kernel",
            1,
            128,
            1200,
            1500,
            "cudaLaunchKernel_v7000",
            0,
            200,
        ),
        (2000, 3000, 0, 7, 100, GEMM, "fp8_gemm_kernel", 132, 384, 1000, 1400, "cuLaunchKernelEx", 1, 100),
        (
            3500,
            5500,
            0,
            13,
            100,
            NCCL,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            32,
            640,
            3000,
            3200,
            "cuLaunchKernelEx",
            1,
            105,
        ),
        (
            20500,
            20600,
            0,
            7,
            100,
            "graph_a",
            "graph_a",
            1,
            128,
            20000,
            20400,
            "cudaGraphLaunch_v10000",
            0,
            100,
        ),
        (
            20700,
            20800,
            0,
            7,
            100,
            "graph_b",
            "graph_b",
            1,
            128,
            20000,
            20400,
            "cudaGraphLaunch_v10000",
            0,
            100,
        ),
    ]
    # correlation ids count per process, so they repeat across processes (pitfall P1)
    shared = query(
        nsys_file,
        """SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL
        GROUP BY correlationId HAVING count(DISTINCT globalPid) > 1""",
    )
    assert shared == [(1,)]
    graph = query(
        nsys_file, "SELECT graphNodeId, graphId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphId IS NOT NULL"
    )
    assert graph == [(1, 3), (2, 3)]


def test_nsys_ids_memops_sync_and_nvtx(nsys_file: Path) -> None:
    assert global_tid(100, 105) == (1 << 48) | (100 << 24) | 105
    assert query(nsys_file, "SELECT globalPid, pid FROM PROCESSES") == [
        ((1 << 48) | (100 << 24), 100),
        ((1 << 48) | (200 << 24), 200),
    ]
    assert query(
        nsys_file, "SELECT s.value, t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
    ) == [
        ("python3", global_tid(100, 100)),
        ("pt_autograd_0", global_tid(100, 105)),
        ("python3", global_tid(200, 200)),
    ]
    assert query(
        nsys_file, 'SELECT start, "end", bytes, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY'
    ) == [(6000, 6400, 4096, 1, 1, 2)]
    assert query(nsys_file, 'SELECT start, "end", bytes, memKind FROM CUPTI_ACTIVITY_KIND_MEMSET') == [
        (6500, 6520, 512, 2)
    ]
    sync = query(
        nsys_file,
        """
        SELECT y.start, y."end", y.streamId, y.syncType, n.value FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = y.correlationId AND y.globalPid = (r.globalTid >> 24) << 24
        JOIN StringIds n ON n.id = r.nameId""",
    )
    assert sync == [(7000, 10000, 7, 3, "cudaStreamSynchronize_v3020")]
    nvtx = query(
        nsys_file,
        """
        SELECT e.start, e."end", e.eventType, coalesce(e.text, s.value), e.domainId, e.globalTid & 16777215
        FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId ORDER BY e.rowid""",
    )
    assert nvtx == [
        (800, 10500, 59, "ProfilerStep#1", 0, 100),
        (1100, 2500, 59, "ProfilerStep#1", 0, 200),
        (2900, None, 75, "NCCL", 1, 105),
        (2900, 3300, 59, "ncclAllReduce", 1, 105),
    ]
    assert query(
        nsys_file, "SELECT text, textId IS NOT NULL FROM NVTX_EVENTS WHERE domainId = 1 AND eventType = 59"
    ) == [(None, 1)]


def test_nsys_metadata_devices_and_lazy_tables(nsys_file: Path, tmp_path: Path) -> None:
    meta = dict(query(nsys_file, "SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["EXPORT_SCHEMA_VERSION"] == "3.25.0"
    assert query(nsys_file, "SELECT id, name, smCount, totalMemory FROM TARGET_INFO_GPU") == [
        (0, "NVIDIA H100 80GB HBM3", 132, 85_520_809_984),
        (1, "NVIDIA H100 80GB HBM3", 132, 85_520_809_984),
    ]
    assert query(nsys_file, "SELECT gpuId, pid FROM TARGET_INFO_CUDA_DEVICE") == [(0, 100), (1, 200)]
    assert query(
        nsys_file, "SELECT count(*) FROM ENUM_CUDA_MEMCPY_OPER WHERE id = 1 AND label = 'Host-to-Device'"
    ) == [(1,)]
    kernel_ddl = query(nsys_file, "SELECT sql FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")[
        0
    ][0]
    assert "tensorSizeMinusOneElements   TEXT      NOT NULL" in kernel_ddl

    bare = TraceSpec(devices=[], processes=[Process(1, "p")], threads=[Thread(1, 1, "p")])
    tables = {
        r[0]
        for r in query(
            write_nsys(bare, tmp_path / "bare.sqlite"), "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    assert "META_DATA_EXPORT" in tables and "StringIds" in tables
    assert not tables & {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "TARGET_INFO_GPU",
    }


def test_outputs_are_byte_identical(tmp_path: Path) -> None:
    spec = small_spec()
    rank0 = spec.only_process(100, rank=0, world_size=2)
    for name, write, s in (("a.sqlite", write_nsys, spec), ("a.json.gz", write_kineto, rank0)):
        first = write(s, tmp_path / name).read_bytes()
        assert write(s, tmp_path / f"again-{name}").read_bytes() == first


def test_kineto_events(tmp_path: Path) -> None:
    spec = small_spec()
    path = write_kineto(spec.only_process(100, rank=0, world_size=2), tmp_path / "rank0.json.gz")
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    assert doc["schemaVersion"] == 1
    assert doc["distributedInfo"] == {"backend": "nccl", "rank": 0, "world_size": 2}
    assert [d["id"] for d in doc["deviceProperties"]] == [0, 1]
    base_ns = doc["baseTimeNanoseconds"]
    assert base_ns + 500 == spec.session_start_utc_ns  # capture starts at the first event (500 ns)
    events = doc["traceEvents"]

    def ns(e: dict[str, object]) -> tuple[int, int]:
        return round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)

    kernels = {e["name"]: e for e in events if e.get("cat") == "kernel"}
    launches = {
        e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
    }
    gemm = kernels[GEMM]
    assert (gemm["pid"], gemm["tid"], ns(gemm)) == (0, 7, (2000, 3000))
    assert gemm["args"]["grid"] == [132, 1, 1] and gemm["args"]["block"] == [384, 1, 1]
    launch = launches[gemm["args"]["correlation"]]
    assert (launch["cat"], launch["name"], launch["pid"], launch["tid"], ns(launch)) == (
        "cuda_driver",
        "cuLaunchKernelEx",
        100,
        100,
        (1000, 1400),
    )
    assert launch["args"]["External id"] == gemm["args"]["External id"]
    assert "early_kernel" in kernels and kernels["early_kernel"]["args"]["correlation"] not in launches
    assert "rms_norm_kernel" not in kernels  # process 200's kernel belongs in rank 1's file
    graph = {kernels[n]["args"]["correlation"] for n in ("graph_a", "graph_b")}
    assert len(graph) == 1 and launches[graph.pop()]["name"] == "cudaGraphLaunch"

    copy = next(e for e in events if e.get("cat") == "gpu_memcpy")
    assert (copy["name"], copy["args"]["bytes"], ns(copy)) == (
        "Memcpy HtoD (Pinned -> Device)",
        4096,
        (6000, 6400),
    )
    assert next(e["name"] for e in events if e.get("cat") == "gpu_memset") == "Memset (Device)"
    sync = next(e for e in events if e.get("name") == "cudaStreamSynchronize")
    assert ns(sync) == (7000, 10000)
    steps = [(e["name"], e["tid"], ns(e)) for e in events if e.get("cat") == "user_annotation"]
    assert steps == [("ProfilerStep#1", 100, (800, 10500)), ("ncclAllReduce", 105, (2900, 3300))]
    starts = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    finishes = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert (
        starts
        == finishes
        == {k["args"]["correlation"] for k in kernels.values() if k["name"] != "early_kernel"}
        | {
            copy["args"]["correlation"],
            next(e for e in events if e.get("cat") == "gpu_memset")["args"]["correlation"],
        }
    )

    with pytest.raises(ValueError, match="one process"):
        write_kineto(spec, tmp_path / "both.json")


def test_float_microseconds_keep_every_nanosecond(tmp_path: Path) -> None:
    t_ns = 1_234_567_890_123  # ~20 min into a capture, odd nanoseconds
    spec = TraceSpec(
        devices=[Device(0, "GPU", 132, 1)],
        processes=[Process(7, "p")],
        threads=[Thread(7, 7, "p")],
        kernels=[Kernel("k", 0, 7, t_ns, 1_001, 7, 7, t_ns - 999, 7)],
    )
    doc = json.loads(write_kineto(spec, tmp_path / "t.json").read_text())
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert round(k["ts"] * 1000) == t_ns and round(k["dur"] * 1000) == 1_001


def test_short_kernel_name() -> None:
    assert short_kernel_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, 2>(int*)") == (
        "CatArrayBatchedCopy"
    )
    assert short_kernel_name("rms_norm_kernel") == "rms_norm_kernel"
    assert short_kernel_name(NCCL) == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def test_spec_errors_are_caught() -> None:
    spec = small_spec()
    stray = Kernel("k", 0, 7, 0, 1, 999, 999, 0, 1)
    with pytest.raises(ValueError, match="not declared"):
        write_nsys(
            TraceSpec(spec.devices, spec.processes, spec.threads, kernels=[stray]), "/nonexistent/x.sqlite"
        )


def test_bulk_export(tmp_path: Path) -> None:
    path = write_nsys_bulk(tmp_path / "bulk.sqlite", 5_000, n_streams=3)
    counts = query(
        path,
        """SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL),
        (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME),
        (SELECT count(DISTINCT streamId) FROM CUPTI_ACTIVITY_KIND_KERNEL),
        (SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL)""",
    )
    assert counts[0][:3] == (5_000, 5_000, 3) and counts[0][3] >= 40
    # every kernel starts after its launch returns, and kernels on one stream never overlap
    assert query(
        path,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        USING (correlationId) WHERE k.start >= r."end\"""",
    ) == [(5_000,)]
    overlaps = query(
        path,
        """SELECT count(*) FROM (SELECT start, lag("end") OVER (PARTITION BY streamId ORDER BY start)
        AS prev_end FROM CUPTI_ACTIVITY_KIND_KERNEL) WHERE start < prev_end""",
    )
    assert overlaps == [(0,)]
    assert query(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'") == [
        ("3.25.0",)
    ]
    assert query(path, "SELECT count(*) > 0 FROM NVTX_EVENTS WHERE eventType = 59") == [(1,)]


def _union_ns(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus_ns(spans: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """Length of ``spans`` (disjoint) outside ``cover`` (disjoint), by brute force over both lists."""
    total = 0
    for a, b in spans:
        covered = sum(max(0, min(b, d) - max(a, c)) for c, d in cover)
        total += b - a - covered
    return total


@pytest.mark.parametrize("exposed", [0, 400_000])
def test_planted_communication_truth_holds_on_the_written_kernels(exposed: int) -> None:
    """The planted totals the analysis tests assert (communication union, exposed, host gaps per step) hold
    on the capture's own kernels, step by step, computed here without tracekit."""
    from fixtures.scenarios import NAMES, GapPlan, decode_capture
    from tracekit import floor
    from tracekit.budgets.budget import class_budgets
    from tracekit.budgets.classify import load_rules
    from tracekit.budgets.configs import load_config

    budgets = class_budgets(floor.compute_floor(load_config("dsv32-ep16")).parts, load_rules())
    spec, truth = decode_capture(budgets, gaps=GapPlan(launch_ns=30_000, sync_ns=20_000, host_idle_ns=10_000,
                                                       dependency_ns=15_000), exposed_dispatch_ns=exposed)
    comm_names = {NAMES["a2a_dispatch"], NAMES["a2a_combine"]}
    kernels = sorted(spec.kernels, key=lambda k: k.start_ns)
    # A step starts at the first GPU start of the kernels launched inside its ProfilerStep range.
    step_starts = sorted(min(k.start_ns for k in kernels if r.start_ns <= k.launch_start_ns <= r.end_ns)
                         for r in spec.ranges if r.name.startswith("ProfilerStep#"))
    ends = [*step_starts[1:], max(k.start_ns + k.dur_ns for k in kernels)]
    assert len(step_starts) == truth.steps
    for lo, hi in zip(step_starts[:-1], ends[:-1], strict=True):  # complete steps
        clip = [(max(lo, k.start_ns), min(hi, k.start_ns + k.dur_ns)) for k in kernels]
        comm = _union_ns([c for c, k in zip(clip, kernels, strict=True) if k.name in comm_names])
        compute = _union_ns([c for c, k in zip(clip, kernels, strict=True) if k.name not in comm_names])
        busy = _union_ns(clip)
        assert sum(b - a for a, b in comm) == truth.comm_ns
        assert _minus_ns(comm, compute) == truth.exposed_ns
        assert (hi - lo) - sum(b - a for a, b in busy) == truth.host_gap_ns
        assert hi - lo == truth.step_ns
