"""Human formats speak human units: no table or markdown output of any command prints a raw nanosecond count
(a number followed by 'ns', or a table column in ns); JSON keeps the nanoseconds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main

ROOT = Path(__file__).resolve().parents[1]
TRACE = str(ROOT / "fixtures" / "dsv32_ep16_decode.sqlite")
CONFIG = "dsv32-ep16"
BENCH = str(ROOT / "fixtures" / "bench_results" / "sglang_bench_serving_sweep.jsonl")
RAW_NS = re.compile(r"\b\d[\d,]{3,} ?ns\b")  # '156466417 ns', '10,935 ns'
NS_HEADER = re.compile(r"(^|[ _(])ns\)?$")


def commands(report: str) -> dict[str, list[str]]:
    trace = [TRACE]
    return {
        "analyze": ["analyze", *trace, "--config", CONFIG], "info": ["info", *trace], "kernels": ["kernels", *trace],
        "kernels by class": ["kernels", *trace, "--by", "class"], "api": ["api", *trace], "nvtx": ["nvtx", *trace],
        "memory": ["memory", *trace], "doctor": ["doctor", *trace],
        "floor": ["floor", "--config", CONFIG, "--measured", "25ms"], "walls": ["walls", "--config", CONFIG],
        "predict": ["predict", "--config", CONFIG], "cost": ["cost", "--config", CONFIG], "configs": ["configs"],
        "predict training": ["predict", "--config", "gpt2-small-dp8-a100"],
        "floor training": ["floor", "--config", "gpt2-small-dp8-a100"],
        "walls vs": ["walls", "--config", CONFIG, "--vs", "dsv32-tp16", "--tpot-slo", "50ms"],
        "reconcile": ["reconcile", BENCH, "--config", "qwen3-8b-tp1-h100"], "diff": ["diff", report, report],
    }


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("units-cache")


@pytest.fixture(scope="module")
def report(cache: Path) -> str:
    out = cache / "report.json"
    result = CliRunner().invoke(main, ["analyze", TRACE, "--config", CONFIG, "--cache-dir", str(cache),
                                       "--format", "json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return str(out)


def raw_ns(text: str) -> list[str]:
    """Raw nanosecond counts in a table or markdown output: numbers in ns, and ns-named table columns."""
    found = [m.group(0) for m in RAW_NS.finditer(text)]
    for line in text.splitlines():
        cells = [c.strip().replace("\\_", "_") for c in re.split(r"[|┃│]", line) if c.strip()]
        if line.lstrip().startswith(("|", "┃")):
            found += [f"column {c!r}" for c in cells if NS_HEADER.search(c)]
    return found


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_no_command_prints_raw_nanoseconds(cache: Path, report: str, fmt: str) -> None:
    bad = {}
    for name, args in commands(report).items():
        extra = ["--cache-dir", str(cache)] if args[0] in ("analyze", "info", "kernels", "api", "nvtx", "memory",
                                                            "doctor") else []
        result = CliRunner(env={"COLUMNS": "400"}).invoke(main, [*args, *extra, "--format", fmt])
        assert result.exit_code == 0, (name, result.output)
        assert result.stdout.strip(), name
        if found := raw_ns(result.stdout):
            bad[name] = found[:5]
    assert not bad


def test_json_keeps_nanoseconds(report: str) -> None:
    doc = json.loads(Path(report).read_text())
    assert isinstance(doc["steps"]["step_ns_p50"], int) and doc["steps"]["step_ns_p50"] > 1_000_000
    assert any(re.search(r"\d+\.\d{3} ms", r) for r in doc["reasons"])  # the sentences speak ms
