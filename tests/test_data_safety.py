"""Data safety: no command modifies or adds to its inputs, and a damaged cache is rebuilt, never trusted.

(test_cli_store.py covers a store cut short, two concurrent processes and the atomic --out.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.store.cache import HASH_MEMO

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLE = FIXTURES / "dsv32_ep16_decode.sqlite"
# A few small real traces of each format (paths under ../shared/traces); a folder stands for its ranks.
REAL = ["nsys/extrap__nsys_db__con_kernel.sqlite",
        "torch/tracelens__inference__vllm_decode_full__graph_execution.json.gz", "torch/sampled2_rank0_1"]


def run(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def snapshot(paths: list[Path]) -> dict[str, tuple[str, int, int]]:
    """Every input file's SHA-256, size and mtime, plus the names beside it (nothing may be added)."""
    files = sorted({f for p in paths for f in ([*p.iterdir()] if p.is_dir() else [p])} |
                   {f for p in paths for f in (p.parent if p.is_file() else p).iterdir() if f.is_file()})
    return {str(f): (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_size, f.stat().st_mtime_ns)
            for f in files if f.is_file()}


def trace_commands() -> list[tuple[str, str]]:
    """Every registered command that reads traces: ('inputs', name) or ('before/after', name)."""
    out = []
    for name, command in sorted(main.commands.items()):
        params = {p.name for p in command.params}
        if "inputs" in params:
            out.append(("inputs", name))
        elif {"before", "after"} <= params:
            out.append(("before/after", name))
    return out


def input_sets(shared: Path | None) -> list[list[Path]]:
    sets = [[SAMPLE], [FIXTURES / "sample_decode_rank0.json.gz", FIXTURES / "sample_decode_rank1.json.gz"]]
    if shared is not None:
        sets += [[shared / p] for p in REAL if (shared / p).exists()]
    return sets


def check_untouched(inputs: list[Path], tmp_path: Path) -> None:
    commands = trace_commands()
    assert {"ingest", "info", "kernels", "analyze"} <= {name for _, name in commands}
    before = snapshot(inputs)
    for kind, name in commands:
        args: list[object] = [name, *inputs] if kind == "inputs" else [name, inputs[0], inputs[-1]]
        code, _, err = run(*args, "--cache-dir", tmp_path / "cache", "--format", "json")
        if name in ("ingest", "info", "kernels", "analyze"):
            assert code == 0, (name, inputs, err)
        else:
            assert code in (0, 2), (name, inputs, err)
        assert snapshot(inputs) == before, (name, inputs)
    if SAMPLE in inputs:
        code, _, err = run("analyze", SAMPLE, "--cache-dir", tmp_path / "cache", "--config", "dsv32-ep16")
        assert code == 0 and snapshot(inputs) == before, err


@pytest.mark.parametrize("index", range(2))
def test_commands_leave_fixture_inputs_untouched(tmp_path: Path, index: int) -> None:
    check_untouched(input_sets(None)[index], tmp_path)


@pytest.mark.parametrize("name", REAL)
def test_commands_leave_real_traces_untouched(tmp_path: Path, shared_traces: Path, name: str) -> None:
    if not (shared_traces / name).exists():
        pytest.skip(f"{name} is not in ../shared/traces")
    check_untouched([shared_traces / name], tmp_path)


# ---- the cache survives damage -----------------------------------------------------------------------


def ingest(cache: Path) -> dict:
    code, out, err = run("ingest", SAMPLE, "--cache-dir", cache, "--format", "json")
    assert code == 0, err
    return json.loads(out)["stores"][0]


def info(cache: Path) -> dict:
    code, out, err = run("info", SAMPLE, "--cache-dir", cache, "--format", "json")
    assert code == 0, err
    body = json.loads(out)
    body.pop("files")  # names the cache state ("cached"); everything else must match a clean read
    return body


def flip_middle(db: Path) -> None:
    data = bytearray(db.read_bytes())
    for off in range(len(data) // 2, len(data) // 2 + 8192):
        data[off] ^= 0x5A
    db.write_bytes(bytes(data))


def flip_block_of(db: Path, table: str) -> None:
    """Bytes flipped inside the storage block that holds ``table``'s first column segment (DuckDB's file: a
    12 KiB header, then blocks of ``block_size``, each with its checksum)."""
    con = duckdb.connect(str(db), read_only=True)
    block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    (block,) = con.execute(f"SELECT min(block_id) FROM pragma_storage_info('{table}') WHERE block_id >= 0").fetchone()
    con.close()
    data = bytearray(db.read_bytes())
    start = 3 * 4096 + block * block_size + 64
    for off in range(start, start + 4096):
        data[off] ^= 0x5A
    db.write_bytes(bytes(data))


def older_schema(db: Path) -> None:
    """A store from another schema version, with a manifest that matches its bytes."""
    con = duckdb.connect(str(db))
    con.execute("UPDATE store_info SET schema_version = schema_version - 1")
    con.execute("CHECKPOINT")
    con.close()
    manifest = db.with_suffix(".json")
    body = json.loads(manifest.read_text())
    body["size_bytes"], body["crc32"] = db.stat().st_size, zlib.crc32(db.read_bytes())
    manifest.write_text(json.dumps(body))


DAMAGE = {
    "bytes flipped in the middle": flip_middle,
    "cut to a third": lambda db: db.write_bytes(db.read_bytes()[: db.stat().st_size // 3]),
    "emptied": lambda db: db.write_bytes(b""),
    "manifest lost": lambda db: db.with_suffix(".json").unlink(),
    "manifest garbage": lambda db: db.with_suffix(".json").write_text("{not json"),
    "older schema version": older_schema,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_store_is_rebuilt_and_reads_like_a_clean_one(tmp_path: Path, damage: str) -> None:
    clean = info(tmp_path / "clean")
    cache = tmp_path / "cache"
    assert ingest(cache)["reused"] is False
    (db,) = cache.glob("*.duckdb")
    DAMAGE[damage](db)
    assert ingest(cache)["reused"] is False  # detected and rebuilt, not read as if whole
    assert ingest(cache)["reused"] is True
    manifest = json.loads(db.with_suffix(".json").read_text())
    assert manifest["size_bytes"] == db.stat().st_size and manifest["crc32"] == zlib.crc32(db.read_bytes())
    assert info(cache) == clean
    assert sorted(p.name for p in cache.iterdir() if p.name != HASH_MEMO) == [  # beside the inputs' SHA-256 memo
        db.name, *(db.with_suffix(s).name for s in (".json", ".lock"))]


def test_leftover_temporary_store_of_a_killed_ingest_is_never_read(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    ingest(cache)
    (db,) = cache.glob("*.duckdb")
    leftover = cache / f".{db.stem}.killed.tmp.duckdb"
    leftover.write_bytes(db.read_bytes()[:4096])
    db.unlink()
    db.with_suffix(".json").unlink()
    assert ingest(cache)["reused"] is False
    assert info(cache) == info(tmp_path / "clean")


# ---- no output over an input -----------------------------------------------------------------------

OUTPUT_OPTIONS = ("--out", "--perfetto", "--parquet", "--plots", "--plot", "--cache-dir")
DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


READ_PARAMS = {"inputs", "before", "results", "config"}


def output_options() -> list[tuple[str, str]]:
    """(command, option) for every registered command that reads a file, by each option that writes one."""
    return [(name, opt) for name, command in sorted(main.commands.items())
            if READ_PARAMS & {p.name for p in command.params}
            for p in command.params for opt in p.opts if opt in OUTPUT_OPTIONS]


def test_every_command_with_an_output_is_covered() -> None:
    found = output_options()
    assert {("analyze", "--out"), ("export", "--perfetto"), ("export", "--parquet"), ("analyze", "--plots"),
            ("diff", "--out"), ("floor", "--out"), ("info", "--cache-dir")} <= set(found)


def refused(args: list[object], option: str, fragment: str | None, before: dict) -> None:
    """Exit 2 with one line naming ``option`` (and ``fragment``, as docs/errors.md has it); inputs untouched.
    ``fragment`` None: click itself refuses the path (a file given to a folder option)."""
    code, out, err = run(*args)
    assert code == 2 and out == "", (args, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: ") and option in lines[0], err
    if fragment is not None:
        assert lines[0].startswith(f"tracekit: error: {option} ") and fragment in lines[0], err
        assert fragment in DOC.read_text()
    assert snapshot([Path(p) for p in before]) == before, args


def is_folder_option(name: str, option: str) -> bool:
    param = next(p for p in main.commands[name].params if option in p.opts)
    return getattr(param.type, "file_okay", True) is False


def command_args(name: str, inputs: list[Path], tmp_path: Path) -> list[object] | None:
    """A call of ``name`` that reads ``inputs`` (a config file for the config-only commands)."""
    params = {p.name for p in main.commands[name].params}
    if "inputs" in params:
        return [name, *inputs, "--cache-dir", tmp_path / "cache"]
    if {"before", "after"} <= params:
        return [name, inputs[0], inputs[-1], "--cache-dir", tmp_path / "cache"]
    if "results" in params:
        return [name, *inputs, "--config", "dsv32-ep16"]
    if "config" in params:  # floor, walls, cost, predict: a config file is what they read
        return [name, "--config", inputs[0]]
    return None


@pytest.mark.parametrize(("name", "option"), output_options())
def test_an_output_over_an_input_is_refused(tmp_path: Path, name: str, option: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    params = {p.name for p in main.commands[name].params}
    if "inputs" in params or {"before", "after"} <= params:
        trace = work / SAMPLE.name
        trace.write_bytes(SAMPLE.read_bytes())
    else:
        trace = work / "mine.toml"
        trace.write_text('extends = "dsv32-ep16"\n')
    args = command_args(name, [trace], tmp_path)
    assert args is not None
    if option == "--cache-dir" and "--cache-dir" in args:
        args = args[: args.index("--cache-dir")]
    before = snapshot([trace])
    refused([*args, option, trace], option, None if is_folder_option(name, option) else "is an input", before)

    # A folder of rank files: nothing is written inside it.
    params = {p.name for p in main.commands[name].params}
    if "inputs" in params or {"before", "after"} <= params:
        args = command_args(name, [work], tmp_path)
        assert args is not None
        if option == "--cache-dir":
            args = args[: args.index("--cache-dir")]
        refused([*args, option, work / "inside" / "out.json"], option, "inside the input folder", before)
        assert sorted(p.name for p in work.iterdir()) == [SAMPLE.name]


def test_an_output_that_is_a_link_to_an_input_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / SAMPLE.name
    trace.write_bytes(SAMPLE.read_bytes())
    (tmp_path / "hard.sqlite").hardlink_to(trace)
    (tmp_path / "soft.sqlite").symlink_to(trace)
    before = snapshot([trace])
    for alias in ("hard.sqlite", "soft.sqlite"):
        refused(["analyze", trace, "--no-cache", "--out", tmp_path / alias], "--out", "is an input", before)


def test_atomic_writes_never_change_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new file gets 0666 less the umask from the kernel; a replaced file keeps its mode; the
    process-wide umask (shared with every thread) is never set, not even for a moment."""
    import os

    from tracekit.files import write_atomically

    old = os.umask(0o027)
    try:
        def no_umask(_: int) -> int:
            raise AssertionError("os.umask called")

        monkeypatch.setattr(os, "umask", no_umask)
        new = tmp_path / "new.txt"
        write_atomically(new, "a")
        assert new.stat().st_mode & 0o777 == 0o640 and new.read_text() == "a"
        kept = tmp_path / "kept.txt"
        kept.write_text("old")
        kept.chmod(0o600)
        write_atomically(kept, "b")
        assert kept.stat().st_mode & 0o777 == 0o600 and kept.read_text() == "b"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt"]
    finally:
        monkeypatch.undo()
        os.umask(old)


# ---- the store key cannot be fooled by an edit in place ----------------------------------------------


def test_an_edit_in_place_that_keeps_size_mtime_and_ends_gets_a_new_store(tmp_path: Path) -> None:
    """The key hashes the whole file: bytes changed in the middle of a trace, with its size, mtime and first
    and last 64 KiB as they were (what the old sampled key looked at), give a new store with the new data."""
    import dataclasses
    import os
    import sqlite3

    from fixtures.scenarios import decode_capture
    from fixtures.synth import write_nsys
    from tracekit.store.cache import file_key

    spec, _ = decode_capture({c: 100_000 for c in ("gemm", "attn_core", "indexer", "moe_experts", "norm_elementwise",
                                                   "quant", "sampling", "embedding", "a2a_dispatch",
                                                   "a2a_combine")} | {"gemm": 300_000}, steps=300)
    trace = tmp_path / "run.sqlite"
    write_nsys(dataclasses.replace(spec), trace)
    size = trace.stat().st_size
    assert size > 4 * 64 * 1024  # the middle lies outside the sampled ends
    cache = tmp_path / "cache"
    code, out, err = run("kernels", trace, "--cache-dir", cache, "--format", "json")
    assert code == 0, err
    total = sum(r["total_ns"] for r in json.loads(out)["kernels by name"])
    key, head, tail, stat = file_key(trace), *_ends(trace), trace.stat()

    con = sqlite3.connect(trace)  # one kernel 1 us longer: pages in the middle change, the size does not
    (rowid,) = con.execute("SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start "
                           "LIMIT 1 OFFSET (SELECT count(*) / 2 FROM CUPTI_ACTIVITY_KIND_KERNEL)").fetchone()
    con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 1000 WHERE rowid = ?', (rowid,))
    con.commit()
    con.close()
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (trace.stat().st_size, trace.stat().st_mtime_ns) == (size, stat.st_mtime_ns)
    if _ends(trace) == (head, tail):  # the edit left the sampled ends alone: the old key would have reused
        assert file_key(trace) != key
    code, out, err = run("kernels", trace, "--cache-dir", cache, "--format", "json")
    assert code == 0, err
    assert sum(r["total_ns"] for r in json.loads(out)["kernels by name"]) == total + 1000


def _ends(path: Path) -> tuple[bytes, bytes]:
    data = path.read_bytes()
    return data[: 64 * 1024], data[-64 * 1024:]


def test_file_key_follows_the_content_not_the_name_or_mtime(tmp_path: Path) -> None:
    import os

    from tracekit.store.cache import file_key

    a = tmp_path / "a.sqlite"
    a.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    key = file_key(a)
    b = tmp_path / "b.sqlite"
    b.write_bytes(a.read_bytes())
    os.utime(b, ns=(1, 1))
    assert file_key(b) == key  # the same bytes elsewhere, another mtime: the same store
    data = bytearray(a.read_bytes())
    data[len(data) // 2] ^= 1
    st = a.stat()
    a.write_bytes(bytes(data))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert file_key(a) != key


def test_two_ingests_never_build_into_one_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ingests pick their temporary name at once, and the name generator gives both the same name
    first (the race: a name made free by unlink is taken again before DuckDB creates it). Each must still
    build in a place of its own, and the cache ends with one good store."""
    import tempfile
    import threading

    import tracekit.store.ingest as ingest_module

    names = iter(["same", "same", *(f"n{i}" for i in range(100))])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    barrier = threading.Barrier(2, timeout=30)
    opened: list[str] = []
    real_connect = ingest_module.duckdb.connect

    def connect(database: str = ":memory:", *args: object, **kwargs: object):
        if database.endswith("store.duckdb"):
            opened.append(database)
            barrier.wait()  # both have chosen where to build; neither has created the file yet
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(ingest_module.duckdb, "connect", connect)
    cache = tmp_path / "cache"
    errors: list[BaseException] = []

    def one() -> None:
        try:
            ingest_module.ingest_file(SAMPLE, cache)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(opened) == 2 and opened[0] != opened[1]
    monkeypatch.undo()
    assert ingest(cache)["reused"] is True
    assert sorted(p.suffix for p in cache.iterdir() if p.name != HASH_MEMO) == [".duckdb", ".json", ".lock"]


# ---- caches bound to their input (issue 28) ------------------------------------------------------------

OTHER = FIXTURES / "sample_decode.sqlite"


def report_of(path: Path, cache: Path | None) -> dict:
    args = ["--cache-dir", cache] if cache is not None else ["--no-cache"]
    code, out, err = run("analyze", path, *args, "--format", "json")
    assert code == 0, err
    body = json.loads(out)
    for f in body["inputs"]:
        f.pop("reused", None)
    return body


@pytest.fixture(scope="module")
def clean_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return {p.name: report_of(p, None) for p in (SAMPLE, OTHER)}


def slot(cache: Path, trace: Path) -> Path:
    from tracekit.store.cache import file_key

    return cache / f"{file_key(trace)}.duckdb"


def test_another_traces_store_in_the_slot_is_never_used(tmp_path: Path, clean_reports: dict) -> None:
    """B's store and manifest copied into A's slot (a swap): A's report is A's, rebuilt from A."""
    cache = tmp_path / "cache"
    for trace in (SAMPLE, OTHER):
        ingest_path(cache, trace)
    a, b = slot(cache, SAMPLE), slot(cache, OTHER)
    for suffix in (".duckdb", ".json"):
        a.with_suffix(suffix).write_bytes(b.with_suffix(suffix).read_bytes())
    assert report_of(SAMPLE, cache) == clean_reports[SAMPLE.name]
    assert json.loads(a.with_suffix(".json").read_text())["input_sha256"] == hashlib.sha256(
        SAMPLE.read_bytes()).hexdigest()


def test_swapped_cached_reports_are_never_used(tmp_path: Path, clean_reports: dict) -> None:
    cache = tmp_path / "cache"
    report_of(SAMPLE, cache)
    before = set((cache / "reports").glob("*.json"))
    report_of(OTHER, cache)
    (ra,) = before
    (rb,) = set((cache / "reports").glob("*.json")) - before
    da, db = ra.read_bytes(), rb.read_bytes()
    ra.write_bytes(db)
    rb.write_bytes(da)
    assert report_of(SAMPLE, cache) == clean_reports[SAMPLE.name]
    assert report_of(OTHER, cache) == clean_reports[OTHER.name]


def test_a_store_duckdb_finds_corrupt_is_set_aside_and_rebuilt(tmp_path: Path, clean_reports: dict) -> None:
    """Bytes flipped in the store with the manifest recomputed to match (so size and CRC-32 pass): DuckDB's
    own block checksum fails on the first query; the store is set aside under damaged/, rebuilt, and the
    report equals --no-cache's (before: `internal error: Corrupt database file`, on every later run too)."""
    cache = tmp_path / "cache"
    ingest_path(cache, SAMPLE)
    db = slot(cache, SAMPLE)
    flip_block_of(db, "kernels")  # a block every analysis reads, not the catalog or store_info
    manifest = json.loads(db.with_suffix(".json").read_text())
    manifest["size_bytes"], manifest["crc32"] = db.stat().st_size, zlib.crc32(db.read_bytes())
    db.with_suffix(".json").write_text(json.dumps(manifest))
    code, out, err = run("analyze", SAMPLE, "--cache-dir", cache, "--format", "json")
    assert code == 0 and "DuckDB reports this cached store corrupt" in err and "set aside" in err, err
    body = json.loads(out)
    for f in body["inputs"]:
        f.pop("reused", None)
    assert body == clean_reports[SAMPLE.name]
    assert sorted(p.name.split(".")[1] for p in (cache / "damaged").iterdir()) == ["duckdb", "json"]
    assert ingest_path(cache, SAMPLE)["reused"] is True


@pytest.mark.parametrize("which", [".duckdb", ".lock", ".json"])
def test_a_folder_in_a_store_slot_is_set_aside(tmp_path: Path, which: str) -> None:
    cache = tmp_path / "cache"
    ingest_path(cache, SAMPLE)
    db = slot(cache, SAMPLE)
    path = db.with_suffix(which)
    path.unlink()
    if which == ".duckdb":
        db.with_suffix(".json").unlink()
    path.mkdir()
    (path / "x").write_text("x")
    for _ in range(2):  # and on every later run
        code, _, err = run("info", SAMPLE, "--cache-dir", cache, "--format", "json")
        assert code == 0, err
    assert path.is_file() or (which == ".json" and not path.is_dir())
    assert len(list((cache / "damaged").iterdir())) == 1


def test_temp_folders_of_killed_runs_are_swept(tmp_path: Path) -> None:
    """A killed ingest's temporary folder (its build lock free) is removed by the next ingest; a live one
    (its lock held, here by this process) is left alone."""
    import fcntl

    from tracekit.store.cache import BUILD_LOCK

    cache = tmp_path / "cache"
    ingest_path(cache, SAMPLE)
    killed, live = cache / ".abc.killed.tmp", cache / ".abc.live.tmp"
    for d in (killed, live):
        d.mkdir()
        (d / "store.duckdb").write_bytes(b"x" * 4096)
        (d / BUILD_LOCK).write_bytes(b"")
    young = cache / ".abc.young.tmp"  # made a moment ago, not locked yet: may be a live build's
    young.mkdir()
    (young / BUILD_LOCK).write_bytes(b"")
    for d in (killed, live):
        os.utime(d, (1, 1))
    with open(live / BUILD_LOCK, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ingest_path(cache, OTHER)
        assert not killed.exists() and live.is_dir() and young.is_dir()


def ingest_path(cache: Path, trace: Path) -> dict:
    code, out, err = run("ingest", trace, "--cache-dir", cache, "--format", "json")
    assert code == 0, err
    return json.loads(out)["stores"][0]


# ---- every document a command writes: strict JSON with its schema, CSV that scripts load ----------------


def strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def every_command_call(tmp_path: Path) -> list[list[object]]:
    """One call of every registered command that writes a document (found from the CLI, so a new command with
    --format fails here until added)."""
    cache = ["--cache-dir", tmp_path / "cache"]
    calls = {
        "ingest": [SAMPLE, *cache], "info": [SAMPLE, *cache], "kernels": [SAMPLE, *cache], "api": [SAMPLE, *cache],
        "nvtx": [SAMPLE, *cache], "memory": [SAMPLE, *cache],
        "analyze": [SAMPLE, *cache, "--config", "dsv32-ep16"], "diff": [SAMPLE, SAMPLE, *cache],
        "export": [SAMPLE, *cache, "--parquet", tmp_path / "pq"], "floor": ["--config", "dsv32-ep16"],
        "walls": ["--config", "dsv32-ep16"], "predict": ["--config", "dsv32-ep16"],
        "cost": ["--config", "dsv32-ep16"], "configs": [],
        "reconcile": [FIXTURES / "bench_results" / "vllm_benchmark_serving_closed.json", "--config",
                      "qwen3-8b-tp1-h100"],
        "doctor": [SAMPLE, *cache], "baseline": ["list", "--baselines", tmp_path / "baselines"],
    }
    # every command with --format (baseline's subcommands have it; config-draft writes TOML, mcp serves stdio)
    with_format = {n for n, c in main.commands.items() if any(p.name == "fmt" for p in c.params)} | {"baseline"}
    assert set(calls) == with_format, set(calls) ^ with_format
    return [[name, *args] for name, args in sorted(calls.items())]


def test_every_json_document_names_its_schema_and_parses_strictly(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's JSON parses with a strict parser (no NaN or Infinity) and names its schema; every
    table of every command's document loads from its CSV in duckdb.read_csv and polars.read_csv, with one
    column per field and the rows of the table."""
    import polars as pl

    import tracekit.report.render as render_module

    docs: list = []
    real_render = render_module.render

    def keep(doc, fmt, *args, **kwargs):  # noqa: ANN001, ANN202 - the renderer's own signature
        docs.append(doc)
        return real_render(doc, fmt, *args, **kwargs)

    monkeypatch.setattr(render_module, "render", keep)
    for call in every_command_call(tmp_path):
        docs.clear()
        code, out, err = run(*call, "--format", "json")
        assert code in (0, 13, 14), (call, err)
        body = strict_json(out)
        assert isinstance(body.get("schema"), str) and re.fullmatch(r"tracekit\.[a-z]+/v\d+", body["schema"]), call
        (doc,) = docs
        for i, table in enumerate(doc.tables, 1):
            path = tmp_path / f"{call[0]}-{i}.csv"
            path.write_text(real_render(doc, "csv", table=str(i)))
            assert not [line for line in path.read_text().splitlines() if line.startswith("#")]
            if table.frame.height == 0:
                continue
            frame = pl.read_csv(path, infer_schema_length=None)
            got = duckdb.read_csv(str(path)).fetchall()
            assert frame.shape == table.frame.shape and len(got) == table.frame.height, (call, table.title)
            for name in frame.columns:
                assert not name.endswith("_ms"), (call, table.title, name)  # times as in the JSON: ns
