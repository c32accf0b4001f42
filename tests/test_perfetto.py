"""The annotated Perfetto timeline, read back with tracekit's own Kineto reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.analysis.analyze import run_analysis
from tracekit.analysis.options import AnalyzeOptions
from tracekit.report.perfetto import CATEGORY, TRACKS, write_perfetto
from tracekit.store.ingest import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OPS = {"kernels": "SELECT device_id, stream_id, start_ns, end_ns, name FROM kernels ORDER BY ALL",
       "memops": "SELECT device_id, stream_id, start_ns, end_ns, kind FROM memops ORDER BY ALL"}


def export(paths: list[Path], out: Path, config: str | None) -> tuple:
    source = open_store(paths, use_cache=False)
    analysis = run_analysis(source, AnalyzeOptions(config=config))
    write_perfetto(analysis, out)
    return source, analysis, open_store([out], use_cache=False)


@pytest.mark.parametrize(("inputs", "config"), [
    (["dsv32_ep16_decode.sqlite"], "dsv32-ep16"),
    (["sample_decode_rank0.json.gz", "sample_decode_rank1.json.gz"], None),
])
def test_export_reads_back_with_the_same_operations(tmp_path: Path, inputs: list[str], config: str | None) -> None:
    out = tmp_path / "timeline.json"
    source, analysis, back = export([FIXTURES / name for name in inputs], out, config)
    for table, query in OPS.items():
        want = source.con.execute(query).fetchall()
        assert back.con.execute(query).fetchall() == want, table
        assert want or table == "memops"
    analysed = sum(d.n_ops for d in analysis.devices)
    assert back.con.execute("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops)").fetchone()[0] \
        == analysed
    events = json.loads(out.read_text())["traceEvents"]
    ours = [e for e in events if e.get("cat") == CATEGORY]
    skipped = back.con.execute("SELECT count FROM read_notes WHERE kind = 'skipped_events' AND detail = ?",
                               [CATEGORY]).fetchone()
    assert skipped == (len(ours),)  # the analysis tracks are skipped by the reader, and counted
    pids = {(e["args"]["rank"], e["args"]["device"]): e["pid"] for e in events if e.get("cat") == "kernel"}
    assert len(set(pids.values())) == len(pids) == len(analysis.devices)  # one process per (rank, device)


def test_analysis_tracks_hold_steps_gaps_exposed_comm_and_over_budget_kernels(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    _, analysis, _ = export([FIXTURES / "dsv32_ep16_decode.sqlite"], out, "dsv32-ep16")
    doc = json.loads(out.read_text())
    base = doc["baseTimeNanoseconds"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert set(TRACKS) <= names
    by_track: dict[int, list[dict]] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == CATEGORY:
            by_track.setdefault(e["tid"], []).append(e)

    def ns(e: dict, key: str) -> int:
        return round(e[key] * 1000)

    accounts = [a for d in analysis.devices for a in d.accounts]
    steps = by_track[1]
    assert [(ns(e, "ts") + base, e["name"]) for e in steps] == [(a.window.start_ns, a.window.label) for a in accounts]
    gaps = by_track[2]
    assert sum(ns(e, "dur") for e in gaps) == sum(a.gap_ns for a in accounts)
    causes = {e["name"].removeprefix("host gap: ") for e in gaps}
    assert causes == {"host_code", "sync", "dependency", "host_idle"}  # each planted gap named by its dominant cause
    assert sum(ns(e, "dur") for e in by_track[3]) == sum(a.exposed_ns for a in accounts)
    over = {c["name"] for c in analysis.report["classes"] if c["over_budget"]}
    assert over == {"attn_core"} and by_track[4]
    assert {e["args"]["class"] for e in by_track[4]} == over
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in doc["traceEvents"] if e["ph"] == "X")


def test_host_launch_calls_and_flow_arrows(tmp_path: Path) -> None:
    """Each launch call is a slice on its host thread, with a flow arrow (Kineto's ac2g) to its kernel."""
    out = tmp_path / "timeline.json"
    source, _, back = export([FIXTURES / "dsv32_ep16_decode.sqlite"], out, "dsv32-ep16")
    events = json.loads(out.read_text())["traceEvents"]
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == CATEGORY and e["name"].startswith("launch: ")}
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f"}
    matched = source.con.execute("SELECT count(*) FROM kernels k JOIN launches a USING (rank, pid, correlation_id)"
                                 ).fetchone()[0]
    assert len(launches) == matched > 0 and set(starts) == set(ends) == set(launches)
    for corr, call in launches.items():
        k, s, f = kernels[corr], starts[corr], ends[corr]
        assert call["name"] == f"launch: {k['name']}" and call["pid"] != k["pid"]
        assert (s["pid"], s["tid"], s["ts"]) == (call["pid"], call["tid"], call["ts"])
        assert (f["pid"], f["tid"], f["ts"], f["bp"]) == (k["pid"], k["tid"], k["ts"], "e")
        assert float(call["ts"]) <= float(k["ts"])  # launched before it ran
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] >= 1_000_000}
    assert threads and all(t.startswith("host thread ") for t in threads)
    assert back.con.execute("SELECT count(*) FROM api_calls").fetchone()[0] == 0  # read back: still no API calls
