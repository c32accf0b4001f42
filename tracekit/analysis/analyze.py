"""`tracekit analyze`: steps, the three questions, floor reconciliation, verdict and ncu targets.

The result is the ``tracekit.report/v1`` document (see docs/report-schema.md); renderers only format it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from tracekit.analysis.accounting import StepAccount
from tracekit.analysis.caveats import capture_caveats
from tracekit.analysis.crossrank import CrossRank, RankMeta, cross_rank
from tracekit.analysis.detail import Detail, DetailReader
from tracekit.analysis.device import DeviceAnalysis, analyze_device, step_marker
from tracekit.analysis.gaps import CAUSES
from tracekit.analysis.ncu import ncu_targets
from tracekit.analysis.ops import Vocabulary, prepare
from tracekit.analysis.options import (
    BELOW_FLOOR_TOLERANCE,
    MIN_GAP_FINDING_NS,
    REPORT_REVISION,
    REPORT_SCHEMA,
    AnalyzeOptions,
)
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.store.ingest import Store


def _p(values: list[int] | np.ndarray, q: float) -> int:
    return int(round(float(np.percentile(np.asarray(values, dtype=np.float64), q)))) if len(values) else 0


def _median(values: list[int]) -> int:
    return _p(values, 50)


def _top_gaps(results: list[DeviceAnalysis], limit: int) -> list[dict[str, Any]]:
    """The gaps that cost most, with repeats across steps collapsed: gaps before the same kernel on the
    same device form one finding (occurrences, total), shown by its longest instance with its causes and
    what the launching host thread was doing. Each device brings its own costliest ``limit`` findings."""
    findings = [g for res in results for g in res.top_gaps if g["total_ns"] >= MIN_GAP_FINDING_NS]
    return sorted(findings, key=lambda g: -g["total_ns"])[:limit]


def _floor_section(opts: AnalyzeOptions, step_p50: int) -> tuple[dict[str, Any] | None, Any, dict[str, Any]]:
    """Floor result, placement and the effective config (None without --config)."""
    if not opts.config:
        return None, None, {}
    from tracekit import floor

    cfg = floor.load_config(opts.config, opts.overrides)
    result = floor.compute_floor(cfg)
    placement = floor.place_measured(result, step_p50, opts.threshold) if step_p50 > 0 else None
    section = {
        "hardware": cfg.hardware.key, "t_opt_ns": result.t_opt_ns, "t_sum_ns": result.t_sum_ns,
        "binding": result.binding,
        "resource_ns": result.resource_ns, "peak_kind": result.peak_kind,
        "residual_ratio": placement.residual_ratio if placement else None,
        "position": placement.position if placement else None,
    }
    return section, result, cfg.settings()


def _hardware_mismatch(con: duckdb.DuckDBPyConnection, hardware_key: str) -> str | None:
    """The capture's GPU names that are not the config's hardware (matched as a whole word of the name,
    so an H200 is not taken for an H20); None when they match or the capture names no GPU."""
    names = [r[0] for r in con.execute("SELECT DISTINCT name FROM devices WHERE coalesce(name, '') <> ''").fetchall()]
    other = sorted(n for n in names if hardware_key.lower() not in re.split(r"[^a-z0-9]+", n.lower()))
    return ", ".join(other) if other else None


@dataclass
class Analysis:
    """The v1 report and the per-device summaries behind it; per-operation detail of a step or a device is
    re-read from the store on request (for timelines and exports)."""

    report: dict[str, Any]
    devices: list[DeviceAnalysis]
    store: Store
    opts: AnalyzeOptions
    cross: CrossRank | None = None  # the cross-rank analysis (None for one device)
    _reader: DetailReader | None = field(default=None, init=False, repr=False)

    def _detail_reader(self) -> DetailReader:
        if self._reader is None:
            self._reader = DetailReader(self.store.con, self.opts.config, step_marker(self.opts))
        return self._reader

    def step_detail(self, dev: DeviceAnalysis, acc: StepAccount) -> tuple[Detail, StepAccount]:
        """One analysed step's operations and host activity, and its full account (gaps, ops_in_window)."""
        return self._detail_reader().step(dev, acc)

    def device_detail(self, dev: DeviceAnalysis) -> Detail:
        """All of one device's operations with every analysed step's full account."""
        return self._detail_reader().device(dev)


def analyze(store: Store, opts: AnalyzeOptions) -> dict[str, Any]:
    """Run the whole analysis over an open store and return the v1 report document."""
    return run_analysis(store, opts).report


def run_analysis(store: Store, opts: AnalyzeOptions) -> Analysis:
    """Run the whole analysis over an open store: the report and its per-device detail."""
    return build_analysis(store, opts, analyze_devices(store, opts))


def analyze_devices(store: Store, opts: AnalyzeOptions) -> list[DeviceAnalysis]:
    """The per-rank part: every device's steps, accounted in bounded batches and reduced to summaries."""
    rules = load_rules(opts.config)
    con = store.con
    pairs = prepare(con, rules)
    vocab = Vocabulary.load(con)
    return [analyze_device(con, vocab, rank, device, opts, rules.communication) for rank, device in pairs]


def build_analysis(store: Store, opts: AnalyzeOptions, results: list[DeviceAnalysis]) -> Analysis:
    """The cross-rank part: reduce the per-device results (in (rank, device) order) to the report."""
    rules = load_rules(opts.config)
    con = store.con
    caveats = capture_caveats(con)
    accounts = [a for r in results for a in r.accounts]
    step_ns = [a.dur_ns for a in accounts]
    step_p50, step_p99 = _median(step_ns), _p(step_ns, 99)
    sources = sorted({r.source.kind for r in results})

    # Question 1: host gaps.
    gap_ns = [a.gap_ns for a in accounts]
    cause_ns = {c: _median([cs[c] for r in results for cs in r.causes]) for c in CAUSES}
    host_gaps = {
        "total_ns": _median(gap_ns), "fraction": (_median(gap_ns) / step_p50) if step_p50 else 0.0,
        "by_cause": cause_ns, "top": _top_gaps(results, opts.top_gaps),
    }
    # Question 2: exposed communication.
    collectives = sorted({c for a in accounts for c in a.exposed_by_class} |
                         {c for a in accounts for c in a.measured_by_class if c in rules.communication})
    comm = _median([a.comm_ns for a in accounts])
    exposed = _median([a.exposed_ns for a in accounts])
    exposed_comm = {
        "comm_ns": comm, "exposed_ns": exposed, "fraction": exposed / step_p50 if step_p50 else 0.0,
        "overlap_fraction": (1 - exposed / comm) if comm else None,
        "by_collective": {c: {"comm_ns": _median([a.measured_by_class.get(c, 0) for a in accounts]),
                              "exposed_ns": _median([a.exposed_by_class.get(c, 0) for a in accounts])}
                          for c in collectives},
    }
    # Floor and question 3: classes against budgets.
    floor_section, floor_result, effective = _floor_section(opts, step_p50)
    cross = cross_rank(results, RankMeta.load(con), floor_section["hardware"] if floor_section else None)
    measured = cross is not None and bool(cross.step_wait_ns)
    exposed_comm |= {"wait_ns": _median(cross.step_wait_ns) if measured else None,
                     "transfer_ns": _median(cross.step_transfer_ns) if measured else None}
    comm_wait = cross.verdict_note(exposed, exposed_comm["wait_ns"]) if cross else (0, None)
    budgets = class_budgets(floor_result.parts, rules) if floor_result is not None else {}
    classes = _classes(accounts, results, rules.communication, budgets, opts, step_p50)

    mismatch = _hardware_mismatch(con, floor_section["hardware"]) if floor_section else None
    verdict, reasons = _verdict(opts, results, caveats, floor_section, host_gaps, exposed_comm, classes, step_p50,
                                mismatch, comm_wait)
    targets = ncu_targets(con, results, classes, opts.max_targets) if verdict == "kernel" else []
    per_rank = defaultdict(list)
    for a in accounts:
        per_rank[a.rank].append(a.dur_ns)
    rank_p50 = {r: _median(v) for r, v in per_rank.items()}
    slowest = max(rank_p50, key=lambda r: rank_p50[r]) if rank_p50 else None
    report = {
        "schema": REPORT_SCHEMA,
        "schema_revision": REPORT_REVISION,
        "inputs": [{"rank": f.rank, "path": str(f.source), "format": f.fmt} for f in store.files],
        "config": {"name": opts.config, "overrides": opts.overrides, "effective": effective,
                   "threshold": opts.threshold, "min_excess_fraction": opts.min_excess_fraction,
                   "step_regex": opts.step_regex, "skip_steps": opts.skip_steps},
        "steps": {"count": len(accounts), "source": sources, "step_ns_p50": step_p50, "step_ns_p99": step_p99,
                  "per_rank_p50_ns": {str(r): v for r, v in sorted(rank_p50.items())},
                  "slowest_rank": slowest,
                  "straggler_ratio": (rank_p50[slowest] / _median(list(rank_p50.values()))) if slowest is not None
                  and _median(list(rank_p50.values())) else None},
        "floor": floor_section,
        "host_gaps": host_gaps,
        "exposed_comm": exposed_comm,
        "ranks": cross.section if cross else None,
        "classes": classes,
        "ncu_targets": targets,
        "verdict": verdict,
        "reasons": reasons,
        "caveats": [c.text for c in caveats] + store.warnings,
    }
    return Analysis(report, results, store, opts, cross)


def _kernel_time(results: list[DeviceAnalysis]) -> dict[str, list[tuple[str, int]]]:
    """Per class, its kernels' total time in the analysed steps, largest first (ties by name)."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for res in results:
        for key, ns in res.kernel_ns.items():
            totals[key] += ns
    by_class: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for (cls, name), total in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0][1])):
        by_class[cls].append((name, total))
    return by_class


def _classes(accounts: list[StepAccount], results: list[DeviceAnalysis], communication: frozenset[str],
             budgets: dict[str, int], opts: AnalyzeOptions, step_p50: int) -> list[dict[str, Any]]:
    names = sorted({c for a in accounts for c, ns in a.measured_by_class.items() if ns > 0})
    kernel_time = _kernel_time(results)
    n_steps = max(len(accounts), 1)
    rows = []
    for c in names:
        measured = _median([a.measured_by_class.get(c, 0) for a in accounts])
        if c in communication:
            attributed = _median([a.exposed_by_class.get(c, 0) for a in accounts])
        else:
            attributed = _median([a.attributed_by_class.get(c, 0) for a in accounts])
        budget = budgets.get(c)
        ratio = measured / budget if budget else None
        excess = max(0, attributed - budget) if budget is not None else 0
        over = bool(budget and c not in communication and ratio is not None and ratio > opts.threshold
                    and excess >= opts.min_excess_fraction * step_p50)
        top = kernel_time[c][:5]
        rows.append({
            "name": c, "communication": c in communication, "measured_ns": measured, "attributed_ns": attributed,
            "budget_ns": budget, "ratio": ratio, "excess_ns": excess, "over_budget": over,
            "kernels": [{"name": n, "per_step_ns": int(t / n_steps)} for n, t in top],
        })
    rows.sort(key=lambda r: (-r["excess_ns"], -r["measured_ns"]))
    return rows


def _verdict(opts: AnalyzeOptions, results: list[DeviceAnalysis], caveats: list, floor_section: dict | None,
             host_gaps: dict, exposed_comm: dict, classes: list[dict], step_p50: int,
             hardware_mismatch: str | None, comm_wait: tuple[int, str | None] = (0, None)) -> tuple[str, list[str]]:
    reasons: list[str] = []
    blocking = [c.text for c in caveats if c.kind == "graph_whole"]
    if blocking:
        return "inconclusive", blocking
    if not results or step_p50 == 0:
        return "inconclusive", ["no GPU operations to analyse"]
    if any(r.source.kind == "whole_capture" for r in results):
        reasons.append("no step markers (NVTX/annotation regex, ProfilerStep#N, graph launches): the whole capture "
                       "is one window; give --step REGEX")
    if floor_section is None:
        reasons.append("no --config: host gaps and exposed communication are answered, but class budgets and "
                       "the floor need a config")
        return "inconclusive", reasons
    if hardware_mismatch:
        reasons.append(f"the capture ran on {hardware_mismatch} but --config {opts.config} describes "
                       f"{floor_section['hardware']}: use a config for that GPU or --set hardware=...")
    if reasons:
        return "inconclusive", reasons
    ratio = floor_section["residual_ratio"]
    t_opt = floor_section["t_opt_ns"]
    if ratio is not None and ratio < BELOW_FLOOR_TOLERANCE:
        return "inconclusive", [f"step p50 {step_p50} ns is {ratio:.2f}x the optimistic floor {t_opt} ns: faster than "
                                "a lower bound, so the config does not describe this capture (set --batch, "
                                "--context, --set weight_dtype=... or the hardware to the captured operating point)"]
    if ratio is not None and ratio < opts.threshold:
        return "near-floor", [f"step p50 {step_p50} ns is {ratio:.2f}x the optimistic floor {t_opt} ns "
                              f"(< {opts.threshold}): stop; only architecture changes (sparse attention, "
                              "quantisation, layout) move it"]
    residual = step_p50 - t_opt
    # Waiting in a collective for a rank whose kernels ran long is that rank's kernel time, not pipeline time.
    kernel_wait, wait_reason = comm_wait
    pipeline_ns = host_gaps["total_ns"] + exposed_comm["exposed_ns"] - kernel_wait
    over = [c for c in classes if c["over_budget"]]
    reasons.append(f"step p50 {step_p50} ns is {ratio:.2f}x the optimistic floor {t_opt} ns; residual {residual} ns")
    reasons.append(f"host gaps {host_gaps['total_ns']} ns + exposed communication {exposed_comm['exposed_ns']} ns "
                   + (f"- wait for slow kernels on the late rank {kernel_wait} ns " if kernel_wait else "")
                   + f"= {pipeline_ns} ns ({pipeline_ns / residual:.0%} of the residual)")
    if wait_reason:
        reasons.append(wait_reason)
    if pipeline_ns >= opts.pipeline_share * residual:
        return "pipeline", reasons
    if over:
        reasons.append("over budget: " + ", ".join(f"{c['name']} {c['ratio']:.2f}x (+{c['excess_ns']} ns)"
                                                   for c in over))
        return "kernel", reasons
    reasons.append("no class exceeds its budget by the threshold and the pipeline does not explain the residual")
    return "inconclusive", reasons
