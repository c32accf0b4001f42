"""Fuzzing: accounting invariants on random timelines, and the readers on mutated real traces.

Every mutated input must either analyse (exit 0, valid JSON) or fail with the clean error (exit 2, one
line naming the file): never a traceback, never exit 1. CI runs FUZZ_EXAMPLES cases per reader test;
``TRACEKIT_FUZZ_EXAMPLES=2000`` runs a longer campaign (random, not derandomised). Counts and findings
are in docs/errors.md. Mutations are written to temporary copies: ../shared/traces is only read. Each reader
test runs on real seeds (from ../shared/traces) and on a synthetic seed set (fixtures.synth), so the
fuzzing still runs where the folder is absent.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import tempfile
from dataclasses import fields
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit import intervals as iv
from tracekit.analysis.accounting import account_step
from tracekit.analysis.gaps import HostActivity, attribute_gaps, gap_causes
from tracekit.analysis.ops import DeviceOps
from tracekit.analysis.steps import StepWindow
from tracekit.cli import main

LONG_RUN = "TRACEKIT_FUZZ_EXAMPLES" in os.environ
FUZZ_EXAMPLES = int(os.environ.get("TRACEKIT_FUZZ_EXAMPLES", "30"))  # per reader test and seed set
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=not LONG_RUN,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True)
KINETO_SEEDS = ["torch/hta__call_stack__backward_thread.json",
                "torch/hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                "torch/tracelens__inference__vllm_decode_full__graph_execution.json.gz",
                "torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"]
NSYS_SEEDS = ["nsys/extrap__nsys_db__con_kernel.sqlite", "nsys/nsys-ai__mock.sqlite",
              "nsys/extrap__concurrent_example__concurrent.s1__profile1.sqlite"]
COMM = frozenset({"nccl"})


# ---- accounting invariants -----------------------------------------------------------------------------


@st.composite
def device_ops(draw: st.DrawFn) -> DeviceOps:
    """Random kernels (some communication) on one device, with random launch calls on two threads."""
    n = draw(st.integers(0, 25))
    start = np.array(sorted(draw(st.lists(st.integers(0, 1_000), min_size=n, max_size=n))), dtype=np.int64)
    dur = np.array(draw(st.lists(st.integers(0, 200), min_size=n, max_size=n)), dtype=np.int64)
    cls = np.array(draw(st.lists(st.sampled_from(["gemm", "attn", "nccl", "memcpy"]), min_size=n, max_size=n)),
                   dtype=object)
    tid = np.array(draw(st.lists(st.sampled_from([-1, 1, 2]), min_size=n, max_size=n)), dtype=np.int64)
    lead = np.array(draw(st.lists(st.integers(0, 300), min_size=n, max_size=n)), dtype=np.int64)
    ls = np.where(tid >= 0, start - lead, -1)
    le = np.where(tid >= 0, ls + np.minimum(lead, 5), -1)
    columns = dict(rank=0, device_id=0, start_ns=start, end_ns=start + dur, stream_id=np.zeros(n, np.int64),
                   cls=cls, name=cls.copy(), pid=np.ones(n, np.int64), launch_tid=tid, launch_start_ns=ls,
                   launch_end_ns=le, in_graph=np.zeros(n, bool))
    if "cls_code" in {f.name for f in fields(DeviceOps)}:  # the coded form: names index a vocabulary
        vocabulary, code = np.unique(cls.astype(str), return_inverse=True)
        vocabulary, code = vocabulary.astype(object), code.astype(np.int32)
        columns |= dict(cls_code=code, class_names=vocabulary, name_code=code.copy(), names=vocabulary.copy())
    return DeviceOps(**columns)


def random_intervals(draw: st.DrawFn) -> iv.Intervals:
    pairs = draw(st.lists(st.tuples(st.integers(-300, 1_300), st.integers(0, 300)), max_size=10))
    return iv.union([a for a, _ in pairs], [a + d for a, d in pairs])


@st.composite
def host_activity(draw: st.DrawFn) -> HostActivity:
    threads = {(1, t): random_intervals(draw) for t in (1, 2)}
    process = iv.union(np.concatenate([x.starts for x in threads.values()]),
                       np.concatenate([x.ends for x in threads.values()]))
    return HostActivity(threads, {1: process}, {1: random_intervals(draw)})


@PROPERTY
@given(device_ops(), st.integers(-100, 1_200), st.integers(0, 1_400))
def test_step_buckets_add_up_and_exposed_never_exceeds_comm(ops: DeviceOps, lo: int, length: int) -> None:
    acc = account_step(ops, StepWindow(0, "step", lo, lo + length), COMM)
    assert 0 <= acc.exposed_ns <= acc.comm_ns <= length
    assert 0 <= acc.exposed_under_memops_ns <= acc.exposed_ns
    # Exposed: communication with no compute kernel (memory copies do not hide it), measured directly.
    s, e = np.clip(ops.start_ns, lo, lo + length), np.clip(ops.end_ns, lo, lo + length)
    comm, kernel = ops.cls == "nccl", (ops.cls == "gemm") | (ops.cls == "attn")
    exposed = iv.difference(iv.union(s[comm], e[comm]), iv.union(s[kernel], e[kernel]))
    assert acc.exposed_ns == iv.length(exposed)
    under = iv.intersect(exposed, iv.union(s[ops.cls == "memcpy"], e[ops.cls == "memcpy"]))
    assert acc.exposed_under_memops_ns == iv.length(under)
    assert sum(acc.exposed_by_class.values()) == acc.exposed_ns  # the collectives' shares add up exactly
    compute = sum(acc.attributed_by_class.values())
    assert acc.gap_ns + acc.exposed_ns + compute == length  # every nanosecond owned once, no rounding left


@PROPERTY
@given(device_ops(), host_activity(), st.data())
def test_gap_causes_sum_to_the_gaps(ops: DeviceOps, host: HostActivity, data: st.DataObject) -> None:
    gaps = random_intervals(data.draw)
    totals, next_op = attribute_gaps(gaps, ops, host)
    assert all(v >= 0 for v in totals.values())
    assert sum(totals.values()) == iv.length(gaps)
    assert len(next_op) == len(gaps)
    acc = account_step(ops, StepWindow(0, "step", 0, 1_000), COMM)  # the gaps the analysis really feeds in
    totals, _ = attribute_gaps(acc.gaps, ops, host)
    assert sum(totals.values()) == acc.gap_ns
    per_gap, _ = gap_causes(gaps, ops, host)  # each gap on its own is owned once, too
    assert (per_gap >= 0).all()
    assert per_gap.sum(axis=1).tolist() == (gaps.ends - gaps.starts).tolist()


# ---- readers on mutated real traces ---------------------------------------------------------------------


SYNTHETIC_SEEDS = ["decode", "copies"]  # written by fixtures.synth: the fuzzing runs without ../shared/traces


@cache
def synthetic_seed(name: str, fmt: str) -> bytes:
    """A small planted capture as Kineto JSON or an Nsight Systems export: ``decode`` (two ProfilerSteps of
    every class, host gaps, an exposed all-to-all), ``copies`` (the same with a copy and a set per step on
    their own streams, two ranks' worth of metadata)."""
    import dataclasses

    from fixtures.scenarios import NAMES, GapPlan, decode_capture
    from fixtures.synth import MemOp, write_kineto, write_nsys

    spec, _ = decode_capture({**{c: 20_000 for c in NAMES}, "gemm": 90_000}, steps=2,
                             gaps=GapPlan(launch_ns=5_000, sync_ns=3_000), exposed_dispatch_ns=4_000)
    if name == "copies":
        starts = sorted(k.start_ns for k in spec.kernels)
        spec = dataclasses.replace(spec, rank=1, memops=[
            MemOp(kind, copy, 4096, 0, 9, t + 100, 2_000, 4242, 4242, t - 5_000, 1_000)
            for t, (kind, copy) in zip(starts[::6], [("memcpy", "HtoD"), ("memset", None)] * 4, strict=False)])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("seed.json" if fmt == "kineto" else "seed.sqlite")
        (write_kineto if fmt == "kineto" else write_nsys)(spec, path)
        return path.read_bytes()


def seed_bytes(source: str, index: int, fmt: str, request: pytest.FixtureRequest) -> bytes:
    """Seed ``index`` (modulo their number) of the synthetic set, or of the real traces (``shared_traces``:
    skipped, or failed under CI, without the folder)."""
    if source == "synthetic":
        return synthetic_seed(SYNTHETIC_SEEDS[index % len(SYNTHETIC_SEEDS)], fmt)
    seeds = KINETO_SEEDS if fmt == "kineto" else NSYS_SEEDS
    name = seeds[index % len(seeds)]
    data = (request.getfixturevalue("shared_traces") / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def check_clean(path: Path) -> str:
    """Analyse ``path``: 'ok' (exit 0, valid JSON) or 'error' (exit 2, one line naming it); else fail."""
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json"])
    if result.exit_code == 0:
        json.loads(result.stdout)
        return "ok"
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    errors = [line for line in result.stderr.splitlines() if not line.startswith("tracekit: warning: ")]
    assert len(errors) == 1 and errors[0].startswith("tracekit: error: ") and str(path) in errors[0], errors
    return "error"


def flip(data: bytes, flips: list[tuple[float, int]]) -> bytes:
    out = bytearray(data)
    for where, mask in flips:
        out[min(int(where * len(out)), len(out) - 1)] ^= mask
    return bytes(out)


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                   st.text(max_size=12), st.lists(st.integers(-5, 5), max_size=4),
                   st.dictionaries(st.sampled_from(["rank", "id", "name"]), st.integers(-3, 3), max_size=2))
EVENT_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"]
ARG_KEYS = ["device", "stream", "correlation", "grid", "block", "bytes", "name", "External id"]
TOP_KEYS = ["traceEvents", "distributedInfo", "deviceProperties", "baseTimeNanoseconds", "schemaVersion"]
JSON_EDIT = st.tuples(st.sampled_from(["delete", "set", "args", "top"]), st.floats(0, 1),
                      st.sampled_from(EVENT_KEYS), st.sampled_from(ARG_KEYS), st.sampled_from(TOP_KEYS), VALUES)


def edit_json(data: bytes, edits: list[tuple]) -> bytes:
    doc = json.loads(data)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    for kind, where, key, arg, top, value in edits:
        if kind == "top" and isinstance(doc, dict):
            doc[top] = value
            events = doc.get("traceEvents") if isinstance(doc.get("traceEvents"), list) else []
            continue
        if not events:
            continue
        event = events[min(int(where * len(events)), len(events) - 1)]
        if not isinstance(event, dict):
            continue
        if kind == "delete":
            event.pop(key, None)
        elif kind == "set":
            event[key] = value
        elif isinstance(event.get("args"), dict):
            event["args"][arg] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize("source", ["synthetic", "shared"])
@FUZZ
@given(seed=st.integers(0, 99), how=st.sampled_from(["flip", "truncate", "edit", "gzip"]),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=8),
       cut=st.floats(0, 1), edits=st.lists(JSON_EDIT, min_size=1, max_size=6))
def test_mutated_kineto_traces_analyse_or_fail_cleanly(source: str, request: pytest.FixtureRequest, seed: int,
                                                       how: str, flips: list, cut: float, edits: list) -> None:
    data = seed_bytes(source, seed, "kineto", request)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("mutant.json.gz" if how == "gzip" else "mutant.json")
        if how == "flip":
            data = flip(data, flips)
        elif how == "truncate":
            data = data[: int(cut * len(data))]
        elif how == "edit":
            data = edit_json(data, edits)
        else:  # damage the compressed stream itself
            data = flip(gzip.compress(data, mtime=0), flips)
        path.write_bytes(data)
        check_clean(path)


NSYS_VALUES = st.one_of(st.none(), st.sampled_from([0, -1, 2**63 - 1, -(2**63), 1e19, -1e19, 0.5]),
                        st.integers(-(2**40), 2**40), st.text(max_size=8), st.binary(max_size=8))
ROW_EDIT = st.tuples(st.sampled_from(["set", "delete", "drop"]), st.sampled_from(
    ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS",
     "StringIds", "TARGET_INFO_GPU", "EXPORT_META_DATA", "META_DATA_EXPORT", "ThreadNames", "PROCESSES"]),
    st.floats(0, 1), st.floats(0, 1), NSYS_VALUES)


def edit_rows(path: Path, edits: list[tuple]) -> None:
    """Apply row edits to an SQLite copy; an edit a constraint refuses is skipped."""
    con = sqlite3.connect(path)
    for kind, table, col_at, row_at, value in edits:
        cols = [r[1] for r in con.execute("SELECT * FROM pragma_table_info(?)", (table,))]
        if not cols:
            continue
        rowids = [r[0] for r in con.execute(f'SELECT rowid FROM "{table}"')]  # table names: our constants
        try:
            if kind == "drop":
                con.execute(f'DROP TABLE "{table}"')
            elif rowids:
                rowid = rowids[min(int(row_at * len(rowids)), len(rowids) - 1)]
                if kind == "delete":
                    con.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
                else:
                    col = cols[min(int(col_at * len(cols)), len(cols) - 1)]
                    con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, rowid))
        except sqlite3.Error:
            pass
    con.commit()
    con.close()


@pytest.mark.parametrize("source", ["synthetic", "shared"])
@FUZZ
@given(seed=st.integers(0, 99), how=st.sampled_from(["flip", "truncate", "rows"]),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=8),
       cut=st.floats(0, 1), edits=st.lists(ROW_EDIT, min_size=1, max_size=6))
def test_mutated_nsys_exports_analyse_or_fail_cleanly(source: str, request: pytest.FixtureRequest, seed: int,
                                                      how: str, flips: list, cut: float, edits: list) -> None:
    data = seed_bytes(source, seed, "nsys", request)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutant.sqlite"
        if how == "flip":
            path.write_bytes(flip(data, flips))
        elif how == "truncate":
            path.write_bytes(data[: int(cut * len(data))])
        else:
            path.write_bytes(data)
            edit_rows(path, edits)
        check_clean(path)
