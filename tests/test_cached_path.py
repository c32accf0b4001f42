"""The cached path of a repeat `analyze` (issue 26): the rendering kept beside the cached report is printed
without loading the renderers, the store or the analysis, and only for the very report it came from; an
input's SHA-256 is remembered under its file identity and never trusted for a changed or damaged entry."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.store import cache as store_cache

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fixtures" / "dsv32_ep16_decode.sqlite"
WIDTH = {"COLUMNS": "120"}  # one table width for every run: the rendering is kept per width
HEAVY = ["polars", "duckdb", "numpy", "pyarrow", "rich", "tracekit.report.render", "tracekit.analysis.analyze",
         "tracekit.store.ingest"]
PROBE = ("import json, sys\nfrom tracekit.cli import main\ntry:\n    main(json.loads(sys.argv[1]))\n"
         "except SystemExit:\n    pass\n"
         "print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)), file=sys.stderr)")


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A cache holding the sample's report (one analysis), and each format's output as first rendered."""
    cache = tmp_path_factory.mktemp("cache")
    outputs = {}
    for fmt in ("table", "markdown", "csv", "json"):
        run = CliRunner(env=WIDTH).invoke(main, ["analyze", str(SAMPLE), "--cache-dir", str(cache), "--format", fmt,
                                                 "-q"])
        assert run.exit_code == 0, run.output
        outputs[fmt] = run.stdout
        outputs[fmt + " stderr"] = run.stderr
    return cache, outputs


def _args(cache: Path, fmt: str) -> list[str]:
    return ["analyze", str(SAMPLE), "--cache-dir", str(cache), "--format", fmt, "-q"]


def test_a_repeat_prints_the_kept_rendering_without_the_renderers(cached: tuple[Path, dict[str, str]]) -> None:
    cache, outputs = cached
    assert len(list((cache / "reports").glob("*.out"))) == 4  # one rendering per format, beside one report
    env = {**os.environ, **WIDTH}
    run = subprocess.run([sys.executable, "-c", PROBE, json.dumps(_args(cache, "table")), json.dumps(HEAVY)],
                         capture_output=True, text=True, cwd=ROOT, check=True, env=env)
    assert run.stdout == outputs["table"]
    assert json.loads(run.stderr.strip().splitlines()[-1]) == []
    for fmt in ("markdown", "csv", "json"):  # in process: the kept text and the CSV note, as first printed
        again = CliRunner(env=WIDTH).invoke(main, _args(cache, fmt))
        assert (again.stdout, again.stderr) == (outputs[fmt], outputs[fmt + " stderr"])
    assert "tracekit: note: CSV holds one table" in outputs["csv stderr"]


def test_a_damaged_or_foreign_rendering_is_rendered_again(cached: tuple[Path, dict[str, str]]) -> None:
    cache, outputs = cached
    entries = sorted((cache / "reports").glob("*.out"))
    for entry in entries:  # bytes damaged in place, same size
        data = bytearray(entry.read_bytes())
        data[-2] ^= 0x01
        entry.write_bytes(bytes(data))
    for fmt in ("markdown", "json"):
        assert CliRunner(env=WIDTH).invoke(main, _args(cache, fmt)).stdout == outputs[fmt]
    from tracekit.cli.rendered import read_rendering, write_rendering

    for entry in entries:  # a valid entry of another report: never printed for this one
        head = json.loads(entry.read_bytes().partition(b"\n")[0])
        write_rendering(entry, hashlib.sha256(b"another report").hexdigest(), "bogus\n", None)
        assert read_rendering(entry, head["report_sha256"]) is None
    for fmt in ("markdown", "json"):
        assert CliRunner(env=WIDTH).invoke(main, _args(cache, fmt)).stdout == outputs[fmt]


def _hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every whole-file hash from now on (the per-process memo cleared)."""
    store_cache._content_identity.cache_clear()
    seen: list[str] = []
    real = hashlib.file_digest

    def spy(f, digest):  # type: ignore[no-untyped-def]
        seen.append(f.name)
        return real(f, digest)

    monkeypatch.setattr(store_cache.hashlib, "file_digest", spy)
    return seen


def test_an_unchanged_input_is_not_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, memo = tmp_path / "t.bin", tmp_path / "cache"
    trace.write_bytes(b"a" * 1000)
    hashed = _hashed(monkeypatch)
    young = store_cache.file_identity(trace, memo)
    store_cache.remember_identity(trace, memo)
    assert not (memo / store_cache.HASH_MEMO).exists()  # written under RACY_NS ago: not remembered
    monkeypatch.setattr(store_cache, "RACY_NS", -1)
    store_cache.remember_identity(trace, memo)
    assert len(hashed) == 1 and len(list((memo / store_cache.HASH_MEMO).iterdir())) == 1
    store_cache._content_identity.cache_clear()
    assert store_cache.file_identity(trace, memo) == young and len(hashed) == 1  # read back, not hashed
    stat = trace.stat()
    time.sleep(0.05)  # past one coarse timestamp tick
    with trace.open("r+b") as f:  # edited in place, same size, the mtime put back: the ctime moved
        f.write(b"b")
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    store_cache._content_identity.cache_clear()
    edited = store_cache.file_identity(trace, memo)
    assert edited != young and edited[1] == hashlib.sha256(trace.read_bytes()).hexdigest() and len(hashed) == 2
    store_cache.remember_identity(trace, memo)
    for entry in (memo / store_cache.HASH_MEMO).glob("*.json"):  # another SHA-256 written in: not trusted
        memo_doc = json.loads(entry.read_text())
        memo_doc["sha256"] = "0" * 64
        entry.write_text(json.dumps(memo_doc))
    store_cache._content_identity.cache_clear()
    assert store_cache.file_identity(trace, memo) == edited and len(hashed) == 3


def test_a_failed_ingest_remembers_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad, cache = tmp_path / "bad.json", tmp_path / "cache"
    bad.write_text('{"traceEvents": [')
    monkeypatch.setattr(store_cache, "RACY_NS", -1)  # old enough to be remembered, were it kept
    run = CliRunner().invoke(main, ["ingest", str(bad), "--cache-dir", str(cache), "-q"])
    assert run.exit_code == 2 and not (cache / store_cache.HASH_MEMO).exists()
