"""``tracekit.analyze``, ``kernels``, ``doctor`` and ``diff``: the trace commands as functions with typed results.

An ``AnalyzeResult`` holds the report (the ``tracekit.report/v2`` document of ``tracekit analyze --format json``,
docs/report-schema.md), its tables as polars DataFrames and, unless asked for the report alone, the analysis
behind it (per-step figures, the HTML page's timelines); it renders itself to every format of the CLI.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.analysis.analyze import Analysis, complete_steps, run_analysis
from tracekit.analysis.doctor import Health, diagnose
from tracekit.analysis.engine import analyze_inputs
from tracekit.analysis.gaps import CAUSES
from tracekit.analysis.options import AnalyzeOptions
from tracekit.api.base import NEAR_FLOOR_THRESHOLD, Rendered, check_step_regex, overrides_of
from tracekit.budgets.classify import class_summary, other_share_pct
from tracekit.compare import diff as d
from tracekit.compare import gate as g
from tracekit.errors import InputError
from tracekit.report.analysis import report_document
from tracekit.report.diff import diff_document
from tracekit.report.doctor import doctor_document
from tracekit.report.document import Document, Table
from tracekit.schema.report import Report, typed_report
from tracekit.schema.verdict import Verdict
from tracekit.store import summaries
from tracekit.store.ingest import Store
from tracekit.store.inputs import Inputs, auto_jobs

Paths = str | Path | Sequence[str | Path]
KERNEL_GROUPS = ("name", "short-name", "name-grid-block", "class")


def _paths(paths: Paths) -> tuple[Path, ...]:
    found = (Path(paths),) if isinstance(paths, str | Path) else tuple(Path(p) for p in paths)
    if not found:
        raise InputError("no input files given")
    return found


def analyze_options(config: str | None = None, *, step: str | None = None, skip_steps: int = 0,
                    threshold: float = NEAR_FLOOR_THRESHOLD, batch: int | None = None, context: int | None = None,
                    sets: dict[str, object] | list[str] | None = None) -> AnalyzeOptions:
    """The options of ``tracekit analyze`` (``--config``, ``--step``, ``--skip-steps``, ``--threshold``,
    ``--batch``, ``--context``, ``--set``), checked as the CLI checks them."""
    check_step_regex(step)
    if skip_steps < 0:
        raise InputError(f"skip_steps={skip_steps}: must be >= 0")
    if threshold < 1.0:
        raise InputError(f"threshold={threshold}: must be >= 1.0")
    return AnalyzeOptions(config=config, overrides=overrides_of(config, batch, context, sets), step_regex=step,
                          skip_steps=skip_steps, threshold=float(threshold))


def _rows_frame(rows: list[dict[str, Any]], schema: dict[str, Any] | None = None) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, infer_schema_length=None) if rows or schema else pl.DataFrame()


class Tables:
    """The report's tables as polars DataFrames (times in ns, as in the JSON). ``steps`` needs the analysis
    (None for a report alone); ``ranks`` is None for one device; ``kernels``, ``ops`` and ``layers`` are None
    unless the report has those sections."""

    def __init__(self, report: dict[str, Any], analysis: Analysis | None) -> None:
        self._report, self._analysis = report, analysis

    @property
    def steps(self) -> pl.DataFrame | None:
        """One row per analysed step of every device: its window, host gaps (by cause), communication,
        exposed communication, and whether it is complete (counted in the step-time figures)."""
        if self._analysis is None:
            return None
        complete = {id(a) for a in complete_steps(self._analysis.devices)}
        rows = []
        for dev in self._analysis.devices:
            for acc, causes in zip(dev.accounts, dev.causes, strict=True):
                w = acc.window
                rows.append({"rank": acc.rank, "device": acc.device_id, "step": w.index, "label": w.label,
                             "start_ns": w.start_ns, "dur_ns": w.dur_ns, "complete": id(acc) in complete,
                             "host_gap_ns": acc.gap_ns, **{f"{c}_ns": causes.get(c, 0) for c in CAUSES},
                             "comm_ns": acc.comm_ns, "exposed_comm_ns": acc.exposed_ns})
        schema = {"rank": pl.Int64, "device": pl.Int64, "step": pl.Int64, "label": pl.String, "start_ns": pl.Int64,
                  "dur_ns": pl.Int64, "complete": pl.Boolean, "host_gap_ns": pl.Int64,
                  **{f"{c}_ns": pl.Int64 for c in CAUSES}, "comm_ns": pl.Int64, "exposed_comm_ns": pl.Int64}
        return _rows_frame(rows, schema)

    @property
    def gaps(self) -> pl.DataFrame:
        """The costliest host-gap findings (``host_gaps.top``), one row each, causes as columns."""
        rows = []
        for g_ in self._report["host_gaps"]["top"]:
            host = g_.get("host") or {}
            rows.append({**{k: v for k, v in g_.items() if k not in ("by_cause", "host")},
                         **{f"{c}_ns": v for c, v in g_["by_cause"].items()},
                         "host_range": host.get("range"), "host_api_call": host.get("api_call")})
        return _rows_frame(rows)

    @property
    def classes(self) -> pl.DataFrame:
        """Question 3: each kernel class against its budget (``classes``), with its top kernel."""
        keys = {"name": pl.String, "communication": pl.Boolean, "measured_ns": pl.Int64, "attributed_ns": pl.Int64,
                "budget_ns": pl.Int64, "ratio": pl.Float64, "excess_ns": pl.Int64, "over_budget": pl.Boolean}
        rows = [{**{("class" if k == "name" else k): c.get(k) for k in keys},
                 "top_kernel": c["kernels"][0]["name"] if c.get("kernels") else None}
                for c in self._report["classes"]]
        schema = {("class" if k == "name" else k): t for k, t in keys.items()} | {"top_kernel": pl.String}
        return _rows_frame(rows, schema)

    @property
    def ranks(self) -> pl.DataFrame | None:
        """Across ranks (``ranks.per_rank``): each device's clock, wait, transfer and who waited for it."""
        ranks = self._report.get("ranks")
        return None if ranks is None else _rows_frame(ranks["per_rank"])

    def _section(self, name: str) -> pl.DataFrame | None:
        value = self._report.get(name)  # sections present only for some captures or configs
        if value is None:
            return None
        rows = value if isinstance(value, list) else next((v for v in value.values() if isinstance(v, list)), [])
        return _rows_frame(rows)

    @property
    def kernels(self) -> pl.DataFrame | None:
        """The report's per-kernel table (``kernels``), where it has one."""
        return self._section("kernels")

    @property
    def ops(self) -> pl.DataFrame | None:
        return self._section("ops")

    @property
    def layers(self) -> pl.DataFrame | None:
        return self._section("layers")

    def all(self) -> dict[str, pl.DataFrame]:
        """Every table present, by name."""
        names = ("steps", "gaps", "classes", "ranks", "kernels", "ops", "layers")
        return {n: t for n in names if (t := getattr(self, n)) is not None}


class AnalyzeResult(Rendered):
    """``tracekit analyze`` as a value: ``report`` (the JSON document as a dict), ``verdict``, ``tables``
    (DataFrames), ``render(fmt)`` in any CLI format (``html`` needs the analysis, kept unless
    ``detail=False``). With the analysis the store stays open until ``close()`` (or the end of a ``with``
    block, or garbage collection)."""

    def __init__(self, report: dict[str, Any], analysis: Analysis | None = None) -> None:
        self.report = report
        self.analysis = analysis
        self.tables = Tables(report, analysis)
        self._finalizer = weakref.finalize(self, analysis.store.close) if analysis is not None else None

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.report["verdict"])

    @property
    def typed(self) -> Report:
        """The report as its msgspec Struct (``tracekit.schema.report.Report``: every key an attribute)."""
        return typed_report(self.report)

    def to_dict(self) -> dict[str, Any]:
        """The report as the JSON document's plain values."""
        return self.report

    def document(self) -> Document:
        return report_document(self.report)

    def render(self, fmt: str = "markdown", width: int | None = None) -> str:
        if fmt != "html":
            return super().render(fmt, width)
        if self.analysis is None:
            raise InputError("html: the page draws the step timelines, so analyze with detail=True")
        from tracekit.report.html import analysis_html

        return analysis_html(self.analysis)

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> AnalyzeResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def analyze_inputs_result(inputs: Inputs, opts: AnalyzeOptions, detail: bool = True, engine: str = "local",
                          scheduler: str | None = None) -> AnalyzeResult:
    """The analysis of opened-on-demand inputs: with ``detail`` in this process (the store kept open for the
    per-step tables and the HTML page), else the report alone (from the report cache, or on ``engine``)."""
    if not detail:
        return AnalyzeResult(analyze_inputs(inputs, opts, engine, scheduler))
    if engine != "local":
        raise InputError(f"engine {engine}: gives the report only; per-step detail (HTML, plots, steps table) "
                         "needs the local engine")
    store = inputs.open()
    try:
        analysis = run_analysis(store, opts)
    except BaseException:
        store.close()
        raise
    return AnalyzeResult(analysis.report, analysis)


def analyze(paths: Paths, config: str | None = None, *, step: str | None = None, skip_steps: int = 0,
            threshold: float = NEAR_FLOOR_THRESHOLD, batch: int | None = None, context: int | None = None,
            sets: dict[str, object] | list[str] | None = None, detail: bool = True, cache_dir: str | Path | None = None,
            use_cache: bool = True, jobs: int | None = None, engine: str = "local", scheduler: str | None = None
            ) -> AnalyzeResult:
    """``tracekit analyze PATHS --config CONFIG ...``: the floor-first triage of one capture (a file, several
    rank files, or a folder of them). The keywords are the CLI's options; ``detail=False`` gives the report
    alone (read from the report cache when unchanged), without the per-step table and the HTML page."""
    opts = analyze_options(config, step=step, skip_steps=skip_steps, threshold=threshold, batch=batch,
                           context=context, sets=sets)
    inputs = Inputs(_paths(paths), Path(cache_dir) if cache_dir else None, use_cache, jobs or auto_jobs(_paths(paths)),
                    quiet=True)
    return analyze_inputs_result(inputs, opts, detail, engine, scheduler)


class KernelsResult(Rendered):
    """``tracekit kernels``: ``frame`` (one row per kernel or group), ``notes`` (warnings, the ``other`` share)."""

    def __init__(self, frame: pl.DataFrame, by: str, notes: list[str]) -> None:
        self.frame, self.by, self.notes = frame, by, notes

    def document(self) -> Document:
        return Document("tracekit kernels", [Table(f"kernels by {self.by}", self.frame)], notes=list(self.notes))


def kernels_of(store: Store, by: str = "name", limit: int = 0) -> KernelsResult:
    """The per-kernel summary of an open store (nsys definitions), grouped ``by`` one of KERNEL_GROUPS (what
    `tracekit kernels` prints)."""
    from tracekit.analysis.analyze import refuse_unsupported_device

    if by not in KERNEL_GROUPS:
        raise InputError(f"by={by!r}: one of {', '.join(KERNEL_GROUPS)}")
    refuse_unsupported_device(store)  # an MTIA or TPU capture: an error naming it, never an empty table
    notes = list(store.warnings)
    if by == "class":
        frame = class_summary(store.con)
        notes.append(f"other: {other_share_pct(frame):.1f} % of kernel time (memory copies and sets left out) "
                     "matches no class rule (docs/classes.md: how to add one)")
    else:
        frame = summaries.kernel_summary(store.con, by=by.replace("-", "_"))
    return KernelsResult(frame.head(limit) if limit else frame, by, notes)


def kernels(paths: Paths, by: str = "name", limit: int = 0, *, cache_dir: str | Path | None = None,
            use_cache: bool = True, jobs: int | None = None) -> KernelsResult:
    """``tracekit kernels PATHS --by BY``: instances, total, average, median, min, max, stddev per kernel."""
    inputs = Inputs(_paths(paths), Path(cache_dir) if cache_dir else None, use_cache, jobs or auto_jobs(_paths(paths)),
                    quiet=True)
    with inputs.open() as store:
        return kernels_of(store, by, limit)


class DoctorResult(Rendered):
    """``tracekit doctor``: ``health`` (the engine that wrote the capture and the findings, each with its fix),
    ``unsupported`` (tracekit cannot read the capture at all: the CLI exits 2 after the findings)."""

    def __init__(self, health: Health, inputs: list[str]) -> None:
        self.health, self.inputs = health, inputs

    @property
    def unsupported(self) -> bool:
        return self.health.unsupported

    def document(self) -> Document:
        return doctor_document(self.health, self.inputs)


def doctor_of(store: Store) -> DoctorResult:
    """The health check of an open store (what `tracekit doctor` prints)."""
    return DoctorResult(diagnose(store.con, {f.fmt for f in store.files}), [str(f.source) for f in store.files])


def doctor(paths: Paths, *, cache_dir: str | Path | None = None, use_cache: bool = True,
           jobs: int | None = None) -> DoctorResult:
    """``tracekit doctor PATHS``: the capture's health check before any number, with the re-capture fixes."""
    inputs = Inputs(_paths(paths), Path(cache_dir) if cache_dir else None, use_cache, jobs or auto_jobs(_paths(paths)),
                    quiet=True)
    with inputs.open() as store:
        return doctor_of(store)


class DiffResult(Rendered):
    """``tracekit diff``: ``report`` (the ``tracekit.diff/v1`` document), ``exit_status`` (the CLI's),
    ``changes``."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report

    @property
    def exit_status(self) -> int:
        return self.report["gate"]["exit_status"]

    @property
    def changes(self) -> pl.DataFrame:
        """The step's owners by change, the largest explanation first."""
        return _rows_frame(self.report["changes"])

    def document(self) -> Document:
        return diff_document(self.report)


def diff(before: str | Path, after: str | Path, config: str | None = None, *, step: str | None = None,
         skip_steps: int = 0, threshold: float = NEAR_FLOOR_THRESHOLD, batch: int | None = None,
         context: int | None = None, sets: dict[str, object] | list[str] | None = None, gate: bool = False,
         fail_if_slower: str | float | None = None, noise_threshold: str | float = "1%",
         expect_faster: str | None = None, cache_dir: str | Path | None = None, use_cache: bool = True,
         jobs: int | None = None) -> DiffResult:
    """``tracekit diff BEFORE AFTER``: two reports or traces compared; ``fail_if_slower`` and
    ``noise_threshold`` as ``"5%"`` or 0.05."""
    opts = analyze_options(config, step=step, skip_steps=skip_steps, threshold=threshold, batch=batch,
                           context=context, sets=sets)
    allowance = g.parse_percent(fail_if_slower) if isinstance(fail_if_slower, str) else fail_if_slower
    noise = (g.parse_percent(noise_threshold, "noise_threshold") if isinstance(noise_threshold, str)
             else noise_threshold)
    cache = Path(cache_dir) if cache_dir else None
    sides = [d.load_side(Path(p), opts, cache, use_cache, jobs or auto_jobs([Path(p)])) for p in (before, after)]
    return DiffResult(g.gated_diff(sides, noise, gate, allowance, expect_faster,
                                   bool(opts.config or opts.step_regex or opts.skip_steps)))
