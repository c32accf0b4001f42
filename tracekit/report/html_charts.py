"""Inline SVG charts of the HTML report: step timelines, classes against budgets, floor resources, walls.

Each function returns markup; every text that came from a trace or a config goes through ``esc``.
Timelines use x in microseconds from the step start, so zooming is one change of the SVG viewBox.
"""

from __future__ import annotations

import html
import math
from typing import Any

from tracekit.report.text import inert
from tracekit.report.timeline import CAUSE_COLOURS, EXPOSED_COLOUR, StepPicture
from tracekit.schema.report import ClassRow, Report

LANE_PX = 24
BAR_PX = 18
WIDTH = 1200  # chart viewBox width; charts scale to the page width


def esc(text: object) -> str:
    """Untrusted text as inert HTML text or attribute value."""
    return html.escape(inert(text), quote=True)


def ms(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    return f"{ns / 1e6:,.3f} ms"  # one precision per unit, as the tables and sentences print ms


def dur_text(ns: float) -> str:
    return ms(ns) if ns >= 1e6 else f"{ns / 1e3:.1f} µs" if ns >= 1e3 else f"{ns:.0f} ns"


def _us(ns: int) -> str:
    return f"{ns / 1e3:.3f}"


def timeline(pic: StepPicture, index: int, colours: dict[str, str]) -> str:
    """One step as a zoomable lane chart: a lane of host gaps and exposed communication, then one per stream."""
    lanes = ["gaps · exposed"] + [f"stream {s}" for s in pic.streams]
    height = LANE_PX * len(lanes)
    lane_of = {s: i + 1 for i, s in enumerate(pic.streams)}
    lo = pic.start_ns
    parts: list[str] = []
    for g in pic.gaps:  # faint bands across every lane, then the gap itself in lane 0
        x, w = _us(g.start_ns - lo), _us(g.end_ns - g.start_ns)
        causes = ", ".join(f"{c} {dur_text(v)}" for c, v in g.by_cause.items() if v)
        tip = esc(f"host gap {dur_text(g.end_ns - g.start_ns)} at +{dur_text(g.start_ns - lo)}: {causes}")
        parts.append(f'<rect class="gb" x="{x}" y="{LANE_PX}" width="{w}" height="{height - LANE_PX}" '
                     f'fill="{CAUSE_COLOURS[g.cause]}" fill-opacity="0.22"><title>{tip}</title></rect>')
        parts.append(f'<rect class="g" x="{x}" y="3" width="{w}" height="{BAR_PX}" fill="{CAUSE_COLOURS[g.cause]}">'
                     f'<title>{tip}</title></rect>')
    for s, e in zip(pic.exposed.starts.tolist(), pic.exposed.ends.tolist(), strict=True):
        tip = esc(f"exposed communication {dur_text(e - s)} at +{dur_text(s - lo)}")
        parts.append(f'<rect class="x" x="{_us(s - lo)}" y="3" width="{_us(e - s)}" height="{BAR_PX}" '
                     f'fill="{EXPOSED_COLOUR}"><title>{tip}</title></rect>')
    for i in range(len(pic.op_start_ns)):
        s, e, cls = int(pic.op_start_ns[i]), int(pic.op_end_ns[i]), str(pic.op_cls[i])
        kind = "m" if pic.op_memop[i] else "k"
        y = LANE_PX * lane_of[int(pic.op_stream[i])] + (LANE_PX - BAR_PX) // 2
        tip = esc(f"{pic.op_name[i]}\n{cls}{' (over budget)' if pic.op_over[i] else ''} · {dur_text(e - s)} · "
                  f"+{dur_text(s - lo)} · stream {int(pic.op_stream[i])}")
        parts.append(f'<rect class="{kind}" x="{_us(s - lo)}" y="{y}" width="{_us(e - s)}" height="{BAR_PX}" '
                     f'fill="{colours.get(cls, "#888")}"><title>{tip}</title></rect>')
        if pic.op_over[i]:  # a red strip over the kernel, not a second kernel mark
            parts.append(f'<rect class="ob" x="{_us(s - lo)}" y="{y - 3}" width="{_us(e - s)}" height="4" '
                         f'fill="{EXPOSED_COLOUR}"><title>{tip}</title></rect>')
    n_kernels, n_memops = pic.kernel_count, len(pic.op_memop) - pic.kernel_count
    memops = f", {n_memops} memory operation{'s' if n_memops > 1 else ''}" if n_memops else ""
    head = (f"{esc(pic.title)}: rank {pic.rank}, device {pic.device_id}, step {esc(pic.label)}, "
            f"{ms(pic.dur_ns)}, {n_kernels} kernels{memops}")
    return zoomable_lanes(f"tl-{index}", head, lanes, _us(pic.dur_ns), parts, "step timeline",
                          f' data-kernels="{n_kernels}"')


def zoomable_lanes(element_id: str, head: str, lanes: list[str], width_us: str, parts: list[str], label: str,
                   extra: str = "") -> str:
    """One zoomable timeline: a lane per title, the bars (SVG ``parts``, x in us), zoom/pan buttons and an
    axis the page's script draws; ``head`` is HTML, already escaped."""
    height = LANE_PX * len(lanes)
    grid = "".join(f'<line x1="0" x2="{width_us}" y1="{LANE_PX * i}" y2="{LANE_PX * i}" stroke="#e3e7eb" '
                   f'vector-effect="non-scaling-stroke"/>' for i in range(1, len(lanes)))
    lane_labels = "".join(f'<div title="{esc(t)}">{esc(t)}</div>' for t in lanes)
    return f"""<div class="tl" id="{element_id}" data-dur-us="{width_us}" data-height="{height}"{extra}>
<h3>{head}</h3>
<div class="tl-bar"><button type="button" data-zoom="in">zoom in</button><button type="button" data-zoom="out">zoom out
</button><button type="button" data-zoom="left">◀</button><button type="button" data-zoom="right">▶</button>
<button type="button" data-zoom="reset">whole step</button><span>wheel: zoom · drag: pan · click: details</span>
<span class="tl-range"></span></div>
<div class="tl-body"><div class="tl-lanes">{lane_labels}</div><div>
<svg class="tl-svg" viewBox="0 0 {width_us} {height}" preserveAspectRatio="none" height="{height}"
 role="img" aria-label="{label}">{grid}{''.join(parts)}</svg>
<svg class="tl-axis"></svg></div></div>
<div class="tl-detail"></div></div>"""


def legend(items: list[tuple[str, str]], over: bool = False) -> str:
    spans = "".join(f'<span style="--c:{c}">{esc(name)}</span>' for name, c in items)
    if over:
        spans += '<span class="over">kernel of an over-budget class (red strip above it)</span>'
    return f'<div class="legend">{spans}</div>'


def _scale(vmax: float, x0: float, x1: float) -> Any:
    return lambda v: x0 + (x1 - x0) * (v / vmax if vmax > 0 else 0)


def class_bars(classes: list[ClassRow], threshold: float, colours: dict[str, str]) -> str:
    """Per class: budget (grey), measured (class colour), threshold x budget (red tick), ratio."""
    rows = [c for c in classes if c.measured_ns > 0]
    if not rows:
        return "<p>No kernel time in the analysed steps.</p>"
    row_h, top, left, right = 28, 24, 170, WIDTH - 250
    vmax = max(max(c.measured_ns, (c.budget_ns or 0) * threshold) for c in rows) * 1.04
    x = _scale(vmax, left, right)
    out = [f'<text x="{left}" y="14" class="muted">per step (median); grey: budget from the floor; red tick: '
           f'{threshold:g}× budget</text>']
    for i, c in enumerate(rows):
        y = top + i * row_h
        out.append(f'<text x="{left - 8}" y="{y + 17}" text-anchor="end">{esc(c.name)}</text>')
        budget = c.budget_ns
        if budget:
            out.append(f'<rect x="{left}" y="{y + 3}" width="{x(budget) - left:.1f}" height="{row_h - 8}" '
                       f'fill="#d5dbe1"><title>budget {esc(ms(budget))}</title></rect>')
            tx = x(budget * threshold)
            out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y + 1}" y2="{y + row_h - 3}" stroke="#d62728" '
                       'stroke-width="2"/>')
        stroke = ' stroke="#d62728" stroke-width="2"' if c.over_budget else ""
        out.append(f'<rect x="{left}" y="{y + 8}" width="{max(x(c.measured_ns) - left, 0.5):.1f}" height="10" '
                   f'fill="{colours.get(c.name, "#888")}"{stroke}><title>measured {esc(ms(c.measured_ns))}'
                   f'</title></rect>')
        if c.communication:
            note = f"{ms(c.measured_ns)}, exposed {ms(c.attributed_ns)}"
        elif budget:
            note = f"{ms(c.measured_ns)} / {ms(budget)} = {c.ratio:.2f}×" + (" over" if c.over_budget else "")
        else:
            note = f"{ms(c.measured_ns)} (no budget)"
        out.append(f'<text x="{right + 8}" y="{y + 17}" class="muted">{esc(note)}</text>')
    h = top + len(rows) * row_h + 4
    return f'<svg class="chart" viewBox="0 0 {WIDTH} {h}" role="img" aria-label="classes against budgets">' \
           f'{"".join(out)}</svg>'


def floor_bars(report: Report) -> str:
    """Resource times, t_sum stacked, and the measured median step split into compute, exposed comm, gaps."""
    fl, step = report.floor, report.steps.step_ns_p50
    threshold = report.config.threshold
    res_colours = {"hbm": "#4e79a7", "compute": "#59a14f", "network": "#f28e2b"}
    gaps = report.host_gaps.by_cause
    exposed = report.exposed_comm.exposed_ns
    busy = max(0, step - sum(gaps.values()) - exposed)
    rows: list[tuple[str, list[tuple[str, int, str]]]] = [
        (f"{k} time", [(k, v, res_colours.get(k, "#888"))]) for k, v in fl.resource_ns.items()]
    rows.append(("t_sum (sum)", [(k, v, res_colours.get(k, "#888")) for k, v in fl.resource_ns.items()]))
    rows.append(("measured step p50", [("kernels busy", busy, "#7f8c8d"), ("exposed comm", exposed, EXPOSED_COLOUR)]
                 + [(f"host gap: {c}", v, CAUSE_COLOURS[c]) for c, v in gaps.items() if v]))
    row_h, top, left, right = 30, 26, 150, WIDTH - 120
    vmax = max(fl.t_sum_ns, step, fl.t_opt_ns * threshold) * 1.04
    x = _scale(vmax, left, right)
    out = []
    for i, (label, segs) in enumerate(rows):
        y, at = top + i * row_h, 0
        out.append(f'<text x="{left - 8}" y="{y + 19}" text-anchor="end">{esc(label)}</text>')
        for name, v, colour in segs:
            out.append(f'<rect x="{x(at):.1f}" y="{y + 5}" width="{x(v) - left:.1f}" height="{row_h - 10}" '
                       f'fill="{colour}"><title>{esc(name)}: {esc(ms(v))}</title></rect>')
            at += v
        out.append(f'<text x="{x(at) + 6:.1f}" y="{y + 19}" class="muted">{esc(ms(at))}</text>')
    bottom = top + len(rows) * row_h
    # t_opt's label ends at its line and the threshold's starts at its own: close lines never overprint.
    for value, label, dash, anchor, dx in ((fl.t_opt_ns, "t_opt", "", "end", -3),
                                           (fl.t_opt_ns * threshold, f"{threshold:g}× t_opt",
                                            ' stroke-dasharray="5 4"', "start", 3)):
        lx = x(value)
        out.append(f'<line x1="{lx:.1f}" x2="{lx:.1f}" y1="{top - 4}" y2="{bottom}" stroke="#1d2125" '
                   f'stroke-width="1.5"{dash}/>'
                   f'<text x="{lx + dx:.1f}" y="{top - 8}" text-anchor="{anchor}">{esc(label)}</text>')
    return f'<svg class="chart" viewBox="0 0 {WIDTH} {bottom + 6}" role="img" aria-label="floor resources">' \
           f'{"".join(out)}</svg>'


def _nice_ticks(vmax: float, n: int = 5) -> list[float]:
    raw = vmax / n
    p = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * p for m in (1, 2, 5, 10) if m * p >= raw)
    return [i * step for i in range(int(vmax / step) + 1)]


def walls_chart(walls: Any, batch: int | None, measured_ns: int | None) -> str:
    """t_opt and t_sum against concurrency (log x), each reachable wall marked, the measured step as a point."""
    pts = walls.frontier
    if len(pts) < 2:
        return "<p>The frontier has fewer than two feasible concurrencies.</p>"
    left, right, top, bottom, h = 70, WIDTH - 30, 20, 330, 372
    shown = [w for w in walls.walls if w.reachable and w.batch]
    hi = max([pts[-1].batch, pts[0].batch + 1] + [w.batch for w in shown])
    b0, b1 = math.log10(pts[0].batch), math.log10(hi)
    ymax = max([p.t_sum_ns for p in pts] + [measured_ns or 0]) / 1e6 * 1.08

    def px(b: float) -> float:
        return left + (right - left) * (math.log10(b) - b0) / (b1 - b0)

    def py(v_ms: float) -> float:
        return bottom - (bottom - top) * v_ms / ymax

    out = []
    for t in _nice_ticks(ymax):
        out.append(f'<line x1="{left}" x2="{right}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eceff2"/>'
                   f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end" class="muted">{t:g}</text>')
    for e in range(math.floor(b0), math.ceil(b1) + 1):
        for m in (1, 2, 5):
            b = m * 10 ** e
            if pts[0].batch <= b <= hi:
                out.append(f'<text x="{px(b):.1f}" y="{bottom + 16}" text-anchor="middle" class="muted">{b}</text>')
    out.append(f'<text x="{(left + right) / 2}" y="{bottom + 34}" text-anchor="middle">concurrent requests '
               '(deployment, log scale)</text>')
    out.append(f'<text x="16" y="{(top + bottom) / 2}" transform="rotate(-90 16 {(top + bottom) / 2})" '
               'text-anchor="middle">step time (ms)</text>')
    for w in shown:
        wx = px(w.batch)
        out.append(f'<line x1="{wx:.1f}" x2="{wx:.1f}" y1="{top}" y2="{bottom}" stroke="#888" '
                   f'stroke-dasharray="2 3"><title>{esc(w.note)}</title></line>'
                   f'<text x="{wx - 5:.1f}" y="{top + 4}" transform="rotate(-90 {wx - 5:.1f} {top + 4})" '
                   f'text-anchor="end" class="muted">{esc(w.name)} ({w.batch})</text>')
    for attr, dash, label in (("t_opt_ns", "", "t_opt"), ("t_sum_ns", ' stroke-dasharray="6 4"', "t_sum")):
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(p.batch):.1f},{py(getattr(p, attr) / 1e6):.1f}"
                        for i, p in enumerate(pts))
        out.append(f'<path d="{path}" fill="none" stroke="#4e79a7" stroke-width="2"{dash}/>')
        last = pts[-1]
        out.append(f'<text x="{px(last.batch) - 4:.1f}" y="{py(getattr(last, attr) / 1e6) - 6:.1f}" '
                   f'text-anchor="end">{label}</text>')
    if batch and measured_ns and pts[0].batch <= batch <= hi:
        mx, my = px(batch), py(measured_ns / 1e6)
        out.append(f'<circle cx="{mx:.1f}" cy="{my:.1f}" r="5" fill="#d62728"><title>measured step p50 '
                   f'{esc(ms(measured_ns))} at {batch} requests</title></circle>'
                   f'<text x="{mx + 8:.1f}" y="{my + 4:.1f}">measured p50 ({esc(ms(measured_ns))})</text>')
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#8a96a3"/>')
    return f'<svg class="chart" viewBox="0 0 {WIDTH} {h}" role="img" aria-label="walls">{"".join(out)}</svg>'
