"""The HTML report as a person sees it: self-contained, escaped, and rendered by a real headless browser."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import IN_CI

from fixtures.scenarios import decode_capture
from fixtures.synth import MemOp, write_nsys
from tracekit import floor
from tracekit.analysis.analyze import run_analysis
from tracekit.analysis.options import AnalyzeOptions
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main
from tracekit.store.ingest import open_store

CONFIG = "dsv32-ep16"
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fixtures" / "dsv32_ep16_decode.sqlite"
HOSTILE_KERNEL = "void flash_mla</script><script>alert(1)</script>\"'&<b>(int)"
HOSTILE_STEP = "step \"</script><script>alert(2)</script>' #"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def hostile_capture(tmp_path: Path) -> Path:
    """The planted decode capture with an attention kernel and the step ranges given hostile names, plus
    one memcpy per step on its own stream."""
    budgets = class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())
    spec, _ = decode_capture(budgets, slow_class="attn_core")
    kernels = [dataclasses.replace(k, name=HOSTILE_KERNEL) if "flash_fwd" in k.name else k for k in spec.kernels]
    ranges = [dataclasses.replace(r, name=r.name.replace("ProfilerStep#", HOSTILE_STEP)) for r in spec.ranges]
    steps = sorted(r.start_ns for r in spec.ranges if r.name.startswith("ProfilerStep#"))
    first_gpu = sorted(k.start_ns for k in spec.kernels)
    memops = [MemOp("memcpy", "HtoD", 4096, 0, 9, next(t for t in first_gpu if t > s) + 1000, 5000, 4242, 4242,
                    s + 1000, 1000, launch_api="cudaMemcpyAsync") for s in steps]
    path = tmp_path / "hostile.sqlite"
    write_nsys(dataclasses.replace(spec, kernels=kernels, ranges=ranges, memops=memops), path)
    return path


def analyze_html(path: Path, out: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--config", CONFIG, "--format", "html",
                                       "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def median_step_counts(path: Path, *step: str) -> tuple[int, int]:
    """Kernels and memory operations of the lower-median step, counted from the analysis itself."""
    analysis = run_analysis(open_store([path], use_cache=False),
                            AnalyzeOptions(config=CONFIG, step_regex=step[0] if step else None))
    pairs = sorted(((a.dur_ns, a.window.index, d, a) for d in analysis.devices for a in d.accounts),
                   key=lambda p: (p[0], p[1]))
    _, _, dev, acc = pairs[(len(pairs) - 1) // 2]
    detail, full = analysis.step_detail(dev, acc)
    names = detail.ops.name[full.ops_in_window].tolist()
    memops = sum(1 for n in names if n in ("memcpy", "memset"))
    return len(names) - memops, memops


def timeline_markup(page: str, index: int) -> str:
    start = page.index(f'id="tl-{index}"')
    end = page.find('class="tl" id="tl-', start + 1)
    return page[start:end if end > 0 else len(page)]


def test_page_is_self_contained(tmp_path: Path) -> None:
    page = analyze_html(SAMPLE, tmp_path / "r.html")
    assert not re.search(r"https?://", page), "a URL in a self-contained page"
    assert not re.search(r"<(link|img|iframe|object|embed)\b|<script[^>]*\bsrc=|@import|url\(", page, re.I)
    assert page.count("<script") == page.count("</script>") == 2
    for heading in ("Verdict", "Floor reconciliation", "Step timeline", "Kernel classes against their budgets",
                    "Walls of dsv32-ep16", "Deep-dive targets"):
        assert heading in page, heading
    assert page.index("Floor reconciliation") < page.index("Step timeline")
    assert 'class="copy" data-copy="ncu-0"' in page
    kernels, memops = median_step_counts(SAMPLE)
    assert timeline_markup(page, 0).count('class="k"') == kernels and memops == 0


def test_gap_times_count_from_their_step_and_headings_wrap(tmp_path: Path) -> None:
    """The longest gaps' "at" column counts from the start of the gap's step (not epoch milliseconds), and a
    long kernel name in a heading wraps instead of running off the page."""
    page = analyze_html(SAMPLE, tmp_path / "r.html")
    table = page[page.index("<h3>Longest gaps</h3>"):]
    table = table[: table.index("</table>")]
    assert "at (from the step&#x27;s start)" in table or "at (from the step's start)" in table
    rows = re.findall(r"<tr><td[^>]*>.*?</tr>", table)
    assert rows
    result = CliRunner().invoke(main, ["analyze", str(SAMPLE), "--no-cache", "--config", CONFIG, "--format", "json"])
    report = json.loads(result.stdout)
    step_ms = report["steps"]["step_ns_p50"] / 1e6
    for row, gap in zip(rows, report["host_gaps"]["top"], strict=True):
        at = re.findall(r"<td[^>]*>([^<]*)</td>", row)[3]
        assert float(at.split()[0]) == pytest.approx(gap["step_offset_ns"] / 1e6, abs=0.01)
        assert 0 <= gap["step_offset_ns"] < 2 * step_ms * 1e6
    assert re.search(r"h1, h2, h3[^{]*\{ overflow-wrap: anywhere; \}", page)


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    page = analyze_html(hostile_capture(tmp_path), tmp_path / "r.html", "--step", "^step ")
    assert "alert(" in page  # the names are shown ...
    assert "<script>alert" not in page and "</script><script>" not in page  # ... but only as text
    assert page.count("<script") == page.count("</script>") == 2
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;&lt;b&gt;" in page
    data = re.search(r'<script type="application/json" id="tk-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data)["steps"][0].startswith(HOSTILE_STEP)
    assert "\u2028" not in page and "\u2029" not in page


def test_html_needs_out_and_other_commands_render_plain_pages(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", str(SAMPLE), "--no-cache", "--format", "html"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1 and "--out" in result.stderr
    result = CliRunner().invoke(main, ["kernels", str(hostile_capture(tmp_path)), "--no-cache", "--format", "html"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<!DOCTYPE html>") and "<table>" in result.stdout
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in result.stdout and "<script>alert" not in result.stdout


# A harness put before the page's own scripts: it records errors and, once loaded, clicks "zoom in".
HARNESS = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
var __ce = console.error;
console.error = function () { window.__errors.push([].join.call(arguments, " ")); __ce.apply(console, arguments); };
window.addEventListener("load", function () {
  var out = document.createElement("pre"), svg = document.querySelector("#tl-0 .tl-svg");
  var before = svg.getAttribute("viewBox");
  document.querySelector('#tl-0 button[data-zoom="in"]').click();
  out.id = "tk-test";
  out.textContent = JSON.stringify({errors: window.__errors, before: before, after: svg.getAttribute("viewBox"),
    marks: document.querySelectorAll("#tl-0 rect.k").length, memops: document.querySelectorAll("#tl-0 rect.m").length,
    ticks: document.querySelectorAll("#tl-0 .tl-axis text").length});
  document.body.appendChild(out);
});
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless=new", "--disable-background-networking", "--no-sandbox",
                           "--disable-gpu", "--disable-extensions", "--no-first-run", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_report_renders_in_a_headless_browser(tmp_path: Path) -> None:
    if CHROMIUM is None:  # CI installs chromium (.ci/run): there a missing browser is a failure, not a skip
        message = "chromium is not installed (.ci/run installs it with apt-get)"
        if IN_CI:
            pytest.fail(message + "; CI must run the browser test")
        pytest.skip(message)
    page = analyze_html(hostile_capture(tmp_path), tmp_path / "report.html", "--step", "^step ")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<head>", "<head>" + HARNESS, 1), encoding="utf-8")
    run = chromium("--virtual-time-budget=3000", "--dump-dom", probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="tk-test">(.*?)</pre>', run.stdout, re.S)
    assert found, "the page did not finish loading: " + run.stdout[-500:]
    state = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                       .replace("&amp;", "&"))
    assert state["errors"] == []
    assert not re.search(r"CONSOLE.*(Uncaught|Error)", run.stderr), run.stderr
    assert re.search(r'<html lang="en" data-tk-ready="1"', run.stdout), "the report's script did not finish"
    kernels, memops = median_step_counts(tmp_path / "hostile.sqlite", "^step ")
    assert (state["marks"], state["memops"]) == (kernels, memops) and memops == 1
    assert state["after"] != state["before"] and state["ticks"] >= 3  # zoom works, the axis is drawn
    assert "alert(" not in "".join(state["errors"]) and "<script>alert" not in run.stdout

    shot = tmp_path / "report.png"
    run = chromium("--window-size=1400,1000", f"--screenshot={shot}", (tmp_path / "report.html").as_uri())
    assert run.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


#: The reports the layout is checked on (issue 27): vLLM piecewise graphs, SGLang decode, 8 DLRM ranks.
LAYOUT_REPORTS = {
    "vllm": ("torch/tracelens__vllm_prefilldecode_piecewise/graph_execution.json.gz",
             "gptoss-20b-vllm-mi300x-prefill"),
    "sglang": ("torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz", "qwen3-8b-sglang-mi300x"),
    "dlrm8": ("torch/dlrm8_v100", None),
}
LAYOUT_WIDTHS = (1400, 800)
MIN_CELL_CHARS = 8
MEASURE = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("iframe").forEach(function (f) {
    var doc = f.contentDocument, narrow = [];
    function width(cell, text) {  // the text's width in the cell's own font, on one line
      var s = doc.createElement("span");
      s.style.cssText = "position:absolute;visibility:hidden;white-space:nowrap";
      s.textContent = text; cell.appendChild(s);
      var w = s.getBoundingClientRect().width; cell.removeChild(s); return w;
    }
    doc.querySelectorAll("td, th").forEach(function (c) {
      var st = doc.defaultView.getComputedStyle(c), text = c.textContent.trim();
      if (!text) return;
      var inner = c.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
      var need = Math.min(width(c, "0".repeat(MIN_CHARS)), width(c, text));
      if (inner + 0.5 < need) narrow.push([text.slice(0, 60), Math.round(inner), Math.round(need)]);
    });
    out.push({report: f.dataset.report, width: f.clientWidth, page: doc.documentElement.scrollWidth,
              cells: doc.querySelectorAll("td, th").length, narrow: narrow.slice(0, 5), n_narrow: narrow.length});
  });
  var pre = document.createElement("pre"); pre.id = "tk-measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>""".replace("MIN_CHARS", str(MIN_CELL_CHARS))


def test_report_layout_fits_the_window(shared_traces: Path, tmp_path: Path) -> None:
    """At 1400 and 800 px, measured in the DOM by one headless Chromium session: the page is no wider than the
    window, and no table cell is narrower than 8 characters of its text (or its whole text when shorter)."""
    if CHROMIUM is None:
        message = "chromium is not installed (.ci/run installs it with apt-get)"
        if IN_CI:
            pytest.fail(message + "; CI must run the browser test")
        pytest.skip(message)
    frames = []
    for name, (path, config) in LAYOUT_REPORTS.items():
        args = ["analyze", str(shared_traces / path), "--cache-dir", str(tmp_path / "cache"), "--format", "html",
                "--out", str(tmp_path / f"{name}.html"), *(["--config", config] if config else [])]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        frames += [f'<iframe data-report="{name}" src="{name}.html" style="width:{w}px;height:900px;border:0">'
                   "</iframe>" for w in LAYOUT_WIDTHS]
    harness = tmp_path / "layout.html"
    harness.write_text(f"<!doctype html><html><head>{MEASURE}</head><body>{''.join(frames)}</body></html>",
                       encoding="utf-8")
    run = chromium("--allow-file-access-from-files", "--virtual-time-budget=8000", "--window-size=1500,1000",
                   "--dump-dom", harness.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="tk-measure">(.*?)</pre>', run.stdout, re.S)
    assert found, "the harness did not run: " + run.stdout[-500:]
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                          .replace("&amp;", "&"))
    assert sorted((m["report"], m["width"]) for m in measured) == sorted(
        (n, w) for n in LAYOUT_REPORTS for w in LAYOUT_WIDTHS)
    for m in measured:
        assert m["cells"] > 20, m
        assert m["page"] <= m["width"], m
        assert m["n_narrow"] == 0, m
