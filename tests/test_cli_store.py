"""The store and the CLI's contract: caching, atomic stores, bad input as one line and exit 2."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.analysis.options import REPORT_SCHEMA
from tracekit.cli import main
from tracekit.store.cache import HASH_MEMO  # the inputs' SHA-256 memo beside the stores

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "dsv32_ep16_decode.sqlite"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_second_ingest_reuses_the_store_and_input_is_untouched(tmp_path: Path) -> None:
    before = digest(SAMPLE)
    code, out, _ = run("ingest", str(SAMPLE), "--cache-dir", str(tmp_path), "--format", "json")
    assert code == 0 and json.loads(out)["stores"][0]["reused"] is False
    code, out, _ = run("ingest", str(SAMPLE), "--cache-dir", str(tmp_path), "--format", "json")
    assert code == 0 and json.loads(out)["stores"][0]["reused"] is True
    assert digest(SAMPLE) == before
    # the store, its manifest and its lock; no temporary left behind
    assert sorted(p.suffix for p in tmp_path.iterdir() if p.name != HASH_MEMO) == [".duckdb", ".json", ".lock"]


def test_damaged_store_is_discarded_and_rebuilt(tmp_path: Path) -> None:
    run("ingest", str(SAMPLE), "--cache-dir", str(tmp_path))
    (store,) = tmp_path.glob("*.duckdb")
    store.write_bytes(store.read_bytes()[: store.stat().st_size // 3])  # a crash mid-write
    code, out, _ = run("info", str(SAMPLE), "--cache-dir", str(tmp_path), "--format", "json")
    assert code == 0 and json.loads(out)["events"][0]["kernels"] > 0


def _not_nsys(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()


def _no_kernels(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, eventClass INT, globalTid INT, "
                "correlationId INT, nameId INT, returnValue INT, callchainId INT)")
    con.commit()
    con.close()


BAD_INPUTS = {
    "missing": None,
    "empty": lambda p: p.write_bytes(b""),
    "not_a_trace": lambda p: p.write_text("hello, world\n"),
    "not_nsys": _not_nsys,
    "truncated_sqlite": lambda p: p.write_bytes(SAMPLE.read_bytes()[:5000]),
    "no_kernels": _no_kernels,
    "truncated_json": lambda p: p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"'),
    "corrupt_gzip": lambda p: p.write_bytes(gzip.compress(b'{"traceEvents": []}')[:-12] + b"garbage!"),
    "json_not_trace": lambda p: p.write_text('{"hello": 1}'),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_nothing_cached(tmp_path: Path, case: str) -> None:
    suffix = ".json.gz" if "gzip" in case else ".json" if "json" in case else ".sqlite"
    path = tmp_path / f"input_{case}{suffix}"
    make = BAD_INPUTS[case]
    if make is not None:
        make(path)
    cache = tmp_path / "cache"
    code, _, err = run("analyze", str(path), "--cache-dir", str(cache))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: ") and str(path) in lines[0]
    assert "Traceback" not in err
    if case == "no_kernels":  # a CPU-only capture is a complete store (`info` describes it); no temporaries
        assert not [p for p in cache.iterdir() if p.name.startswith(".")]
    else:
        assert not cache.exists() or not any(cache.iterdir())


def test_bad_options_are_exit_2_naming_the_option(tmp_path: Path) -> None:
    code, _, err = run("analyze", str(SAMPLE), "--no-cache", "--config", "no-such-config")
    assert code == 2 and "no-such-config" in err and len(err.strip().splitlines()) == 1
    code, _, err = run("analyze", str(SAMPLE), "--no-cache", "--config", "dsv32-ep16", "--set", "nonsense=1")
    assert code == 2 and "nonsense" in err
    code, _, err = run("analyze", str(SAMPLE), "--no-cache", "--step", "([")
    assert code == 2 and "--step" in err


def test_report_written_with_out_replaces_atomically(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old")
    code, _, _ = run("analyze", str(SAMPLE), "--no-cache", "--config", "dsv32-ep16", "--format", "json",
                     "--out", str(out))
    assert code == 0 and json.loads(out.read_text())["schema"] == REPORT_SCHEMA
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_kernels_by_class_keeps_unmatched_time_visible(tmp_path: Path) -> None:
    code, out, _ = run("kernels", str(SAMPLE), "--no-cache", "--by", "class", "--format", "json")
    rows = json.loads(out)["kernels by class"]
    assert code == 0 and {r["class"] for r in rows} >= {"attn_core", "gemm", "moe_experts", "a2a_dispatch"}
    assert sum(r["instances"] for r in rows) == 6 * 12  # every kernel of every step, none dropped


def test_two_processes_on_the_same_trace_both_succeed_and_leave_one_good_store(tmp_path: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "tracekit", "analyze", str(SAMPLE), "--cache-dir", str(tmp_path),
           "--config", "dsv32-ep16", "--format", "json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert json.loads(outs[0][0]) == json.loads(outs[1][0])
    code, out, _ = run("ingest", str(SAMPLE), "--cache-dir", str(tmp_path), "--format", "json")
    assert code == 0 and len(list(tmp_path.glob("*.duckdb"))) == 1


@pytest.mark.parametrize("use_cache", [True, False])
def test_store_connections_draw_no_progress_bar(tmp_path: Path, use_cache: bool) -> None:
    """DuckDB draws a progress bar on stdout for a query over 2 s, even into a pipe or a file: off on every
    connection a store opens (cached and in-memory), and on their cursors, so a JSON report stays JSON."""
    from tracekit.store.ingest import open_store

    with open_store([SAMPLE], cache_dir=tmp_path, use_cache=use_cache) as store:
        for con in (store.con, store.con.cursor()):
            assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0] is False
    with open_store([SAMPLE], cache_dir=tmp_path, use_cache=use_cache) as store:  # reused from the cache
        assert store.con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0] is False
