"""The Kineto reader's fast paths agree with the exact general ones: times, short names, batching."""

from __future__ import annotations

import json
import random
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import msgspec
import pytest

from tracekit.parsers import kineto_tables, schema
from tracekit.parsers.kineto import read_kineto
from tracekit.parsers.kineto_events import decode, route
from tracekit.parsers.kineto_times import start_end_ns, texts

# Every form a JSON number takes, plus what is not a number. The last ones send a column to the
# general path (more than three decimals, exponents below ns, strings, null).
FAST = ["0", "5", "-5", "1000.5", "1000.05", "1000.123", "-0.001", "1712195495519689.047", "1e3", "1.5E2",
        "9223372036854775.807", "9223372036854775.808", "-9223372036854775.808", "-9223372036854775.809"]
GENERAL = ["1000.0005", "-1.0005", "2.5e-3", "1000.12345678901", '"5"', "null", "123456789012345678901"]


def exact_ns(text: str) -> int | None:
    """round-half-away-from-zero of text * 1000 when it is a JSON number within int64, else None."""
    try:
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    except (ValueError, TypeError):
        value = None
    if not isinstance(value, Decimal):
        return None
    ns = int((value * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return ns if -(2**63) <= ns < 2**63 else None


def raws(values: list[str]) -> list[msgspec.Raw]:
    return msgspec.json.decode(("[" + ",".join(values) + "]").encode(), type=list[msgspec.Raw])


@pytest.mark.parametrize("values", [FAST, FAST + GENERAL], ids=["fast", "general"])
def test_times_are_exact_on_both_paths(values: list[str]) -> None:
    durations = ["2.001"] * len(values)
    start, end = start_end_ns(texts(raws(values)), texts(raws(durations)))
    assert start.to_pylist() == [exact_ns(v) for v in values]
    for text, got in zip(values, end.to_pylist(), strict=True):
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal)
        expected = exact_ns(str(value + Decimal("2.001"))) if isinstance(value, Decimal) else None
        assert got == expected, text


def test_absent_times_are_null() -> None:
    start, end = start_end_ns(texts([msgspec.Raw(), *raws(["5"])]), texts(raws(["1", "1"])))
    assert start.to_pylist() == [None, 5000] and end.to_pylist() == [None, 6000]


def test_random_times_match_decimal_arithmetic() -> None:
    rng = random.Random(7)
    ts = [f"{rng.randrange(-10**18, 10**18) / 1000:.3f}" for _ in range(2000)]
    ts += [str(rng.randrange(0, 10**15)) for _ in range(500)]
    dur = [f"{rng.randrange(0, 10**9) / 1000:.3f}" for _ in ts]
    start, end = start_end_ns(texts(raws(ts)), texts(raws(dur)))
    assert start.to_pylist() == [int(Decimal(t) * 1000) for t in ts]
    assert end.to_pylist() == [int((Decimal(t) + Decimal(d)) * 1000) for t, d in zip(ts, dur, strict=True)]


def test_route_counts_skipped_by_category_and_phase() -> None:
    events = [{"ph": "X", "cat": "kernel"}, {"ph": "X", "cat": "ac2g"}, {"ph": "s", "cat": "ac2g"},
              {"ph": "i", "name": "Record Window End"}, {"ph": "X", "cat": ""}, {"ph": "M", "name": "process_name"},
              {"cat": "kernel"}, {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1"}]
    skipped: Counter[str] = Counter()
    routed = route(decode(raws([json.dumps(e) for e in events]), skipped), skipped)
    assert (len(routed.gpu), len(routed.api), len(routed.ranges), len(routed.metadata)) == (1, 0, 1, 1)
    assert routed.recognised == 7 and routed.legacy
    assert skipped == {"ac2g": 2, "(no category, ph i)": 1, "(no category, ph X)": 1, "kernel": 1}


def test_batched_inserts_equal_one_chunk_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows queued across chunks (small chunks, small flushes) land exactly as in one big insert."""
    events = []
    for i in range(300):
        ts = 1000 + 10 * i + (i % 1000) / 1000
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
                       "ts": ts, "dur": 1.5, "args": {"correlation": i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"void k{i % 7}<int>(int)", "pid": 0, "tid": 7,
                       "ts": ts, "dur": 3.25, "args": {"device": 0, "stream": 7, "correlation": i}})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": ts, "dur": 9})
    events.append({"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": None, "dur": 1,
                   "args": {"device": 0, "stream": 7, "correlation": 1}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))

    def dump() -> dict[str, list[tuple]]:
        con = duckdb.connect()
        schema.create_tables(con)
        read_kineto(path, con)
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in (*schema.EVENT_TABLES, "read_notes")}

    whole = dump()
    monkeypatch.setattr("tracekit.parsers.kineto.CHUNK_EVENTS", 64)
    monkeypatch.setattr(kineto_tables, "FLUSH_ROWS", 50)
    assert dump() == whole
    assert len(whole["kernels"]) == 300 and whole["kernels"][0][4] == 1_000_000
    assert ("(no readable ts/dur: gpu)" in {row[3] for row in whole["read_notes"]})
