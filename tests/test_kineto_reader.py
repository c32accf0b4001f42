"""The Kineto (PyTorch profiler JSON) reader: mapping, exact times, vintages, bad input, real traces."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tracekit.errors import InputError
from tracekit.parsers import schema
from tracekit.parsers.kineto import read_kineto
from tracekit.store.ingest import ingest_file

BASE_NS = 1_700_000_000_000_000_000
# The store's launch join; a file without distributedInfo.rank has rank NULL until the store assigns one.
LAUNCH_JOIN = "k.rank IS NOT DISTINCT FROM a.rank AND k.pid = a.pid AND k.correlation_id = a.correlation_id"


def load(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    schema.create_tables(con)
    read_kineto(path, con)
    return con


def dumps_exact(doc: Any) -> str:
    """JSON text with ``ts``/``dur`` given as strings written as numbers with exactly those digits."""
    return re.sub(r'"(ts|dur)": "([-+.0-9eE]+)"', r'"\1": \2', json.dumps(doc))


def write(tmp_path: Path, doc: Any, name: str = "trace.json") -> Path:
    path = tmp_path / name
    text = doc if isinstance(doc, str) else json.dumps(doc)
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def x(cat: str, name: str, ts: Any, dur: Any, pid: Any = 100, tid: Any = 101, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def gpu(cat: str, name: str, ts: Any, dur: Any, corr: int, stream: int = 7, **args: Any) -> dict:
    return x(cat, name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **args)


def modern_trace() -> str:
    """A 2024+ trace (float ts with ns, baseTimeNanoseconds) with one event of every mapped kind."""
    events = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 100, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "ts": 0, "pid": 100, "tid": 101, "args": {"name": "thread 101"}},
        x("user_annotation", "ProfilerStep#3", "1000.000", "100.000"),
        x("cpu_op", "aten::mm", "1000.100", "10.000", **{"External id": 7, "Input Dims": [[2, 2]]}),
        x("python_function", "model.py(3): forward", "1000.050", "20.000"),
        x("cuda_runtime", "cudaLaunchKernel", "1000.200", "3.000", correlation=11, cbid=211),
        x("cuda_driver", "cuLaunchKernelEx", "1004.000", "2.000", correlation=12),
        x("cuda_runtime", "cudaMemcpyAsync", "1007.000", "1.000", correlation=13),
        gpu(
            "kernel",
            "void at::native::(anonymous namespace)::gemm<float>(float*)",
            "1010.123",
            "2.501",
            11,
            grid=[4, 2, 1],
            block=[128, 1, 1],
        ),
        gpu("kernel", "sm90_xmma_gemm", "1013.000", "1.000", 12, grid=[1, 1, 1], block=[64, 1, 1]),
        gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", "1015.000", "4.000", 13, bytes=4096),
        gpu("gpu_memset", "Memset (Device)", "1020.000", "0.500", 14, bytes=64),
        {
            **x("gpu_user_annotation", "ProfilerStep#3", "1010.000", "20.000", pid=0, tid=7),
            "args": {"device": 0},
        },
        {"ph": "s", "id": 11, "pid": 100, "tid": 101, "ts": "1000.200", "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": "1010.123", "cat": "ac2g", "name": "ac2g", "bp": "e"},
        x("mystery_cat", "something new", "1001.000", "1.000"),
        x("mystery_cat", "something else", "1002.000", "1.000"),
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": "1100.000"},
    ]
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalGlobalMem": 85018279936,
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": 132,
            }
        ],
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
        "cuda_runtime_version": 12040,
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
    }
    return dumps_exact(doc)


@pytest.fixture
def modern(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    text = modern_trace()
    json.loads(text)  # the fixture itself is valid JSON
    return load(write(tmp_path, text, "modern.json.gz"))


def test_kernels_exact_ns_with_base_and_launching_pid(modern: duckdb.DuckDBPyConnection) -> None:
    rows = modern.execute(
        "SELECT rank, pid, device_id, stream_id, start_ns, end_ns, dur_ns, short_name, correlation_id, "
        "grid_x, grid_y, grid_z, block_x FROM kernels ORDER BY start_ns"
    ).fetchall()
    assert rows == [
        (3, 100, 0, 7, BASE_NS + 1_010_123, BASE_NS + 1_012_624, 2_501, "gemm", 11, 4, 2, 1, 128),
        (3, 100, 0, 7, BASE_NS + 1_013_000, BASE_NS + 1_014_000, 1_000, "sm90_xmma_gemm", 12, 1, 1, 1, 64),
    ]


def test_memops_copy_kind_and_bytes(modern: duckdb.DuckDBPyConnection) -> None:
    rows = modern.execute(
        "SELECT kind, copy_kind, bytes, pid, dur_ns, correlation_id FROM memops ORDER BY kind"
    )
    # The memset's correlation has no launch in the file: it gets the trace's main process.
    assert rows.fetchall() == [("memcpy", "HtoD", 4096, 100, 4000, 13), ("memset", None, 64, 100, 500, 14)]


def test_api_calls_runtime_and_driver(modern: duckdb.DuckDBPyConnection) -> None:
    rows = modern.execute(
        "SELECT name, raw_name, api, correlation_id, pid, tid, dur_ns, is_duplicate "
        "FROM api_calls ORDER BY start_ns"
    ).fetchall()
    assert rows == [
        ("cudaLaunchKernel", "cudaLaunchKernel", "runtime", 11, 100, 101, 3000, False),
        ("cuLaunchKernelEx", "cuLaunchKernelEx", "driver", 12, 100, 101, 2000, False),
        ("cudaMemcpyAsync", "cudaMemcpyAsync", "runtime", 13, 100, 101, 1000, False),
    ]
    joined = modern.execute(
        "SELECT count(*) FROM kernels k JOIN api_calls a USING (rank, pid, correlation_id)"
    ).fetchone()[0]
    assert joined == 2


def test_ranges_by_source(modern: duckdb.DuckDBPyConnection) -> None:
    rows = modern.execute(
        "SELECT source, name, pid, tid, device_id, stream_id, style, dur_ns FROM ranges ORDER BY source"
    ).fetchall()
    assert rows == [
        ("cpu_op", "aten::mm", 100, 101, None, None, "PushPop", 10_000),
        ("gpu_user_annotation", "ProfilerStep#3", 100, None, 0, 7, "PushPop", 20_000),
        ("python_function", "model.py(3): forward", 100, 101, None, None, "PushPop", 20_000),
        ("user_annotation", "ProfilerStep#3", 100, 101, None, None, "PushPop", 100_000),
    ]


def test_metadata_devices_notes_and_trace_info(modern: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    info = modern.execute(
        "SELECT rank, source_format, format_version, start_ns, end_ns FROM trace_info"
    ).fetchall()
    assert info == [(3, "kineto", "1/float-ns", BASE_NS + 1_000_000, BASE_NS + 1_100_000)]
    assert modern.execute("SELECT * FROM devices").fetchall() == [
        (3, 0, "NVIDIA H100 80GB HBM3", 132, 85018279936, None, 9, 0, "nvidia")
    ]
    meta = dict(modern.execute("SELECT key, value FROM trace_meta").fetchall())
    assert meta["distributedInfo.rank"] == "3" and meta["distributedInfo.world_size"] == "4"
    assert meta["baseTimeNanoseconds"] == str(BASE_NS) and meta["cuda_runtime_version"] == "12040"
    assert meta["deviceProperties.names"] == "NVIDIA H100 80GB HBM3"
    notes = {
        row[3]: row[2]
        for row in modern.execute("SELECT * FROM read_notes WHERE kind = 'skipped_events'").fetchall()
    }
    assert notes == {"mystery_cat": 2, "ac2g": 2, "(no category, ph i)": 1}
    assert modern.execute("SELECT * FROM processes").fetchall() == [(3, 100, "python3")]
    assert modern.execute("SELECT * FROM threads").fetchall() == [(3, 100, 101, "thread 101")]


def test_a_later_read_in_the_process_stores_the_same_rows(tmp_path: Path) -> None:
    """Short names are cached per process and each small table is one multi-row INSERT: a second read of a
    file (cache warm), here with quotes and a question mark in its metadata, stores every row as the first."""
    doc = json.loads(modern_trace())
    doc["Hostname"] = "it's a host?"
    doc["traceEvents"] += [{"name": "thread_name", "ph": "M", "ts": 0, "pid": 100, "tid": tid,
                            "args": {"name": f"t'{tid}\"?"}} for tid in (102, 103)]
    path = write(tmp_path, dumps_exact(doc), "quoted.json")
    first, second = load(path), load(path)
    for table in schema.TABLES:
        query = f"SELECT * FROM {table}"
        assert second.execute(query).fetchall() == first.execute(query).fetchall(), table
    assert first.execute("SELECT host FROM capture").fetchall() == [("it's a host?",)]
    assert first.execute("SELECT tid, name FROM threads ORDER BY tid").fetchall() == [
        (101, "thread 101"), (102, "t'102\"?"), (103, "t'103\"?")]


def test_ns_exact_beyond_float64(tmp_path: Path) -> None:
    """2024-04 files carry epoch us with 3 decimals (19 digits): float64 would be off by up to 0.1 us."""
    ts, dur = "1712195495519689.047", "2.001"
    assert round(float(ts) * 1000) != 1712195495519689047  # the trap this test is about
    con = load(
        write(
            tmp_path,
            dumps_exact(
                {
                    "schemaVersion": 1,
                    "traceEvents": [
                        gpu("kernel", "k", ts, dur, 1),
                        x("cuda_runtime", "cudaLaunchKernel", ts, "1.000", correlation=1),
                    ],
                }
            ),
        )
    )
    assert con.execute("SELECT start_ns, end_ns FROM kernels").fetchone() == (
        1712195495519689047,
        1712195495519691048,
    )


def test_legacy_2021_format(tmp_path: Path) -> None:
    events = [
        x("Operator", "ProfilerStep#5", 1000, 50, tid="100", **{"external id": 1}),
        x("Operator", "aten::conv2d", 1001, 10, tid="100", **{"external id": 2}),
        x("Runtime", "cudaLaunchKernel", 1002, 5, tid="100", correlation=9, **{"external id": 2}),
        {
            **x("Kernel", "implicit_convolve_sgemm", 1010, 7, pid=0, tid="stream 7"),
            "args": {
                "device": 0,
                "context": 1,
                "correlation": 9,
                "external id": 2,
                "grid": [1, 2, 3],
                "block": [4, 5, 6],
            },
        },
        {
            **x("Memset", "Memset (Device)", 1020, 1, pid=0, tid="stream 7"),
            "args": {"device": 0, "stream": 7, "correlation": 10, "bytes": 128},
        },
        {"ph": "f", "id": 9, "pid": 0, "tid": "stream 7", "ts": 1010, "cat": "async", "name": "launch"},
    ]
    con = load(write(tmp_path, {"schemaVersion": 1, "traceEvents": events}))
    assert con.execute("SELECT format_version, rank FROM trace_info").fetchone() == ("1/2021-legacy", None)
    # args.stream is absent on this kernel: the stream comes from tid "stream 7".
    assert con.execute(
        "SELECT pid, stream_id, correlation_id, start_ns, grid_z, block_x FROM kernels"
    ).fetchall() == [(100, 7, 9, 1_010_000, 3, 4)]
    assert con.execute("SELECT source, name, tid FROM ranges ORDER BY start_ns").fetchall() == [
        ("user_annotation", "ProfilerStep#5", 100),
        ("cpu_op", "aten::conv2d", 100),
    ]
    assert con.execute("SELECT api, tid FROM api_calls").fetchall() == [("runtime", 100)]
    assert con.execute("SELECT kind FROM read_notes ORDER BY kind").fetchall() == [
        ("no_rank",),
        ("skipped_events",),
    ]


@pytest.mark.parametrize("launch", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_graph_launch_keeps_every_kernel(tmp_path: Path, launch: str) -> None:
    events = [x("cuda_runtime", launch, 100, 5, correlation=42)]
    events += [gpu("kernel", f"k{i}", 110 + 10 * i, 5, 42) for i in range(5)]
    meta = {"hip_runtime_version": 70253211} if launch.startswith("hip") else {}
    con = load(
        write(tmp_path, {"schemaVersion": 1, "distributedInfo": {"rank": 0}, **meta, "traceEvents": events})
    )
    assert (
        con.execute(
            "SELECT count(*) FROM kernels k JOIN api_calls a USING (rank, pid, correlation_id) "
            f"WHERE a.name = '{launch}'"
        ).fetchone()[0]
        == 5
    )
    vendor = "amd" if launch.startswith("hip") else "nvidia"
    assert con.execute("SELECT device_id, name, vendor FROM devices").fetchall() == [(0, None, vendor)]


def test_bare_list_and_int_timestamps(tmp_path: Path) -> None:
    con = load(write(tmp_path, [gpu("kernel", "k", 5, 2, 1)]))
    assert con.execute("SELECT start_ns, end_ns, pid FROM kernels").fetchall() == [(5000, 7000, None)]
    assert con.execute("SELECT format_version FROM trace_info").fetchone() == ("?/int-us",)


def test_event_with_unexpected_types_still_loads(tmp_path: Path) -> None:
    odd = {
        **gpu("kernel", "k", 5, 2, 1),
        "args": {"device": "0", "stream": "7", "correlation": 1, "grid": [1, "x", 1]},
    }
    con = load(
        write(tmp_path, {"traceEvents": [odd, gpu("kernel", "k2", 9, 1, 2), 17, x("cpu_op", "a", None, 1)]})
    )
    assert con.execute("SELECT name, device_id, stream_id, grid_x FROM kernels ORDER BY name").fetchall() == [
        ("k", 0, 7, None),
        ("k2", 0, 7, None),
    ]
    notes = dict(con.execute("SELECT detail, count FROM read_notes WHERE kind = 'skipped_events'").fetchall())
    assert notes == {"(malformed event)": 1, "(no readable ts/dur: range)": 1}


BAD_INPUTS = {
    "truncated.json": ("text", '{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1', "truncated JSON"),
    "garbage.json": ("text", '{"traceEvents": [}', "invalid JSON"),
    "corrupt.json.gz": ("bytes", gzip.compress(b'{"traceEvents": []}' * 50)[:40], "corrupt gzip"),
    "other.json": ("text", '{"name": "package.json", "version": 1}', "not a PyTorch profiler trace"),
    "numbers.json": ("text", "[1, 2, 3]", "not a PyTorch profiler trace"),
    "empty_events.json": ("text", '{"traceEvents": []}', "not a PyTorch profiler trace"),
    "events_not_list.json": ("text", '{"traceEvents": 5}', "not a PyTorch profiler trace"),
}


def test_cpu_only_trace_is_stored_and_refused_by_the_analysis(tmp_path: Path) -> None:
    from tracekit.analysis.analyze import analyze
    from tracekit.analysis.options import AnalyzeOptions
    from tracekit.store.ingest import open_store

    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps({"traceEvents": [x("cpu_op", "aten::add", 1, 2)]}))
    con = load(path)
    assert ("no_gpu_activity",) in con.execute("SELECT kind FROM read_notes").fetchall()
    with open_store([path], cache_dir=tmp_path / "cache") as store:
        assert store.con.execute("SELECT count(*) FROM ranges").fetchone()[0] == 1
        with pytest.raises(InputError, match="no GPU events") as err:
            analyze(store, AnalyzeOptions())
    assert str(err.value).startswith(f"{path}: ")


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, name: str) -> None:
    how, content, problem = BAD_INPUTS[name]
    path = tmp_path / name
    if how == "bytes":
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match=problem):  # and through the store: nothing left in the cache
        ingest_file(path, cache)
    assert not list(cache.glob("*.duckdb*"))


# ---- real traces (../shared/traces/torch) ------------------------------------------------------------

GPU_CATEGORIES = {
    "kernel": "kernels",
    "Kernel": "kernels",
    "gpu_memcpy": "memops",
    "Memcpy": "memops",
    "gpu_memset": "memops",
    "Memset": "memops",
    "cuda_runtime": "api_calls",
    "Runtime": "api_calls",
    "cuda_driver": "api_calls",
}
REAL_FILES = [
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta__call_stack__backward_thread.json",
    "hta__nccl_parser_config__nccl_data.json.gz",
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta__trace_diff__test__test.json.gz",
    "kineto__tb_plugin__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
    "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
    "dlrm8_v100/worker3_step_12.1694128201557.pt.trace.json.gz",
]


def expected_from_json(path: Path) -> tuple[dict[str, int], dict[str, int], int, int]:
    """Row counts, sums of exact start ns per table, the sum of kernel end ns (all computed here
    independently, with Decimal) and the number of kernels whose correlation id has a launch event."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    counts: dict[str, int] = {}
    start_sums: dict[str, int] = {}
    end_sum = 0
    kernel_correlations: list[int] = []
    launch_correlations: set[int] = set()
    for e in events:
        table = GPU_CATEGORIES.get(e.get("cat"))
        if e.get("ph") != "X" or table is None:
            continue
        counts[table] = counts.get(table, 0) + 1
        start = int((Decimal(e["ts"]) * 1000).to_integral_value()) + base
        start_sums[table] = start_sums.get(table, 0) + start
        if table == "api_calls":
            launch_correlations.add(e["args"].get("correlation"))
        if table == "kernels":
            kernel_correlations.append(e["args"]["correlation"])
            end_sum += int(((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000).to_integral_value()) + base
    return counts, start_sums, end_sum, sum(c in launch_correlations for c in kernel_correlations)


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_trace_rows_and_exact_times(shared_traces: Path, name: str) -> None:
    path = shared_traces / "torch" / name
    con = load(path)
    counts, start_sums, kernel_end_sum, launched = expected_from_json(path)
    for table, n in counts.items():
        got = con.execute(f"SELECT count(*), sum(start_ns)::HUGEINT FROM {table}").fetchone()
        assert got == (n, start_sums[table]), table
    assert con.execute("SELECT sum(end_ns)::HUGEINT FROM kernels").fetchone()[0] == kernel_end_sum
    # Every kernel has a process, a device and a stream; the store's join key finds every launch.
    assert (
        con.execute(
            "SELECT count(*) FROM kernels WHERE pid IS NULL OR device_id IS NULL OR stream_id IS NULL"
        ).fetchone()[0]
        == 0
    )
    matched = con.execute(f"SELECT count(*) FROM kernels k JOIN api_calls a ON {LAUNCH_JOIN}")
    assert matched.fetchone()[0] == launched > 0


@pytest.mark.parametrize(
    ("name", "launch", "kernels"),
    [
        ("hta__trace_diff__test__test.json.gz", "cudaGraphLaunch", 4464),
        ("tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz", "hipGraphLaunch", 544),
        ("tracelens__inference__vllm_decode_full__graph_execution.json.gz", "hipGraphLaunch", 421),
        ("tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz", "cuLaunchKernel", 22),
    ],
)
def test_real_launch_joins(shared_traces: Path, name: str, launch: str, kernels: int) -> None:
    con = load(shared_traces / "torch" / name)
    n = con.execute(
        f"SELECT count(*) FROM kernels k JOIN api_calls a ON {LAUNCH_JOIN} WHERE a.name = ?", [launch]
    ).fetchone()[0]
    assert n == kernels


def test_real_devices_and_vintages(shared_traces: Path) -> None:
    torch = shared_traces / "torch"
    mi300 = load(torch / "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz")
    assert mi300.execute(
        "SELECT name, sm_count, memory_bytes, compute_major, compute_minor, vendor FROM devices "
        "WHERE device_id = 0"
    ).fetchone() == ("AMD Instinct MI300X", 304, 206141652992, 9, 4, "amd")
    vllm = load(torch / "tracelens__inference__vllm_decode_full__graph_execution.json.gz")
    assert vllm.execute("SELECT count(*), count(name) FROM devices").fetchone() == (8, 0)  # names are empty
    legacy = load(
        torch / "kineto__tb_plugin__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
    )
    assert legacy.execute("SELECT format_version FROM trace_info").fetchone() == ("1/2021-legacy",)
    assert (
        legacy.execute(
            "SELECT count(*) FROM ranges WHERE name LIKE 'ProfilerStep#%' AND source = 'user_annotation'"
        ).fetchone()[0]
        > 0
    )


@pytest.mark.parametrize(
    "name",
    [
        "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "hta__distributed_info_unavailable__distributed_info_not_found.json.gz",
        "hta__rank_unavailable__rank_not_found.json.gz",
    ],
)
def test_real_cpu_only_traces_are_read_with_a_note(shared_traces: Path, name: str) -> None:
    """Stored (``info`` describes them), with the note the analysis refuses them by."""
    con = load(shared_traces / "torch" / name)
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM ranges").fetchone()[0] > 0
    (detail,) = con.execute("SELECT detail FROM read_notes WHERE kind = 'no_gpu_activity'").fetchone()
    assert detail.startswith("no GPU events (CPU-only trace")
    from click.testing import CliRunner

    from tracekit.cli import main

    info = CliRunner().invoke(main, ["info", str(shared_traces / "torch" / name), "--no-cache", "--format", "json"])
    assert info.exit_code == 0, info.output
    body = json.loads(info.stdout)
    assert body["events"][0]["kernels"] == 0 and body["events"][0]["ranges"] > 0
    assert any(c["kind"] == "no_gpu_activity" and "no GPU activity" in c["text"] for c in body["caveats"])
    analyze = CliRunner().invoke(main, ["analyze", str(shared_traces / "torch" / name), "--no-cache"])
    assert analyze.exit_code == 2 and "no GPU events" in analyze.stderr
