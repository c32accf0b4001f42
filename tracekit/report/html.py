"""`tracekit analyze --format html`: one self-contained page (inline CSS, JS and SVG; nothing fetched).

Verdict and floor reconciliation first, then the median step's timeline (and the slowest rank's),
classes against budgets, host gaps, exposed communication, the config's walls and the ncu targets.
Every text from a trace is escaped; the JSON for the script is escaped for a ``<script>`` element.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracekit import __version__
from tracekit.analysis.analyze import Analysis
from tracekit.files import write_atomically
from tracekit.report.analysis import over_budget_text
from tracekit.report.document import Document, finite
from tracekit.report.html_assets import CSS, JS
from tracekit.report.html_charts import class_bars, esc, floor_bars, legend, ms, timeline, walls_chart
from tracekit.report.html_layers import op_floor_section
from tracekit.report.html_ranks import ranks_section
from tracekit.report.text import inert, shorten
from tracekit.report.timeline import CAUSE_COLOURS, EXPOSED_COLOUR, analysis_colours, pictures, typed_of
from tracekit.schema.report import Report

NAME_CHARS = 160


def _inert_data(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {k: _inert_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_inert_data(v) for v in value]
    return value


def script_json(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element early: <, >, & and U+2028/2029 as \\u escapes; every
    string made inert (bidi controls and line separators as visible escapes: the page puts them in the DOM)
    and no NaN or infinity (null)."""
    text = json.dumps(_inert_data(finite(data)), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(title: str, body: str, data: dict[str, Any]) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body>{body}
<footer>tracekit {esc(__version__)} · self-contained report: no network access when opened.</footer>
<script type="application/json" id="tk-data">{script_json(data)}</script>
<script>{JS}</script></body></html>
"""


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] | None = None,
           names: set[int] | None = None) -> str:
    numeric, names = numeric or set(), names or set()

    def cls(i: int) -> str:
        return ' class="num"' if i in numeric else ' class="name"' if i in names else ""

    def cell(i: int, v: Any) -> str:
        text = str(v)
        if i in names and len(text) > NAME_CHARS:  # long kernel names: the middle cut, the whole name on hover
            return f'<td{cls(i)} title="{esc(text)}">{esc(shorten(text, NAME_CHARS))}</td>'
        return f"<td{cls(i)}>{esc(text)}</td>"

    th = "".join(f"<th{cls(i)}>{esc(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f'<div class="tw"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _reconciliation(report: Report) -> str:
    steps, fl = report.steps, report.floor
    gaps, exposed = report.host_gaps.total_ns, report.exposed_comm.exposed_ns
    rows = [["measured step p50", ms(steps.step_ns_p50)], ["measured step p99", ms(steps.step_ns_p99)]]
    if fl:
        rows = [["t_opt (max of resources)", ms(fl.t_opt_ns)], ["t_sum (sum of resources)", ms(fl.t_sum_ns)],
                ["binding resource", fl.binding], *rows]
        if fl.residual_ratio is not None:
            rows += [["residual ratio (p50 / t_opt)", f"{fl.residual_ratio:.2f}× (threshold "
                      f"{report.config.threshold:g}×)"],
                     ["position (0 = t_opt, 1 = t_sum)", f"{fl.position:.2f}"],
                     ["residual (p50 − t_opt)", ms(steps.step_ns_p50 - fl.t_opt_ns)]]
    rows += [["host gaps (median)", ms(gaps)], ["exposed communication (median)", ms(exposed)],
             ["kernels busy (rest of the step)", ms(max(0, steps.step_ns_p50 - gaps - exposed))]]
    return _table(["quantity", "value"], rows, numeric={1})


def _header(report: Report) -> str:
    v, cfg, steps = report.verdict, report.config, report.steps
    inputs = ", ".join(f"rank {i.rank}: {i.path} ({i.format})" for i in report.inputs)
    reasons = "".join(f"<li>{esc(r)}</li>" for r in report.reasons)
    caveats = "".join(f'<li class="caveat">caveat: {esc(c)}</li>' for c in report.caveats)
    return f"""<header><h1>tracekit analyze <span class="verdict v-{esc(v)}">{esc(v)}</span></h1>
<div class="sub">config {esc(cfg.name or 'none')} · {steps.count} steps from {esc(', '.join(steps.source))}
 · slowest rank {esc(steps.slowest_rank)} · inputs: {esc(inputs)}</div></header>
<div class="top"><section><h2>Verdict</h2><ul class="reasons">{reasons}{caveats}</ul></section>
<section><h2>Floor reconciliation</h2>{_reconciliation(report)}</section></div>"""


def _floor_section(report: Report) -> str:
    if not report.floor:
        return "<section><h2>Floor resources</h2><p>No --config: no floor.</p></section>"
    return f"<section><h2>Floor resources against the measured step</h2>{floor_bars(report)}</section>"


def _timelines(analysis: Analysis, colours: dict[str, str]) -> tuple[str, list[str]]:
    pics = pictures(analysis)
    if not pics:
        return "<section><h2>Step timeline</h2><p>No analysed step.</p></section>", []
    classes = sorted({str(c) for p in pics for c in p.op_cls})
    keys = legend([(c, colours[c]) for c in classes], over=any(p.op_over.any() for p in pics))
    keys += legend([(f"host gap: {c}", CAUSE_COLOURS[c]) for c in sorted({g.cause for p in pics for g in p.gaps})]
                   + [("exposed communication", EXPOSED_COLOUR)])
    body = "".join(timeline(p, i, colours) for i, p in enumerate(pics))
    return f"<section><h2>Step timeline</h2>{keys}{body}</section>", [p.label for p in pics]


def _classes_section(report: Report, colours: dict[str, str]) -> str:
    rows = [[c.name, ms(c.measured_ns), ms(c.budget_ns) if c.budget_ns is not None else "",
             "" if c.ratio is None else f"{c.ratio:.2f}", ms(c.excess_ns), over_budget_text(c),
             c.kernels[0].name if c.kernels else ""] for c in report.classes]
    table = _table(["class", "measured", "budget", "ratio", "excess", "over budget", "top kernel"], rows,
                   numeric={1, 2, 3, 4}, names={6})
    chart = class_bars(report.classes, report.config.threshold, colours)
    return f"<section><h2>Kernel classes against their budgets (per step, median)</h2>{chart}{table}</section>"


def _gaps_section(report: Report) -> str:
    hg = report.host_gaps
    causes = _table(["cause", "per step"], [[c, ms(v)] for c, v in hg.by_cause.items()], numeric={1})
    top = _table(["rank", "device", "step", "at (from the step's start)", "length", "cause", "next kernel",
                  "host range", "host call"],
                 [[g.rank, g.device, g.step, ms(g.step_offset_ns), ms(g.dur_ns), g.cause,
                   g.next_kernel or "", (g.host and g.host.range) or "",
                   (g.host and g.host.api_call) or ""] for g in hg.top], numeric={3, 4}, names={6})
    return (f"<section><h2>1. Host gaps: {esc(ms(hg.total_ns))} per step ({hg.fraction:.1%})</h2>{causes}"
            f"<h3>Longest gaps</h3>{top}</section>")


def _comm_section(report: Report) -> str:
    from tracekit.report.analysis import exposed_comm_rows, median_step_text, overlap_text

    ec = report.exposed_comm
    rows = [[c, ms(comm), ms(exposed)] for c, comm, exposed in exposed_comm_rows(ec)]
    return (f"<section><h2>2. Exposed communication: {esc(ms(ec.exposed_ns))} of {esc(ms(ec.comm_ns))} in "
            f"the median step; {esc(overlap_text(ec))}</h2><p>{esc(median_step_text(ec))}</p>"
            f"{_table(['collective', 'communication', 'exposed'], rows, numeric={1, 2})}</section>")


def _walls_section(report: Report) -> str:
    cfg = report.config
    if not cfg.name or not report.walls:
        return "<section><h2>Walls</h2><p>No --config: no walls.</p></section>"
    walls = report.walls  # computed by the analysis: no config is loaded here
    rows = [[w.name, w.batch if w.batch is not None else "", "yes" if w.reachable else "no", w.note]
            for w in walls.walls]
    chart = walls_chart(walls, cfg.effective.get("batch"), report.steps.step_ns_p50 or None)
    return (f"<section><h2>Walls of {esc(cfg.name)} as concurrency grows</h2>{chart}"
            f"{_table(['wall', 'concurrency', 'reachable', 'note'], rows, numeric={1})}</section>")


def _ncu_section(report: Report) -> str:
    targets = report.ncu_targets
    if not targets:
        return (f"<section><h2>Deep-dive targets</h2><p>None: targets are nominated only when the verdict is "
                f"kernel (here {esc(report.verdict)}).</p></section>")
    items = []
    for i, t in enumerate(targets):
        items.append(f"<h3>{i + 1}. {esc(t.cls)}: {esc(ms(t.excess_ns))} over budget; {esc(t.function)} "
                     f"({esc(t.tool)}), "
                     f"launch skip {esc(t.launch_skip)}{' (in a graph)' if t.in_graph else ''}</h3>"
                     f'<div class="cmd"><button type="button" class="copy" data-copy="ncu-{i}">copy</button>'
                     f'<pre id="ncu-{i}">{esc(t.command)}</pre></div>')
    return f"<section><h2>Deep-dive targets (ncu / rocprofv3)</h2>{''.join(items)}</section>"


def analysis_html(analysis: Analysis) -> str:
    """The whole report page of one analysis."""
    report = typed_of(analysis)
    colours = analysis_colours(analysis)
    timelines, labels = _timelines(analysis, colours)
    body = "".join([_header(report), _floor_section(report), timelines, _classes_section(report, colours),
                    op_floor_section(report, _table),
                    _gaps_section(report), _comm_section(report), ranks_section(analysis, report, _table),
                    _walls_section(report), _ncu_section(report)])
    data = {"timelines": len(labels), "steps": labels, "inputs": [i.path for i in report.inputs]}
    return _page(f"tracekit analyze: {report.verdict}", body, data)


def write_html_report(analysis: Analysis, out_path: Path) -> None:
    """Write the report page atomically."""
    write_atomically(out_path, analysis_html(analysis), option="--out")


def document_html(doc: Document) -> str:
    """Any command's Document as a plain page: notes, tables, verbatim blocks."""
    notes = "".join(f"<li>{esc(n)}</li>" for n in doc.notes)
    tables = "".join(f"<h2>{esc(t.title)}</h2>" + (f"<p>{esc(t.note)}</p>" if t.note else "")
                     + _table(t.frame.columns, [["" if v is None else v for v in row] for row in t.frame.iter_rows()],
                              numeric={i for i, c in enumerate(t.frame.columns) if t.frame[c].dtype.is_numeric()})
                     for t in doc.human_tables())
    blocks = "".join(f'<h3>{esc(title)}</h3><div class="cmd"><pre>{esc(text)}</pre></div>'
                     for title, text in doc.blocks)
    body = f"<h1>{esc(doc.title)}</h1><ul>{notes}</ul>{tables}{blocks}"
    return _page(doc.title, body, {"timelines": 0})
