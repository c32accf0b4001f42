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


@PROPERTY
@given(device_ops(), host_activity(), st.data())
def test_gap_causes_do_not_depend_on_earlier_queries(ops: DeviceOps, host: HostActivity,
                                                     data: st.DataObject) -> None:
    """A host's thread covers are built at its first query and kept (a batch of many steps asks at every step):
    a later query gives what the same host activity, never queried, gives."""
    gap_causes(random_intervals(data.draw), ops, host)
    gaps = random_intervals(data.draw)
    fresh = HostActivity(host.busy_by_thread, host.busy_by_process, host.sync_by_process)
    got, got_next = gap_causes(gaps, ops, host)
    want, want_next = gap_causes(gaps, ops, fresh)
    assert got.tolist() == want.tolist() and got_next.tolist() == want_next.tolist()


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


# ---- option values, special files, bombs, full disks, cache swaps (issue 28) ---------------------------------
#
# The rule of every case: exit 0, 2 or a gate status (10, 11, 12); a failure is one line starting
# `tracekit: error:`; never "internal error"; JSON on success parses strictly (no NaN or Infinity).

ALLOWED_EXITS = {0, 2, 10, 11, 12}
SET_EXAMPLES = int(os.environ.get("TRACEKIT_FUZZ_EXAMPLES", "20"))  # 2,000 in the long run (docs/errors.md)
SETS = settings(max_examples=SET_EXAMPLES, deadline=None, database=None, derandomize=not LONG_RUN,
                suppress_health_check=[HealthCheck.too_slow])
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "dsv32_ep16_decode.sqlite"


def set_keys() -> list[str]:
    from tracekit.floor.cost import COST_KEYS
    from tracekit.floor.deployment import FIELD_TYPES

    return sorted({*FIELD_TYPES, *COST_KEYS})


def number_text() -> st.SearchStrategy[str]:
    """Finite, non-finite, negative, huge and non-numeric values, as a user would type them."""
    return st.one_of(
        st.sampled_from(["nan", "-nan", "inf", "-inf", "Infinity", "1e308", "1e309", "-1", "0", "1e30", "9" * 40,
                         "0.5", "1.5", "", " ", "true", "8GB", "8GiB", "1e400k", "0x10", "1_000", "١٢"]),
        st.integers(-(2**80), 2**80).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=12),
    )


def check_rule(code: int, out: str, err: str, what: object) -> None:
    assert code in ALLOWED_EXITS, (what, code, err)
    assert "internal error" not in err and "Traceback" not in err, (what, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), (what, err)
    elif out.strip():
        def refuse(constant: str) -> None:
            raise AssertionError(f"{what}: {constant} in the JSON")

        json.loads(out, parse_constant=refuse)


@SETS
@given(key=st.sampled_from(set_keys()), value=number_text(),
       config=st.sampled_from(["dsv32-ep16", "llama3-70b-tp8-h100", "dsv3-train-h800"]))
def test_every_set_key_with_any_value_exits_cleanly(key: str, value: str, config: str) -> None:
    from tracekit.floor.cost import COST_KEYS

    command = "cost" if key in COST_KEYS else "floor"
    result = CliRunner().invoke(main, [command, "--config", config, "--set", f"{key}={value}", "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (key, value, result.exception)
    check_rule(result.exit_code, result.stdout, result.stderr, (key, value))


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(text=st.text(alphabet=st.sampled_from(list("a(){}[]*+?\\|^$.-,0123456789=<!:dPw")), max_size=16))
def test_any_step_regex_is_refused_in_one_line_or_runs_in_the_store(text: str) -> None:
    """A regex the check passes runs in DuckDB (RE2) without error; any other is an InputError."""
    import duckdb

    from tracekit.cli.common import check_step_regex
    from tracekit.errors import InputError

    try:
        check_step_regex(text)
    except InputError as exc:
        assert str(exc).startswith("--step ") and "\n" not in str(exc)
        return
    duckdb.sql("SELECT regexp_matches(s, $r) FROM (VALUES ('ProfilerStep#1'), ('')) t(s)", params={"r": text})


@pytest.fixture(scope="module")
def clean_kernels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    cache = tmp_path_factory.mktemp("fuzzcache")
    result = CliRunner().invoke(main, ["kernels", str(SAMPLE), "--cache-dir", str(cache), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    return cache, result.stdout


def _damage_cache(cache: Path, how: str, seed: int) -> None:
    import random
    import shutil
    import zlib

    rng = random.Random(seed)
    (db,) = cache.glob("*.duckdb")
    manifest = db.with_suffix(".json")
    if how == "flip-with-manifest":  # bytes flipped, the manifest recomputed to match: DuckDB's checksum catches it
        data = bytearray(db.read_bytes())
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        db.write_bytes(bytes(data))
        body = json.loads(manifest.read_text())
        body["size_bytes"], body["crc32"] = len(data), zlib.crc32(data)
        manifest.write_text(json.dumps(body))
    elif how == "truncate":
        db.write_bytes(db.read_bytes()[: rng.randrange(db.stat().st_size)])
    elif how == "folders":
        target = rng.choice([db, manifest, db.with_suffix(".lock")])
        if target.exists():
            target.unlink()
        target.mkdir()
    elif how == "killed-build":
        tmp = cache / f".{db.stem}.{seed}.tmp"
        tmp.mkdir()
        (tmp / "store.duckdb").write_bytes(db.read_bytes()[: rng.randrange(db.stat().st_size)])
        (tmp / "owner.lock").write_bytes(b"")
    elif how == "foreign-store":  # another input's store and manifest in this slot
        other = Path(__file__).resolve().parents[1] / "fixtures" / "sample_decode.sqlite"
        scratch = cache / "other"
        CliRunner().invoke(main, ["ingest", str(other), "--cache-dir", str(scratch)])
        (odb,) = scratch.glob("*.duckdb")
        shutil.copyfile(odb, db)
        shutil.copyfile(odb.with_suffix(".json"), manifest)
        shutil.rmtree(scratch)


@settings(max_examples=max(6, SET_EXAMPLES // 6), deadline=None, database=None, derandomize=not LONG_RUN,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(how=st.sampled_from(["flip-with-manifest", "truncate", "folders", "killed-build", "foreign-store"]),
       seed=st.integers(0, 10_000))
def test_a_damaged_or_swapped_cache_gives_the_clean_answer(clean_kernels: tuple[Path, str], how: str,
                                                           seed: int) -> None:
    import shutil

    source, clean = clean_kernels
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        shutil.copytree(source, cache)
        _damage_cache(cache, how, seed)
        result = CliRunner().invoke(main, ["kernels", str(SAMPLE), "--cache-dir", str(cache), "--format", "json"])
        check_rule(result.exit_code, result.stdout, result.stderr, (how, seed))
        assert result.exit_code == 0 and result.stdout == clean, (how, seed, result.stderr)


@pytest.mark.parametrize("case", ["fifo", "socket", "device", "link-loop", "bomb", "full-out", "dir-out", "fifo-out"])
def test_special_files_bombs_and_full_disks_exit_cleanly(tmp_path: Path, case: str) -> None:
    """Each class once more under the fuzz rule (tests/test_errors.py has the messages; standard output on a
    full disk, which needs a process of its own, is in tests/test_render.py)."""
    import socket

    target: Path | str = tmp_path / "t.json"
    args: list[str] = []
    sock = None
    if case == "fifo":
        os.mkfifo(target)
    elif case == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
    elif case == "device":
        target = "/dev/urandom"
    elif case == "link-loop":
        Path(target).symlink_to(target)
    elif case == "bomb":
        with gzip.open(tmp_path / "t.json.gz", "wb") as g:
            g.write(b'{"traceEvents": [' + b"\n" * (32 * 2**20))
        target, args = tmp_path / "t.json.gz", ["--max-decompressed", str(2**20)]
    else:
        target = SAMPLE
        if case == "full-out":
            args = ["--out", "/dev/full"]
        elif case == "dir-out":
            args = ["--out", str(tmp_path)]
        elif case == "fifo-out":
            os.mkfifo(tmp_path / "f")
            args = ["--out", str(tmp_path / "f")]
    try:
        result = CliRunner().invoke(main, ["kernels", str(target), "--cache-dir", str(tmp_path / "c"), *args])
    finally:
        if sock is not None:
            sock.close()
    assert "TRACEKIT_MAX_DECOMPRESSED" not in os.environ  # set for the command only
    check_rule(result.exit_code, "", result.stderr, case)
    assert result.exit_code == 2, (case, result.stderr)
