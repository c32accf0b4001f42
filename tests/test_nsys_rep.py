"""``.nsys-rep`` reports: exported with ``nsys`` when it is on PATH (here a fake ``nsys`` that writes a fixture
export), into the cache and never beside the input, once per report; without ``nsys``, one line with the command
(tests/test_errors.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from click.testing import CliRunner

from fixtures.synth import write_nsys
from tests.test_errors import spec
from tracekit.cli import main
from tracekit.parsers.registry import skip_reason

FAKE_NSYS = """#!/bin/sh
# A stand-in for `nsys export --type sqlite --output OUT REPORT`: logs its arguments, copies the fixture export.
echo "$@" >> "{log}"
[ "$1" = export ] || exit 3
out=""
while [ $# -gt 1 ]; do
  if [ "$1" = "--output" ]; then out="$2"; fi
  shift
done
cp "{export}" "$out"
"""


def test_a_report_beside_its_export_is_skipped_in_a_directory(tmp_path: Path) -> None:
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x00NSYS-REP" + bytes(64))
    assert skip_reason(report) is None  # alone, it is read (exported, or one line with the command)
    write_nsys(spec(), tmp_path / "run.sqlite")
    assert skip_reason(report) == "its SQLite export beside it is read instead"


def test_report_is_exported_into_the_cache_and_read(tmp_path: Path) -> None:
    export = write_nsys(spec(), tmp_path / "fixture_export.sqlite")
    bin_dir, inputs, cache = tmp_path / "bin", tmp_path / "in", tmp_path / "cache"
    bin_dir.mkdir()
    inputs.mkdir()
    log = tmp_path / "nsys.log"
    fake = bin_dir / "nsys"
    fake.write_text(FAKE_NSYS.format(log=log, export=export))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    report = inputs / "run.nsys-rep"
    report.write_bytes(b"\x00NSYS-REP" + bytes(64))
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    results = []
    for _ in range(2):
        result = CliRunner(env=env).invoke(main, ["analyze", str(report), "--cache-dir", str(cache), "--format",
                                                  "json"])
        assert result.exit_code == 0, result.output
        results.append(json.loads(result.stdout))
    direct = CliRunner().invoke(main, ["analyze", str(export), "--no-cache", "--format", "json"])
    want = json.loads(direct.stdout)
    assert results[0]["steps"] == results[1]["steps"] == want["steps"]
    assert results[0]["classes"] == want["classes"] and results[0]["verdict"] == want["verdict"]
    assert results[0]["inputs"][0]["path"] == str(report)
    calls = log.read_text().splitlines()
    assert len(calls) == 1  # the second run reads the cached store
    output = Path(calls[0].split("--output ")[1].split(" ")[0])
    assert output.is_relative_to(cache) and not output.exists()  # exported in the cache, removed once read
    assert sorted(p.name for p in inputs.iterdir()) == ["run.nsys-rep"]  # nothing written beside the input
