"""Start-up: `tracekit --help` and argument errors load click alone, each command's module loads only when it
runs, and `--no-cache` reads into memory (no store file, no manifest, no hash) with the cached path's report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracekit.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fixtures" / "dsv32_ep16_decode.sqlite"
HEAVY = ("polars", "duckdb", "numpy", "pyarrow", "rich", "tracekit.floor", "tracekit.store", "tracekit.analysis",
         "tracekit.report", "tracekit.parsers", "tracekit.budgets")

# One interpreter runs the cases in turn (start-up paid once); what is loaded is recorded after each, so the
# first case that loads a heavy module shows it.
_PROBE = """
import json, sys
from tracekit.cli import main
out = []
for args in json.loads(sys.argv[1]):
    try:
        main(args, prog_name="tracekit")
        code = 0
    except SystemExit as exc:
        code = exc.code
    out.append([code, sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)])
print(json.dumps(out))
"""


def _loaded(cases: list[list[str]], watched: tuple[str, ...] = HEAVY) -> list[tuple[int, list[str]]]:
    run = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(cases), json.dumps(watched)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    return [tuple(r) for r in json.loads(run.stdout.strip().splitlines()[-1])]


def test_help_and_argument_errors_load_click_alone() -> None:
    cases = [["--help"], ["--version"], ["analyze"], ["analyze", "--bogus"], ["analyze", "x", "--jobs", "0"],
             ["floor", "--config"], ["kernels", "--limit", "-1", "x"], ["nosuchcommand"]]
    results = _loaded(cases)
    assert [code for code, _ in results] == [0, 0, 2, 2, 2, 2, 2, 2]
    assert {tuple(args): loaded for args, (_, loaded) in zip(cases, results, strict=True) if loaded} == {}


def test_a_command_loads_its_own_module_only() -> None:
    (code, loaded), = _loaded([["configs", "--format", "json"]], (*HEAVY, "tracekit.cli.analyze"))
    assert code == 0 and "tracekit.floor" in loaded and "tracekit.cli.analyze" not in loaded
    assert "tracekit.store" not in loaded and "duckdb" not in loaded


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_is_served_by_its_module(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert isinstance(command, click.Command) and command.name == name and command.help


def test_no_cache_reads_into_memory_and_gives_the_cached_report(tmp_path: Path, monkeypatch) -> None:
    scratch, cache = tmp_path / "tmp", tmp_path / "cache"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    runner = CliRunner()
    uncached = runner.invoke(main, ["analyze", str(SAMPLE), "--no-cache", "--format", "json", "-q"])
    assert uncached.exit_code == 0, uncached.output
    assert list(scratch.iterdir()) == [] and not cache.exists()  # nothing written: no store file, no manifest
    stores = runner.invoke(main, ["ingest", str(SAMPLE), "--no-cache", "--format", "json", "-q"])
    assert json.loads(stores.stdout)["stores"][0]["store"] == ":memory:"
    cached = runner.invoke(main, ["analyze", str(SAMPLE), "--cache-dir", str(cache), "--format", "json", "-q"])
    assert cached.exit_code == 0 and json.loads(uncached.stdout) == json.loads(cached.stdout)


def test_a_cached_report_is_read_without_the_store_or_the_analysis(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    args = ["analyze", str(SAMPLE), "--cache-dir", str(cache), "--format", "json", "-q"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    for store in cache.glob("*.duckdb"):  # the report alone answers: no store is opened
        store.unlink()
    probe = ("import json, sys\nfrom tracekit.cli import main\ntry:\n    main(json.loads(sys.argv[1]))\n"
             "except SystemExit:\n    pass\n"
             "print(json.dumps(sorted(m for m in ('tracekit.analysis.analyze', 'tracekit.analysis.device') "
             "if m in sys.modules)), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", probe, json.dumps(args)], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert json.loads(run.stdout) == json.loads(first.stdout)
    assert json.loads(run.stderr.strip().splitlines()[-1]) == []
