"""Data safety: no command modifies or adds to its inputs, and a damaged cache is rebuilt, never trusted.

(test_cli_store.py covers a store cut short, two concurrent processes and the atomic --out.)
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tracekit.cli import main

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
    assert sorted(p.name for p in cache.iterdir()) == [db.name, *(db.with_suffix(s).name for s in (".json", ".lock"))]


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
