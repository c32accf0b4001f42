"""Kernel names, NVTX texts, file names and the recorded command line are untrusted text.

A planted decode capture (attention over budget, so the analysis nominates ncu targets) gets hostile
text in its over-budget kernel's name, in the host ranges that show up beside the longest gaps, in its
file name and (nsys) in its recorded command line. Every report format must render it inertly, every
``ncu`` command must parse in ``sh`` and run exactly the intended argument vector, and the text must
survive every SQL path byte for byte (a query that spliced it in would break on the quotes).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios import NAMES, GapPlan, decode_capture
from fixtures.synth import write_kineto, write_nsys
from tracekit.analysis.ncu import APP_PLACEHOLDER
from tracekit.analysis.options import REPORT_SCHEMA
from tracekit.budgets.configs import load_config
from tracekit.cli import main
from tracekit.report.analysis import report_document
from tracekit.report.render import FORMATS, render

CONFIG = "dsv32-ep16"
GAPS = GapPlan(launch_ns=300_000, sync_ns=200_000, host_idle_ns=100_000, dependency_ns=150_000)
HOSTILE = {
    "shell": "$(touch pwned) `touch pwned2` 'single' \"double\" ; touch pwned3 & \\ \n second line",
    "sql": "x'); DROP TABLE kernels; -- \"y\" '' %s ? $1",
    "markup": "<script>alert(1)</script> | cell | [x](http://e) **b** _i_ # h <img src=x onerror=alert(1)>",
    "ansi": "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x9b2J \x00 \r\t",
    "long": "A" * 1_000_000 + "$(touch pwned)",
    # Text that displays as other text: bidi overrides and isolates, line and paragraph separators, zero-width
    # characters; a full-width formula, entities and autolinks for CSV and Markdown (issue 28).
    "display": "safe\u202eexe.cod\u202c \u2066rtl\u2069 \u2028line\u2029para \u200bzw\ufeff \u061c "
               "＝1+1 =cmd &amp;lt;b&amp;gt; &lt;i&gt; http://e.x www.e.x a@b.c $x$ ~~s~~ ![i](x)",
}
FILE_NAME = "cap $(touch pwned) `id` 'q' \"d\" ;|<b>\x1b[31m\nx"
APP_ARGS = ["$(touch pwned)", "a b;c", "it's", "`id`"]
ARGV_PRINTER = [sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]
# any control character but \t and \n, and the characters that change how text around them displays
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def budgets() -> dict[str, int]:
    from tracekit import floor
    from tracekit.budgets.budget import class_budgets
    from tracekit.budgets.classify import load_rules

    return class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())


def hostile_trace(tmp_path: Path, fmt: str, text: str) -> tuple[Path, str, str]:
    """The planted capture with ``text`` in the attention kernel's name and the busy host ranges."""
    spec, _ = decode_capture(budgets(), gaps=GAPS, exposed_dispatch_ns=400_000, slow_class="attn_core")
    kernel, nvtx = f"attention_kernel<{text}>", f"nvtx {text}"
    spec = replace(spec, kernels=[replace(k, name=kernel) if k.name == NAMES["attn_core"] else k
                                  for k in spec.kernels],
                   ranges=[replace(r, name=nvtx) if r.name == "aten::linear" else r for r in spec.ranges])
    path = tmp_path / (FILE_NAME + (".sqlite" if fmt == "nsys" else ".json"))
    (write_nsys if fmt == "nsys" else write_kineto)(spec, path)
    if fmt == "nsys":  # the recorded command line, and a table whose name would break a spliced query
        con = sqlite3.connect(path)
        con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
                        [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(APP_ARGS)])
        con.execute('CREATE TABLE "x""); DROP TABLE StringIds; --" (a INTEGER)')
        con.commit()
        con.close()
    return path, kernel, nvtx


def run(*args: object) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result.stdout


@pytest.fixture(scope="module", params=[(f, h) for f in ("nsys", "kineto") for h in HOSTILE],
                ids=lambda p: f"{p[0]}-{p[1]}")
def analysed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    fmt, which = request.param
    tmp_path = tmp_path_factory.mktemp("hostile")
    path, kernel, nvtx = hostile_trace(tmp_path, fmt, HOSTILE[which])
    cache = tmp_path / "cache"
    out = tmp_path / "report.json"
    run("analyze", path, "--cache-dir", cache, "--config", CONFIG, "--format", "json", "--out", out)
    report = json.loads(out.read_text(encoding="utf-8"))
    doc = report_document(report)  # the other formats from the same report, as `emit` renders them
    outputs = {f: out.read_text(encoding="utf-8") if f == "json" else render(doc, f) for f in FORMATS}
    return {"fmt": fmt, "which": which, "path": path, "kernel": kernel, "nvtx": nvtx, "cache": cache,
            "tmp": tmp_path, "outputs": outputs, "report": report}


def test_text_survives_every_sql_path_byte_for_byte(analysed: dict) -> None:
    report, kernel = analysed["report"], analysed["kernel"]
    assert report["verdict"] == "kernel"
    assert [t["kernel"] for t in report["ncu_targets"]] == [kernel]
    assert report["inputs"][0]["path"] == str(analysed["path"])
    attn = next(c for c in report["classes"] if c["name"] == "attn_core")
    assert attn["over_budget"] and attn["kernels"][0]["name"] == kernel
    assert analysed["nvtx"] in {(g.get("host") or {}).get("range") for g in report["host_gaps"]["top"]}
    names = {r["name"] for r in json.loads(run("kernels", analysed["path"], "--cache-dir", analysed["cache"],
                                               "--format", "json"))["kernels by name"]}
    assert kernel in names
    info = json.loads(run("info", analysed["path"], "--cache-dir", analysed["cache"], "--format", "json"))
    assert info["files"][0]["file"] == str(analysed["path"])
    if analysed["which"] not in ("shell", "sql"):
        return  # the quotes that would break a spliced query: the slower paths below run on those two
    for by in ("name", "short-name", "name-grid-block", "class"):
        body = json.loads(run("kernels", analysed["path"], "--cache-dir", analysed["cache"], "--by", by,
                              "--format", "json"))
        assert sum(r["instances"] for r in body[f"kernels by {by}"]) == 6 * 12
    steps = json.loads(run("analyze", analysed["path"], "--cache-dir", analysed["cache"], "--format", "json",
                           "--step", "^" + re.escape(analysed["nvtx"]) + "$"))
    assert steps["steps"]["count"] == 6 and steps["steps"]["source"] == ["regex"]


def test_human_formats_render_the_text_inertly(analysed: dict) -> None:
    for fmt, text in analysed["outputs"].items():
        if fmt == "json":
            continue
        assert not CONTROL.search(text), (fmt, CONTROL.search(text))
        assert not re.search(r"^\s*second line", text, re.M), fmt  # a newline in a name breaks no line


def without_code_blocks(markdown: str) -> str:
    return re.sub(r"^(`{3,})sh\n.*?^\1$", "", markdown, flags=re.M | re.S)


def test_markdown_escapes_markup_and_keeps_tables_whole(analysed: dict) -> None:
    text = without_code_blocks(analysed["outputs"]["markdown"])
    assert "<script" not in text and "<img" not in text and "](http://e)" not in text.replace("\\](", "")
    table: list[int] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            table.append(len(re.findall(r"(?<!\\)\|", line)))
        elif table:
            assert len(set(table)) == 1, f"a cell broke its table: pipe counts {table}"
            table = []


def test_html_if_offered_escapes_markup(analysed: dict) -> None:
    if "html" not in analysed["outputs"]:
        pytest.skip("no html format")
    html = analysed["outputs"]["html"]
    assert "<script>alert(1)" not in html and "<img src=x" not in html and "\x1b" not in html


def test_csv_parses_with_a_row_per_record(analysed: dict) -> None:
    text = analysed["outputs"]["csv"]
    csv.field_size_limit(max(csv.field_size_limit(), 4 * len(text) + 1024))  # the 1 MB name is one field (the
    # limit is process-wide: raised, never lowered, so later tests' CSV reads keep theirs)
    for part in re.split(r"^# .*\n", text, flags=re.M):
        rows = list(csv.reader(io.StringIO(part)))
        rows = [r for r in rows if r]
        assert len({len(r) for r in rows}) <= 1, rows[:3]


def test_json_is_valid_and_ascii(analysed: dict) -> None:
    text = analysed["outputs"]["json"]
    assert text.isascii() and json.loads(text)["schema"] == REPORT_SCHEMA


def test_ncu_commands_parse_and_run_exactly_the_intended_argv(analysed: dict) -> None:
    targets = analysed["report"]["ncu_targets"]
    assert targets
    cwd = analysed["tmp"]
    for t in targets:
        command = t["command"]
        assert subprocess.run(["sh", "-n", "-c", command], capture_output=True).returncode == 0, command[:300]
        assert command.startswith("ncu ")
        line = shlex.join(ARGV_PRINTER) + command[len("ncu"):]
        done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd=cwd)
        assert done.returncode == 0, done.stderr[:500]
        argv = json.loads(done.stdout)
        app = ["python3", *APP_ARGS] if analysed["fmt"] == "nsys" else [APP_PLACEHOLDER]
        graph = ["--graph-profiling", "node"] if t["in_graph"] else []
        out_name = argv[-2 - len(app)]
        assert argv == ["--kernel-name-base", "function", "--kernel-name", argv[3], "--launch-skip",
                        str(t["launch_skip"]), "--launch-count", "1", "--set", "full", *graph, "-o", out_name,
                        "--", *app]
        assert argv[3].startswith("regex:") and re.fullmatch(argv[3][len("regex:"):], t["function"])
        assert re.fullmatch(r"tracekit_\d+_[A-Za-z0-9_.-]+", out_name)
        assert len(argv[3]) < 128 * 1024  # one argument of execve
    assert not list(cwd.rglob("pwned*")) and not Path("pwned").exists()


def test_csv_cells_that_would_start_a_spreadsheet_formula_are_neutralised() -> None:
    import polars as pl

    from tracekit.report.document import Document, Table
    from tracekit.report.render import render_csv

    frame = pl.DataFrame({"name": ["=HYPERLINK(\"http://e\")", "+1", "-cmd", "@SUM(A1)", "plain", "a=b"], "n": [1] * 6})
    lines = render_csv(Document("t", [Table("t", frame)])).splitlines()[1:]
    cells = [line.rsplit(",", 1)[0].strip('"') for line in lines]
    assert cells == ["'=HYPERLINK(\"\"http://e\"\")", "'+1", "'-cmd", "'@SUM(A1)", "plain", "a=b"]


def test_markdown_renders_no_markup_from_a_name(analysed: dict) -> None:
    """The Markdown through a CommonMark renderer with GitHub's tables and strike-through: no element that a
    name could have made (link, image, emphasis, code, strike-through, raw HTML)."""
    from markdown_it import MarkdownIt

    own = re.compile(r"^\*\*\w+ target \d+: [\w\\]+\*\*$", re.M)  # the document's own block titles
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(own.sub("", without_code_blocks(
        analysed["outputs"]["markdown"])))
    for tag in ("<a ", "<img", "<script", "<em>", "<strong>", "<s>", "<del>", "<code>", "<i>", "<b>"):
        assert tag not in html, (tag, html[max(0, html.find(tag) - 200):html.find(tag) + 200])


@pytest.mark.parametrize("command", ["info", "nvtx", "kernels"])
def test_other_commands_render_names_inertly(analysed: dict, command: str) -> None:
    """info, nvtx and kernels print the hostile kernel and range names inertly in every human format."""
    if analysed["which"] != "display":
        pytest.skip("the display-changing text; the others are checked through analyze's outputs")
    for fmt in ("table", "markdown", "csv"):
        text = run(command, analysed["path"], "--cache-dir", analysed["cache"], "--format", fmt)
        assert not CONTROL.search(text), (command, fmt, CONTROL.search(text))
        if fmt == "markdown":
            assert "<script" not in text and "<img" not in text


def test_csv_cells_that_a_spreadsheet_reads_as_formulas_after_folding() -> None:
    """A leading space, a full-width or small equals sign (NFKC folds them to '='), an ideographic space."""
    import polars as pl

    from tracekit.report.document import Document, Table
    from tracekit.report.render import render_csv

    cells = [" =1+1", "＝1+1", "\u3000=1", "﹦1", "\t=1", "+1", "plain", "a=b", " a"]
    lines = render_csv(Document("t", [Table("t", pl.DataFrame({"name": cells}))])).splitlines()[1:]
    got = [next(csv.reader([line]))[0] for line in lines]
    assert got == ["' =1+1", "'＝1+1", "'\u3000=1", "'﹦1", "\\t=1", "'+1", "plain", "a=b", " a"]


@pytest.mark.parametrize("which", sorted(HOSTILE))
def test_rocprof_filters_match_exactly_their_kernel(which: str) -> None:
    """Every printed rocprofv3 --kernel-include-regex, as the shell hands it over, matches its kernel (an
    ECMAScript regex_search; Python's re agrees on escaped literals) and no longer name; one argument stays
    under execve's 128 KiB."""
    from tracekit.analysis.rocprof import rocprof_command

    for kernel in (f"attention_kernel<{HOSTILE[which]}>", f"_Z3fooPKc{HOSTILE[which]}"):
        command = rocprof_command(kernel, 2, "tracekit_1_x", shlex.quote(APP_PLACEHOLDER))
        argv = shlex.split(command)
        regex = argv[argv.index("--kernel-include-regex") + 1]
        assert len(regex) < 128 * 1024 and argv[argv.index("--kernel-iteration-range") + 1] == "[3-3]"
        assert re.search(regex, kernel) and not re.search(regex, kernel + "x") and not re.search(regex, "x" + kernel)
        assert not CONTROL.search(command)
