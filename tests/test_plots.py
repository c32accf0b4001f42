"""`tracekit analyze --plots DIR`: the charts as PNG and SVG, linked from the Markdown report."""

from __future__ import annotations

import dataclasses
import sys
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios import decode_capture
from fixtures.synth import write_kineto
from tracekit import floor
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main

pytest.importorskip("matplotlib")

CONFIG = "dsv32-ep16"
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "dsv32_ep16_decode.sqlite"
CHARTS = ("timeline-median", "classes", "floor", "walls")


def test_plots_are_written_and_linked_relative_to_the_report(tmp_path: Path) -> None:
    report = tmp_path / "ticket" / "report.md"
    plots = tmp_path / "ticket" / "plots"
    result = CliRunner().invoke(main, ["analyze", str(SAMPLE), "--no-cache", "--config", CONFIG, "--format",
                                       "markdown", "--out", str(report), "--plots", str(plots)])
    assert result.exit_code == 0, result.output
    for name in CHARTS:
        png, svg = plots / f"{name}.png", plots / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, name
        assert ET.parse(svg).getroot().tag.endswith("svg"), name
    assert not list(plots.glob(".*")), "a temporary file was left behind"
    text = report.read_text()
    links = [urllib.parse.unquote(part.split(")")[0]) for part in text.split("](")[1:]]
    assert sorted(links) == sorted(f"plots/{n}.{ext}" for n in CHARTS for ext in ("png", "svg"))
    assert all((report.parent / link).is_file() for link in links)
    assert text.index("## plots") > text.index("# tracekit analyze")


def test_trace_text_cannot_break_the_plots(tmp_path: Path) -> None:
    """Step names with mathtext and markup characters are drawn as text (no matplotlib parse error)."""
    budgets = class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())
    spec, _ = decode_capture(budgets, slow_class="attn_core")
    ranges = [dataclasses.replace(r, name=r.name.replace("ProfilerStep#", "step $\\frac{a}{$ _^ <b>\x1b[31m #"))
              for r in spec.ranges]
    trace = tmp_path / "t.json.gz"
    write_kineto(dataclasses.replace(spec, ranges=ranges), trace)
    # a wide terminal: the note names a long temporary path, which an 80-column one would fold
    args = ["analyze", str(trace), "--no-cache", "--config", CONFIG, "--step", "^step ", "--plots", str(tmp_path / "p")]
    result = CliRunner(env={"COLUMNS": "1000"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p" / "timeline-median.svg").read_text().count("<svg") == 1
    assert f"plot: {tmp_path / 'p' / 'timeline-median.png'}" in result.stdout


def test_missing_matplotlib_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(main, ["analyze", str(SAMPLE), "--no-cache", "--plots", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "tracekit[plot]" in result.stderr


def test_walls_plot_has_honest_axes_and_draws_the_vs_config_and_the_slo(tmp_path: Path) -> None:
    """No offset label on a flat prefill sweep; --vs draws the second config, --tpot-slo its line."""
    from tracekit.budgets.configs import load_config
    from tracekit.floor import compute_walls
    from tracekit.floor.plot import walls_figure

    flat = compute_walls(load_config("gptoss-20b-vllm-mi300x-prefill", {"batch": "1"}))
    fig = walls_figure(flat)
    fig.canvas.draw()
    for ax in fig.axes:
        assert ax.yaxis.get_offset_text().get_text() == "", ax.yaxis.get_offset_text().get_text()
    a, b = (load_config(n, {"batch": "1"}) for n in ("dsv32-ep16", "dsv32-tp16"))
    walls = compute_walls(a, tpot_slo_ns=50_000_000, vs=b)
    fig = walls_figure(walls, compute_walls(b, tpot_slo_ns=50_000_000))
    labels = {line.get_label() for ax in fig.axes for line in ax.get_lines()}
    assert {"t_opt dsv32-ep16 (ms)", "t_opt dsv32-tp16 (ms)", "TPOT SLO 50 ms"} <= labels
    slo = next(line for line in fig.axes[0].get_lines() if line.get_label() == "TPOT SLO 50 ms")
    assert set(slo.get_ydata()) == {50.0}
    result = CliRunner().invoke(main, ["walls", "--config", "dsv32-ep16", "--vs", "dsv32-tp16", "--tpot-slo", "50ms",
                                       "--plot", str(tmp_path / "walls.png"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "walls.png").stat().st_size > 0
