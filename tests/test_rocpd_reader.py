"""rocpd (rocprofv3's SQLite output) from fixtures written from rocprofiler-sdk's DDL, and rocprofv3 JSON.

The planted scenarios that exist in nsys form (``fixtures.scenarios``, ``fixtures.scenarios_ranks``) give the
same report in rocpd form: kernel totals, gaps by cause, exposed communication, steps, classes, verdict, and
across ranks the straggler, waits and clock offsets. What differs is what the formats say differently: the
API names (HIP), the profiler a target names (rocprofv3), and the world size (rocpd records the process
environment, where ``WORLD_SIZE`` is; the nsys writer records none)."""

from __future__ import annotations

import gzip
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from fixtures.scenarios import decode_capture
from fixtures.scenarios_ranks import ranks_capture
from fixtures.synth import write_nsys
from fixtures.synth_rocpd import write_rocpd
from tests.test_analyze_planted import CONFIG, GAPS, analyze_json, budgets
from tests.test_ranks_planted import analyze as analyze_folder
from tests.test_synth import small_spec
from tracekit.parsers.registry import detect
from tracekit.parsers.schema import create_tables

# Report keys whose values differ between the two forms by what the formats record (see the docstring).
FORMAT_KEYS = {".inputs", ".fit.world_size", ".fit.notes", ".ncu_targets"}


def format_neutral(diffs: list[str]) -> set[str]:
    """The differences that are not what the formats record differently (FORMAT_KEYS; an API call's name)."""
    return {d for d in diffs if not any(d.startswith(k) for k in FORMAT_KEYS) and not d.endswith(".api_call")}


def read(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_tables(con)
    spec = detect(path)
    spec.reader()(path, con)
    return con


def differences(a: object, b: object, path: str = "") -> list[str]:
    """Dotted paths (list indices dropped) where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for x, y in zip(a, b, strict=True) for d in differences(x, y, path)]
    return [] if a == b else [path]


def one_process_spec():
    """small_spec's process 100 (runtime, driver, graph and out-of-capture launches, a copy, NVTX, NCCL)."""
    s = small_spec().only_process(100, rank=3, world_size=8)
    return replace(s, memops=[m for m in s.memops if m.kind == "memcpy"], hostname="node7")


@pytest.fixture(scope="module", params=["3.0.0", "3.0.3"])
def small(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    return read(write_rocpd(one_process_spec(), tmp_path_factory.mktemp("r") / "100_results.db", request.param))


def test_kernels_join_their_hip_launches_and_grids_are_workgroups(small: duckdb.DuckDBPyConnection) -> None:
    rows = small.execute("""SELECT k.name, k.short_name, k.device_id, k.stream_id, k.start_ns, k.dur_ns, a.name,
            k.grid_x, k.block_x FROM kernels k LEFT JOIN api_calls a USING (pid, correlation_id)
        ORDER BY k.start_ns""").fetchall()
    spec = one_process_spec()
    assert [(r[0], r[3], r[4], r[5]) for r in rows] == sorted(
        ((k.name, k.stream_id, k.start_ns, k.dur_ns) for k in spec.kernels), key=lambda k: k[2])
    launched = {r[0]: r[6] for r in rows}
    assert launched["early_kernel"] is None  # launched before the capture: no HIP call carries its id
    assert launched["graph_a"] == launched["graph_b"] == "hipGraphLaunch"
    assert next(r for r in rows if r[1] == "fp8_gemm_kernel")[6] == "hipModuleLaunchKernel"
    gemm = next(r for r in rows if r[1] == "fp8_gemm_kernel")
    assert (gemm[7], gemm[8]) == (132, 384)  # HSA's 132*384 work-items back to 132 workgroups of 384
    assert small.execute("SELECT kind, count FROM read_notes WHERE kind = 'unmatched_launch'").fetchall() == [
        ("unmatched_launch", 1)]


def test_graph_ids_where_the_schema_has_them(small: duckdb.DuckDBPyConnection) -> None:
    version = small.execute("SELECT format_version FROM trace_info").fetchone()[0]
    assert version == "3"  # rocpd_metadata's schema_version; the columns tell 3.0.0 from 3.0.2+
    graph = small.execute("SELECT name, graph_id, graph_node_id FROM kernels WHERE name LIKE 'graph%' ORDER BY 1"
                          ).fetchall()
    has_columns = small.execute("SELECT count(*) FROM kernels WHERE graph_id IS NOT NULL").fetchone()[0] > 0
    assert graph == ([("graph_a", 3, 1), ("graph_b", 3, 2)] if has_columns else [("graph_a", None, None),
                                                                                 ("graph_b", None, None)])


def test_markers_rccl_copies_devices_and_capture(small: duckdb.DuckDBPyConnection) -> None:
    assert small.execute("SELECT name, domain, source, style, kind FROM ranges ORDER BY start_ns").fetchall() == [
        ("ProfilerStep#1", None, "roctx", "PushPop", "range"),
        ("ncclAllReduce", "RCCL", "rccl_api", "PushPop", "range")]
    assert small.execute("SELECT device_id, kind, copy_kind, bytes, dur_ns FROM memops").fetchall() == [
        (0, "memcpy", "HtoD", 4096, 400)]
    assert small.execute("SELECT device_id, name, sm_count, memory_bytes, compute_major, compute_minor, vendor "
                         "FROM devices ORDER BY 1").fetchall() == [
        (d, "NVIDIA H100 80GB HBM3", 132, 85_520_809_984, 9, 0, "nvidia") for d in (0, 1)]  # every GPU agent
    assert small.execute("SELECT rank, world_size, host, wall_clock_base_ns, rank_source FROM capture").fetchall() == [
        (3, 8, "node7", None, "recorded")]
    assert small.execute("SELECT DISTINCT rank FROM kernels").fetchall() == [(3,)]
    assert small.execute("SELECT name FROM api_calls WHERE name LIKE '%Synchronize'").fetchall() == [
        ("hipStreamSynchronize",)]


def test_tables_without_their_views_and_two_sessions_in_one_file(tmp_path: Path) -> None:
    """The ``rocpd_*_<uuid>`` tables are read without the views, and a file holding two sessions' tables
    (two uuids) gives both sessions' kernels."""
    a = write_rocpd(one_process_spec(), tmp_path / "a.db")
    b = write_rocpd(replace(one_process_spec(), hostname="node8"), tmp_path / "b.db")  # another uuid
    db = sqlite3.connect(a)
    views = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
    for v in views:
        db.execute(f'DROP VIEW "{v}"')
    db.commit()
    assert read(a).execute("SELECT count(*) FROM kernels").fetchone()[0] == len(one_process_spec().kernels)
    other = sqlite3.connect(b)
    for (sql,) in other.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd%'"):
        db.execute(sql)
    db.execute("ATTACH ? AS other", (str(b),))
    for (name,) in other.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd%'"):
        db.execute(f'INSERT INTO "{name}" SELECT * FROM other."{name}"')
    db.commit()
    db.close()
    other.close()
    assert read(a).execute("SELECT count(*) FROM kernels").fetchone()[0] == 2 * len(one_process_spec().kernels)


def test_kernel_trace_only_database_and_invalid_utf8(tmp_path: Path) -> None:
    """A capture without --hip-trace has an empty rocpd_region table: its kernels are read, unmatched. A name
    with invalid UTF-8 is stored with replacement, counted once per kernel that bears it."""
    path = write_rocpd(one_process_spec(), tmp_path / "100_results.db")
    db = sqlite3.connect(path)
    (region,) = db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_region_%'").fetchone()
    (symbol,) = db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_info_kernel_symbol_%'").fetchone()
    db.execute(f'DELETE FROM "{region}"')
    kernel_id, name = db.execute(f'SELECT id, display_name FROM "{symbol}" ORDER BY id LIMIT 1').fetchone()
    db.execute(f'UPDATE "{symbol}" SET display_name = CAST(? AS TEXT) WHERE id = ?', (b"bad\xff" + name.encode(),
                                                                                    kernel_id))
    db.commit()
    db.close()
    con = read(path)
    kernels = len(one_process_spec().kernels)
    bad = con.execute("SELECT count(*) FROM kernels WHERE name = ?", ["bad\ufffd" + name]).fetchone()[0]
    assert bad > 0 and con.execute("SELECT count(*) FROM api_calls").fetchone()[0] == 0
    assert con.execute("SELECT kind, count FROM read_notes ORDER BY 1").fetchall() == [
        ("invalid_utf8", bad), ("unmatched_launch", kernels)]


@pytest.fixture(scope="module")
def planted_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, tuple[Path, Path]]:
    spec, _ = decode_capture(budgets(), gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="attn_core")
    tmp = tmp_path_factory.mktemp("planted")
    reports = {}
    for name, path in (("nsys", write_nsys(spec, tmp / "capture.sqlite")),
                       ("rocpd", write_rocpd(spec, tmp / "capture.db"))):
        reports[name] = analyze_json(path, "--config", CONFIG)[1]
    later = write_rocpd(spec, tmp / "capture303.db", schema="3.0.3")
    return reports["nsys"], reports["rocpd"], (tmp / "capture.db", later)


def test_planted_capture_gives_the_same_report_in_rocpd_form(planted_pair: tuple[dict, dict, tuple[Path, Path]]
                                                             ) -> None:
    nsys, rocpd, later = planted_pair
    assert rocpd["verdict"] == nsys["verdict"] == "kernel"
    assert rocpd["host_gaps"]["by_cause"] == nsys["host_gaps"]["by_cause"]
    assert rocpd["exposed_comm"] == nsys["exposed_comm"]
    assert rocpd["classes"] == nsys["classes"] and rocpd["steps"] == nsys["steps"]
    assert format_neutral(differences(rocpd, nsys)) == set()
    assert rocpd["fit"]["world_size"] == 16  # the process environment's WORLD_SIZE
    assert rocpd["ncu_targets"][0]["tool"] == "rocprofv3"
    # Schema 3.0.3 (no graph kernels in this capture): the very same store rows, so the same report.
    for table in ("kernels", "api_calls", "ranges", "devices", "capture"):
        a, b = (read(p).execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for p in later)
        assert a == b and a, table


def test_planted_ranks_give_the_same_report_in_rocpd_form(tmp_path: Path) -> None:
    specs, truth = ranks_capture("nsys", ranks=2, ranks_per_host=1, straggler=1, steps=3)
    for rank, spec in enumerate(specs):
        (tmp_path / "n").mkdir(exist_ok=True)
        (tmp_path / "r").mkdir(exist_ok=True)
        write_nsys(spec, tmp_path / "n" / f"rank{rank}.sqlite")
        write_rocpd(spec, tmp_path / "r" / f"{1000 + rank}_results.db")  # one database per process, as rocprofv3
    nsys, rocpd = (analyze_folder(str(tmp_path / f), "--jobs", "1") for f in ("n", "r"))
    assert rocpd["ranks"]["straggler"]["rank"] == truth.straggler
    assert rocpd["ranks"] == nsys["ranks"] and rocpd["verdict"] == nsys["verdict"]
    # rocpd records no wall clock (rocprofiler's timestamps are not the epoch): the report says its clock
    # offsets come from the matched collectives alone, and they equal the nsys form's all the same.
    extra = set(rocpd["caveats"]) - set(nsys["caveats"])
    assert set(nsys["caveats"]) <= set(rocpd["caveats"]) and len(extra) == 1 and "no wall-clock base" in extra.pop()
    assert format_neutral(differences({**rocpd, "caveats": nsys["caveats"]}, nsys)) == set()


def test_rocprofv3_json_kernels_equal_an_independent_count(shared_traces: Path) -> None:
    path = shared_traces / "rocprof" / "tracelens__908_results.json.gz"
    with gzip.open(path) as f:
        tool = json.load(f)["rocprofiler-sdk-tool"][0]
    dispatches = tool["buffer_records"]["kernel_dispatch"]
    want = (len(dispatches), sum(r["end_timestamp"] - r["start_timestamp"] for r in dispatches))
    con = read(path)
    assert con.execute("SELECT count(*), sum(dur_ns) FROM kernels").fetchone() == want
    names = {s["kernel_id"]: s["formatted_kernel_name"] for s in tool["kernel_symbols"]}
    top = max(names[r["dispatch_info"]["kernel_id"]] for r in dispatches[:1])
    assert con.execute("SELECT count(*) FROM kernels WHERE name = ?", [top]).fetchone()[0] == sum(
        names[r["dispatch_info"]["kernel_id"]] == top for r in dispatches)
    assert con.execute("SELECT DISTINCT name, sm_count, vendor FROM devices").fetchall() == [
        ("AMD Instinct MI350X", 256, "amd")]
    assert con.execute("SELECT host FROM capture").fetchall() == [("smci350-zts-gtu-c6-25",)]
