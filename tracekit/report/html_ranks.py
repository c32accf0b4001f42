"""The HTML report's cross-rank section: the per-rank table, and the median step drawn as one lane per rank on
the aligned clock (each rank's times minus its clock offset), collectives split into wait and transfer.

The median step is the step label every device has whose median duration over the devices is the (lower)
median of those; its operations are re-read from the store for each device (``Analysis.step_detail``). The
lanes reuse the step timeline's markup, so they zoom and pan the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracekit.analysis.analyze import Analysis
from tracekit.report.html_charts import BAR_PX, LANE_PX, dur_text, esc, legend, ms, zoomable_lanes
from tracekit.report.ranks import per_rank_frame, straggler_line, who
from tracekit.report.timeline import communication_classes
from tracekit.schema.report import Report

WAIT_COLOUR = "#e15759"  # waiting for the last rank to arrive
TRANSFER_COLOUR = "#4e79a7"  # moving bytes, after the last arrival
UNMATCHED_COLOUR = "#bab0ac"  # a communication kernel in no consistent instance
COMPUTE_COLOUR = "#c7d3df"


@dataclass
class Lane:
    """One device's part of the step on the aligned clock: (start, end, kind, text) bars."""

    title: str
    start_ns: int
    end_ns: int
    bars: list[tuple[int, int, str, str]]


def median_label(analysis: Analysis) -> str | None:
    """The step label of the median step across ranks (among labels every device has)."""
    per_device = [{a.window.label: a.dur_ns for a in d.accounts} for d in analysis.devices]
    common = set.intersection(*(set(p) for p in per_device)) if per_device else set()
    if not common:
        return None
    medians = sorted((int(np.median([p[label] for p in per_device])), label) for label in common)
    return medians[(len(medians) - 1) // 2][1]


def lanes(analysis: Analysis, report: Report, label: str) -> list[Lane]:
    """The step ``label`` of every device, aligned, with its collectives' wait and transfer."""
    cross, ranks = analysis.cross, report.ranks
    assert ranks is not None, "lanes of a cross-rank analysis"
    communication = communication_classes(report)
    out = []
    for p, dev in enumerate(analysis.devices):
        k = next(i for i, a in enumerate(dev.accounts) if a.window.label == label)
        detail, acc = analysis.step_detail(dev, dev.accounts[k])
        off = cross.offset_ns[p]
        ops, idx = detail.ops, acc.ops_in_window
        log = dev.collectives
        wait = {(int(s), int(e)): (int(w), int(t)) for s, e, w, t in zip(
            log.start_ns[log.step == k], log.end_ns[log.step == k], cross.record_wait_ns[p][log.step == k],
            cross.record_transfer_ns[p][log.step == k], strict=True)}
        bars = []
        for j in idx.tolist():
            s, e, cls = int(ops.start_ns[j]), int(ops.end_ns[j]), str(ops.cls[j])
            text = f"{ops.name[j]} · {cls} · {dur_text(e - s)}"
            if cls not in communication:
                bars.append((s - off, e - off, "compute", text))
            elif wait.get((s, e), (-1, -1))[0] >= 0:
                w, t = wait[(s, e)]
                if w:
                    bars.append((s - off, s + w - off, "wait", f"{text}: waiting {dur_text(w)} for the last rank"))
                if t:
                    bars.append((s + w - off, e - off, "transfer", f"{text}: moving bytes {dur_text(t)}"))
            else:
                bars.append((s - off, e - off, "unmatched", f"{text}: in no matched collective"))
        row = ranks.per_rank[p]
        out.append(Lane(f"{who(row, ranks)} ({ms(off)} clock)" if off else who(row, ranks),
                        acc.window.start_ns - off, acc.window.end_ns - off, bars))
    return out


def lanes_chart(all_lanes: list[Lane], label: str) -> str:
    colour = {"compute": COMPUTE_COLOUR, "wait": WAIT_COLOUR, "transfer": TRANSFER_COLOUR,
              "unmatched": UNMATCHED_COLOUR}
    lo = min(lane.start_ns for lane in all_lanes)
    span = max(lane.end_ns for lane in all_lanes) - lo
    parts = []
    for i, lane in enumerate(all_lanes):
        y = LANE_PX * i + (LANE_PX - BAR_PX) // 2
        for s, e, kind, text in lane.bars:
            parts.append(f'<rect class="k" x="{(s - lo) / 1e3:.3f}" y="{y}" width="{(e - s) / 1e3:.3f}" '
                         f'height="{BAR_PX}" fill="{colour[kind]}"><title>{esc(text)}</title></rect>')
    head = f"median step across ranks: {esc(label)}, aligned clocks, {ms(span)}"
    return zoomable_lanes("tl-ranks", head, [lane.title for lane in all_lanes], f"{span / 1e3:.3f}", parts,
                          "ranks on aligned clocks")


def ranks_section(analysis: Analysis, report: Report, table: Any) -> str:
    """The cross-rank section of the page ('' for a single device); ``table`` renders (head, rows)."""
    ranks = report.ranks
    if not ranks or analysis.cross is None:
        return ""
    frame = per_rank_frame(ranks)
    rows = [["" if v is None else v for v in row] for row in frame.iter_rows()]
    body = table(frame.columns, rows, numeric=set(range(3, len(frame.columns))) | {0, 1})
    reasons = "".join(f'<li class="caveat">{esc(r)}</li>' for r in ranks.reasons)
    label = median_label(analysis)
    chart = ""
    if label is not None:
        keys = legend([("compute", COMPUTE_COLOUR), ("wait for the last rank", WAIT_COLOUR),
                       ("transfer", TRANSFER_COLOUR), ("collective not matched", UNMATCHED_COLOUR)])
        chart = keys + lanes_chart(lanes(analysis, report, label), label)
    counts = ranks.instances
    return (f"<section><h2>Across ranks: who waited for whom</h2><p>{esc(straggler_line(ranks))}</p>"
            f"<p>{counts.matched} collectives matched ({esc(', '.join(ranks.methods) or 'none')}); "
            f"wait {esc(ms(ranks.wait_ns))}, transfer {esc(ms(ranks.transfer_ns))} in all.</p>"
            f"<ul class=\"reasons\">{reasons}</ul>{chart}{body}</section>")
