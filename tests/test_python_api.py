"""The Python API: docs/python-api.md's examples run as written, ``tracekit.analyze`` gives the CLI's JSON,
``import tracekit`` stays light, and bad options fail with the CLI's one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracekit
from tracekit.cli import main
from tracekit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "dsv32_ep16_decode.sqlite"
CONFIG = "dsv32-ep16"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8"), re.S)


def test_the_documented_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    blocks = examples()
    assert len(blocks) >= 5
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/python-api.md", "exec"), namespace)  # noqa: S102 - the doc's own examples
    assert "attn_core" in capsys.readouterr().out
    assert (tmp_path / "before.json").is_file()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("api-cache")


def cli_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_analyze_equals_the_cli_json_on_the_planted_capture(cache: Path) -> None:
    with tracekit.analyze(FIXTURE, CONFIG, cache_dir=cache) as result:
        assert result.to_dict() == cli_json(str(FIXTURE), "--config", CONFIG, "--cache-dir", str(cache))
        assert json.loads(result.render("json")) == result.to_dict()
        assert result.verdict == "kernel" and result.tables.steps.height == result.report["steps"]["count"]


def test_analyze_equals_the_cli_json_on_a_real_two_rank_trace(cache: Path, shared_traces: Path) -> None:
    trace = shared_traces / "nsys" / "nsys-ai__mfu_2gpu_before.sqlite"
    result = tracekit.analyze(trace, cache_dir=cache, detail=False)
    assert result.to_dict() == cli_json(str(trace), "--cache-dir", str(cache))
    assert result.tables.ranks is not None and result.tables.ranks.height == result.report["ranks"]["participants"]
    assert result.tables.steps is None  # the report alone has no per-step detail
    with pytest.raises(InputError, match="detail=True"):
        result.render("html")


def test_kernels_and_doctor_equal_the_cli(cache: Path) -> None:
    for command, result in (("kernels", tracekit.kernels(FIXTURE, by="class", cache_dir=cache)),
                            ("doctor", tracekit.doctor(FIXTURE, cache_dir=cache))):
        cli = CliRunner().invoke(main, [command, str(FIXTURE), "--cache-dir", str(cache), "--format", "json"]
                                 + (["--by", "class"] if command == "kernels" else []))
        assert cli.exit_code == 0, cli.output
        assert json.loads(result.render("json")) == json.loads(cli.stdout), command


def test_import_tracekit_loads_no_library() -> None:
    code = "import sys, tracekit; print(sorted(m for m in ('polars', 'duckdb', 'tracekit.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        tracekit.nothing  # noqa: B018


@pytest.mark.parametrize(("call", "message"), [
    (lambda: tracekit.analyze(FIXTURE, step="("), "step '\\(' is not a regex"),
    (lambda: tracekit.analyze(FIXTURE, batch=4), "need a config"),
    (lambda: tracekit.analyze([]), "no input files"),
    (lambda: tracekit.api.floor(CONFIG, measured="fast"), "measured 'fast'"),
    (lambda: tracekit.kernels(FIXTURE, by="colour"), "by='colour'"),
    (lambda: tracekit.diff(FIXTURE, FIXTURE, noise_threshold="lots"), "noise_threshold"),
])
def test_bad_options_raise_the_cli_errors(call, message: str) -> None:  # noqa: ANN001 - a lambda
    with pytest.raises(InputError, match=message):
        call()
