"""The HTML report's op-floor section: the per-layer chart (measured against op floor, outliers marked) and
the per-op table."""

from __future__ import annotations

from collections.abc import Callable

from tracekit.report.html_charts import WIDTH, esc, ms
from tracekit.schema.report import Layers, Report

MEASURED_COLOUR, FLOOR_COLOUR, OUTLIER_COLOUR = "#4e79a7", "#d5dbe1", "#d62728"


def layer_chart(layers: Layers) -> str:
    """One column per layer of the repeated block: its op floor (grey) behind its measured time (blue, red
    outline for an outlier against its siblings)."""
    rows = layers.layers
    if not rows:
        return ""
    top, bottom, left, right = 22, 180, 60, WIDTH - 20
    vmax = max(max(r.measured_ns, r.t_opt_ns) for r in rows) * 1.08 or 1
    step = (right - left) / len(rows)
    bar = max(step * 0.7, 1.0)

    def y(v: float) -> float:
        return bottom - (bottom - top) * v / vmax

    out = [f'<text x="{left}" y="14" class="muted">per layer, per step: grey op floor, blue measured '
           f'(red outline: over 1.25× the median of its siblings)</text>',
           f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" class="muted">{esc(ms(vmax))}</text>',
           f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#1d2125"/>']
    for i, r in enumerate(rows):
        x0 = left + i * step + (step - bar) / 2
        over = r.vs_siblings is not None and r.vs_siblings > 1.25
        stroke = f' stroke="{OUTLIER_COLOUR}" stroke-width="2"' if over else ""
        out.append(f'<rect x="{x0:.1f}" y="{y(r.t_opt_ns):.1f}" width="{bar:.1f}" '
                   f'height="{bottom - y(r.t_opt_ns):.1f}" fill="{FLOOR_COLOUR}"/>')
        ratio = "" if r.ratio is None else f", {r.ratio:.2f}× its op floor"
        out.append(f'<rect x="{x0 + bar * 0.2:.1f}" y="{y(r.measured_ns):.1f}" width="{bar * 0.6:.1f}" '
                   f'height="{bottom - y(r.measured_ns):.1f}" fill="{MEASURED_COLOUR}"{stroke}>'
                   f'<title>layer {r.layer}: {esc(ms(r.measured_ns))}{esc(ratio)}</title></rect>')
        if len(rows) <= 48 or i % 4 == 0:
            out.append(f'<text x="{x0 + bar / 2:.1f}" y="{bottom + 14}" text-anchor="middle" class="muted">'
                       f'{r.layer}</text>')
    return f'<svg class="chart" viewBox="0 0 {WIDTH} {bottom + 22}" role="img" aria-label="per-layer time">' \
           f'{"".join(out)}</svg>'


def op_floor_section(report: Report, table: Callable[..., str]) -> str:
    """The op floor, its per-op table and the per-layer chart (empty when the trace has no op floor)."""
    op = report.op_floor
    if not op:
        return ""
    head = (f"<p>Op floor {esc(ms(op.t_opt_ns))} ({esc(op.hardware)}, {esc(op.peak_kind)} peaks; "
            f"binding: {esc(op.binding)}); {100 * op.covered_fraction:.1f}% of the GPU time has an op floor. "
            f"The verdict used the {esc(report.floor_used or 'no')} floor.</p>")
    inflation = report.work_inflation
    findings = "".join(f"<li>{esc(f.text)}</li>" for f in (inflation.findings if inflation else []))
    rows = [[o.op, o.shapes or "", o.cls, ms(o.measured_ns),
             ms(o.t_opt_ns) if o.t_opt_ns is not None else "", "" if o.ratio is None else f"{o.ratio:.2f}"]
            for o in op.ops]
    ops = table(["op", "shapes", "class", "measured", "op floor", "ratio"], rows, numeric={3, 4, 5}, names={0})
    layers = report.layers
    chart = ""
    if layers:
        outliers = "".join(f"<li>{esc(o)}</li>" for o in layers.outliers)
        chart = (f"<h3>Per layer: {layers.count} × {esc(layers.block)}</h3>{layer_chart(layers)}"
                 + (f"<ul>{outliers}</ul>" if outliers else ""))
    return (f"<section><h2>Op floor: the kernels that ran, from their ops' shapes</h2>{head}"
            + (f"<ul>{findings}</ul>" if findings else "") + chart + ops + "</section>")
