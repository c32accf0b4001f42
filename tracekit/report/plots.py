"""`tracekit analyze --plots DIR`: the HTML report's charts as PNG and SVG files, for tickets.

matplotlib is optional (the ``plot`` extra) and imported only here, lazily. The charts draw the same
steps with the same colours as the HTML report (``tracekit.report.timeline``). Each file is written to a
temporary name and renamed, so a reader never sees half a picture.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any

from tracekit.analysis.analyze import Analysis
from tracekit.errors import InputError
from tracekit.files import write_atomically, write_with, writing
from tracekit.report.document import Document
from tracekit.report.render import emit, render, write_stdout
from tracekit.report.text import inert, markdown_escape
from tracekit.report.timeline import CAUSE_COLOURS, EXPOSED_COLOUR, StepPicture, analysis_colours, pictures, typed_of
from tracekit.schema.report import Report

FORMATS = ("png", "svg")


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plots: needs matplotlib; install it with `pip install 'tracekit[plot]'`") from None
    return plt


def _text(text: object) -> str:
    """Trace text for a matplotlib label: control characters escaped, ``$`` not taken as mathtext."""
    return inert(text).replace("$", r"\$")


def _save(fig: Any, stem: Path) -> list[Path]:
    """Write ``stem``.png and ``stem``.svg, each through a temporary file and a rename."""
    out = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        write_with(path, "--plots", lambda tmp, fmt=fmt: fig.savefig(
            tmp, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else None))
        out.append(path)
    return out


def _timeline(plt: Any, pic: StepPicture, colours: dict[str, str]) -> Any:
    lanes = ["gaps · exposed"] + [f"stream {s}" for s in pic.streams]
    fig, ax = plt.subplots(figsize=(14, 1.4 + 0.42 * len(lanes)))
    lane_of = {s: i + 1 for i, s in enumerate(pic.streams)}
    x0 = pic.start_ns

    def bars(starts: Any, ends: Any) -> list[tuple[float, float]]:
        return [((s - x0) / 1e6, (e - s) / 1e6) for s, e in zip(starts, ends, strict=True)]

    for cause in sorted({g.cause for g in pic.gaps}):
        gs = [g for g in pic.gaps if g.cause == cause]
        ax.broken_barh(bars([g.start_ns for g in gs], [g.end_ns for g in gs]), (-0.4, 0.8),
                       facecolors=CAUSE_COLOURS[cause], label=f"host gap: {cause}")
    if len(pic.exposed):
        ax.broken_barh(bars(pic.exposed.starts, pic.exposed.ends), (-0.4, 0.8), facecolors=EXPOSED_COLOUR,
                       label="exposed communication")
    lane = [lane_of[int(s)] for s in pic.op_stream]
    for cls in sorted(set(pic.op_cls.tolist())):
        for over in (False, True):
            sel = [i for i in range(len(lane)) if pic.op_cls[i] == cls and bool(pic.op_over[i]) == over]
            for ln in sorted({lane[i] for i in sel}):
                mine = [i for i in sel if lane[i] == ln]
                ax.broken_barh(bars(pic.op_start_ns[mine], pic.op_end_ns[mine]), (ln - 0.3, 0.65),
                               facecolors=colours.get(cls, "#888"))
                if over:  # a red strip above each kernel of an over-budget class
                    ax.broken_barh(bars(pic.op_start_ns[mine], pic.op_end_ns[mine]), (ln - 0.45, 0.12),
                                   facecolors=EXPOSED_COLOUR)
            if sel:
                ax.plot([], [], "s", color=colours.get(cls, "#888"), label=_text(cls + (" (over budget: red strip)"
                                                                                          if over else "")))
    ax.set_yticks(range(len(lanes)), [_text(t) for t in lanes])
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, pic.dur_ns / 1e6)
    ax.set_xlabel("ms from the step start")
    ax.set_title(_text(f"{pic.title}: rank {pic.rank}, device {pic.device_id}, step {pic.label}, "
                       f"{pic.dur_ns / 1e6:.3f} ms, {pic.kernel_count} kernels"), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def _classes(plt: Any, report: Report, colours: dict[str, str]) -> Any:
    rows = [c for c in report.classes if c.measured_ns > 0]
    threshold = report.config.threshold
    fig, ax = plt.subplots(figsize=(10, 1 + 0.4 * max(len(rows), 1)))
    for i, c in enumerate(rows):
        if c.budget_ns:
            ax.barh(i, c.budget_ns / 1e6, height=0.8, color="#d5dbe1", label="budget" if i == 0 else None)
            ax.plot([c.budget_ns * threshold / 1e6] * 2, [i - 0.4, i + 0.4], color="#d62728", linewidth=2)
        ax.barh(i, c.measured_ns / 1e6, height=0.35, color=colours.get(c.name, "#888"),
                edgecolor="#d62728" if c.over_budget else "none", linewidth=1.5)
        if c.ratio is not None:
            ax.annotate(f" {c.ratio:.2f}×", (max(c.measured_ns, c.budget_ns * threshold) / 1e6, i),
                        va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [_text(c.name) for c in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (median)")
    ax.set_title(f"kernel classes: measured (bar), budget (grey), {threshold:g}× budget (red tick)", fontsize=10)
    fig.tight_layout()
    return fig


def _floor(plt: Any, report: Report) -> Any:
    fl, step, threshold = report.floor, report.steps.step_ns_p50, report.config.threshold
    res_colours = {"hbm": "#4e79a7", "compute": "#59a14f", "network": "#f28e2b"}
    fig, ax = plt.subplots(figsize=(10, 3.4))
    labels = []
    for i, (k, v) in enumerate(fl.resource_ns.items()):
        ax.barh(i, v / 1e6, color=res_colours.get(k, "#888"))
        labels.append(f"{k} time")
    row, at = len(labels), 0
    for k, v in fl.resource_ns.items():
        ax.barh(row, v / 1e6, left=at / 1e6, color=res_colours.get(k, "#888"))
        at += v
    labels.append("t_sum (sum)")
    gaps, exposed = report.host_gaps.by_cause, report.exposed_comm.exposed_ns
    segs = [("kernels busy", max(0, step - sum(gaps.values()) - exposed), "#7f8c8d"),
            ("exposed comm", exposed, EXPOSED_COLOUR)] + [(f"host gap: {c}", v, CAUSE_COLOURS[c])
                                                          for c, v in gaps.items() if v]
    at = 0
    for name, v, colour in segs:
        ax.barh(row + 1, v / 1e6, left=at / 1e6, color=colour, label=name)
        at += v
    labels.append("measured step p50")
    ax.axvline(fl.t_opt_ns / 1e6, color="black", linewidth=1.2, label="t_opt")
    ax.axvline(fl.t_opt_ns * threshold / 1e6, color="black", linestyle="--", linewidth=1,
               label=f"{threshold:g}× t_opt")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step")
    ax.set_title(f"floor ({fl.binding} binds) against the measured step", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def write_plots(analysis: Analysis, out_dir: Path) -> list[tuple[str, Path]]:
    """Write every chart as PNG and SVG into ``out_dir``; return (title, PNG path) for each chart."""
    plt = _pyplot()
    with writing(out_dir, "--plots"):
        out_dir.mkdir(parents=True, exist_ok=True)
    report, colours = typed_of(analysis), analysis_colours(analysis)
    figures: list[tuple[str, str, Any]] = []
    for i, pic in enumerate(pictures(analysis)):
        name = "timeline-median" if i == 0 else "timeline-slowest-rank"
        figures.append((f"{pic.title} (rank {pic.rank}, step {pic.label})", name, _timeline(plt, pic, colours)))
    figures.append(("kernel classes against their budgets", "classes", _classes(plt, report, colours)))
    if report.floor:
        figures.append(("floor resources against the measured step", "floor", _floor(plt, report)))
    written = []
    for title, name, fig in figures:
        written.append((title, _save(fig, out_dir / name)[0]))
        plt.close(fig)
    if report.config.name and report.walls:
        from tracekit.floor.plot import plot_walls

        walls = report.walls  # computed by the analysis: no config is loaded here
        for fmt in FORMATS:
            write_with(out_dir / f"walls.{fmt}", "--plots", lambda tmp, fmt=fmt: plot_walls(walls, tmp, fmt=fmt))
        written.append((f"walls of {report.config.name} as concurrency grows", out_dir / "walls.png"))
    return written


def plots_markdown(plots: list[tuple[str, Path]], base: Path) -> str:
    """A Markdown section linking each chart (PNG inline, SVG beside it) by a path relative to ``base``."""
    lines = ["", "## plots", ""]
    for title, png in plots:
        rel = urllib.parse.quote(Path(os.path.relpath(png.resolve(), base.resolve())).as_posix())
        svg = rel[: -len(".png")] + ".svg"
        lines += [f"![{markdown_escape(inert(title))}]({rel}) ([SVG]({svg}))", ""]
    return "\n".join(lines)


def emit_with_plots(doc: Document, fmt: str, out_path: Path | None, plots: list[tuple[str, Path]]) -> None:
    """Emit the report; with plots, the Markdown links them and the table lists them."""
    if plots and fmt == "markdown":
        text = render(doc, fmt) + plots_markdown(plots, out_path.parent if out_path else Path.cwd())
        if out_path is not None:
            write_atomically(out_path, text, option="--out")
        else:
            write_stdout(text)
        return
    if plots and fmt == "table":
        doc.notes += [f"plot: {p}" for _, p in plots]
    emit(doc, fmt, out_path)
