"""`tracekit analyze`: steps, the three questions, floor reconciliation, verdict and ncu targets.

The result is the ``tracekit.report/v2`` document (see docs/report-schema.md); renderers only format it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import duckdb
import numpy as np

from tracekit import floor
from tracekit.analysis.accounting import StepAccount
from tracekit.analysis.attribution import load_modules, register_attribution
from tracekit.analysis.caveats import (
    BLOCKING_CAVEATS,
    capture_caveats,
    caveat_texts,
    unsupported_devices,
    wait_caveats,
)
from tracekit.analysis.crossrank import CrossRank, RankMeta, cross_rank
from tracekit.analysis.detail import Detail, DetailReader
from tracekit.analysis.device import DeviceAnalysis, analyze_all, step_marker
from tracekit.analysis.fit import Fit
from tracekit.analysis.fit import assess as assess_fit
from tracekit.analysis.gaps import CAUSES
from tracekit.analysis.gpu import identify
from tracekit.analysis.layers import Modules, layer_tables
from tracekit.analysis.model_shape import ModelShape, infer_shape
from tracekit.analysis.model_shape import check as check_shape
from tracekit.analysis.ncu import ncu_targets
from tracekit.analysis.opfloor import OpFloor, compute_op_floor, verdict_coverage_reason, work_inflation
from tracekit.analysis.ops import Vocabulary, prepare
from tracekit.analysis.options import MIN_GAP_FINDING_NS, REPORT_SCHEMA, AnalyzeOptions
from tracekit.analysis.replay import replay_section
from tracekit.analysis.verdict import Evidence, decide, ms
from tracekit.analysis.waits import waits_section
from tracekit.analysis.walls import walls_section
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.errors import InputError
from tracekit.parsers.schema import NO_GPU_ACTIVITY
from tracekit.schema.report import Report, typed_report
from tracekit.store.ingest import Store

MAX_SAMPLES = 2_000  # per-step samples kept in the report (evenly thinned beyond)
MAX_KERNELS = 200  # kernels listed in the report's kernel table, by time


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


def _floor_section(con: duckdb.DuckDBPyConnection, opts: AnalyzeOptions, step_p50: int, shape: ModelShape
                   ) -> tuple[dict[str, Any] | None, Any, floor.Placement | None, dict[str, Any], Fit | None]:
    """Floor section, floor result, placement of the step p50, the effective config (None without --config) and
    the config's fit to the capture (its GPU, world size, operating point and model shape; the floor takes batch
    and context from the trace where it says them)."""
    if not opts.config:
        return None, None, None, {}, None
    fit = assess_fit(con, load_config(opts.config, opts.overrides), opts.overrides)
    fit.reasons += check_shape(shape, load_config(opts.config, opts.overrides))
    cfg = load_config(opts.config, {**fit.overrides, **opts.overrides})
    result = floor.compute_floor(cfg)
    placement = floor.place_measured(result, step_p50, opts.threshold) if step_p50 > 0 else None
    section = {
        "hardware": cfg.hardware.key, "t_opt_ns": result.t_opt_ns, "t_sum_ns": result.t_sum_ns,
        "binding": result.binding,
        "resource_ns": result.resource_ns, "latency_chain_ns": result.latency_chain_ns, "peak_kind": result.peak_kind,
        "expected_ns": result.expected_ns, "expected_peak_kind": result.expected_peak_kind,
        "residual_ratio": placement.residual_ratio if placement else None,
        "position": placement.position if placement else None,
        "attainable_ns": result.attainable_ns, "attainable_resource_ns": result.attainable_resource_ns,
        "attainable_ceilings": result.attainable_ceilings,
        "attainable_ratio": placement.attainable_ratio if placement else None,
        "stop_rule_floor": result.floor_used,
        "beats_ceiling": placement.beats_ceiling if placement else None,
    }
    return section, result, placement, cfg.settings(), fit


def _op_floor(con: duckdb.DuckDBPyConnection, steps: list[StepAccount], floor_section: dict[str, Any] | None,
              fit: Fit | None, step_p50: int, opts: AnalyzeOptions) -> OpFloor | None:
    """The op floor at the physical peaks of the GPU the trace identifies (else the config's hardware)."""
    key = (fit.gpu.key if fit else identify(con).key) or (floor_section["hardware"] if floor_section else None)
    if key is None or not steps:
        return None
    return compute_op_floor(con, steps, floor.get_gpu(key), key, step_p50, opts.threshold,
                            load_rules().communication)


def _gpu_models(con: duckdb.DuckDBPyConnection) -> dict[int, list[str]]:
    """Per rank, the GPU models that ran its kernels (what `diff` compares across captures)."""
    out: dict[int, list[str]] = defaultdict(list)
    for rank, name in con.execute("""
        SELECT DISTINCT rank, trim(name) FROM used_devices WHERE coalesce(trim(name), '') <> ''
        ORDER BY 1, 2
    """).fetchall():
        out[rank].append(name)
    return out


@dataclass
class Analysis:
    """The v2 report and the per-device summaries behind it; per-operation detail of a step or a device is
    re-read from the store on request (for timelines and exports)."""

    report: dict[str, Any]
    devices: list[DeviceAnalysis]
    store: Store
    opts: AnalyzeOptions
    cross: CrossRank | None = None  # the cross-rank analysis (None for one device)
    typed: Report | None = None  # ``report`` as its typed contract (what the renderers read)
    _reader: DetailReader | None = field(default=None, init=False, repr=False)

    def _detail_reader(self) -> DetailReader:
        if self._reader is None:
            self._reader = DetailReader(self.store.con, step_marker(self.opts))
        return self._reader

    def step_detail(self, dev: DeviceAnalysis, acc: StepAccount) -> tuple[Detail, StepAccount]:
        """One analysed step's operations and host activity, and its full account (gaps, ops_in_window)."""
        return self._detail_reader().step(dev, acc)

    def device_detail(self, dev: DeviceAnalysis) -> Detail:
        """All of one device's operations with every analysed step's full account."""
        return self._detail_reader().device(dev)


def analyze(store: Store, opts: AnalyzeOptions) -> dict[str, Any]:
    """Run the whole analysis over an open store and return the v2 report document."""
    return run_analysis(store, opts).report


def run_analysis(store: Store, opts: AnalyzeOptions) -> Analysis:
    """Run the whole analysis over an open store: the report and its per-device detail."""
    return build_analysis(store, opts, analyze_devices(store, opts))


def refuse_unsupported_device(store: Store) -> None:
    """An input error naming the first file whose capture holds an accelerator tracekit does not read."""
    unsupported = unsupported_devices(store.con)
    if unsupported:
        rank, text = unsupported[0]
        source = next((f.source for f in store.files if f.rank == rank), store.files[0].source)
        raise InputError(f"{source}: {text}")


def refuse_without_gpu_activity(store: Store) -> None:
    """An input error naming the first file whose capture has no GPU activity (its reader's note says why, or
    the accelerator it holds instead: MTIA, TPU)."""
    refuse_unsupported_device(store)
    row = store.con.execute("SELECT rank, detail FROM read_notes WHERE kind = ? ORDER BY rank LIMIT 1",
                            [NO_GPU_ACTIVITY]).fetchone()
    if row is not None:
        source = next((f.source for f in store.files if f.rank == row[0]), store.files[0].source)
        raise InputError(f"{source}: {row[1]}")


def analyze_devices(store: Store, opts: AnalyzeOptions) -> list[DeviceAnalysis]:
    """The per-rank part: every device's steps, accounted in bounded batches and reduced to summaries."""
    refuse_without_gpu_activity(store)
    rules = load_rules()
    con = store.con
    pairs = prepare(con, rules)
    vocab = Vocabulary.load(con)
    return analyze_all(con, vocab, pairs, opts, rules, store.jobs)


def build_analysis(store: Store, opts: AnalyzeOptions, results: list[DeviceAnalysis]) -> Analysis:
    """The cross-rank part: reduce the per-device results (in (rank, device) order) to the report."""
    rules = load_rules()
    con = store.con
    caveats = capture_caveats(con, opts.step_regex)
    caveats += wait_caveats(results)
    accounts = [a for r in results for a in r.accounts]
    complete = complete_steps(results)
    step_ns = [a.dur_ns for a in complete]
    step_p50, step_p99 = _median(step_ns), _p(step_ns, 99)
    sources = sorted({r.source.kind for r in results})

    host_gaps = _host_gaps(results, accounts, step_p50, opts.top_gaps)  # question 1
    # Question 2: exposed communication, every figure from one step (the median step).
    step = median_step(complete)
    exposed_comm = _exposed_comm(accounts, step, rules.communication)
    exposed_comm["all_steps"] = _overlap_all_steps(accounts)
    # Floor and question 3: classes against budgets (the config's floor, else the op floor).
    register_attribution(con, rules)
    shape = infer_shape(con)
    floor_section, floor_result, placement, effective, fit = _floor_section(con, opts, step_p50, shape)
    op = _op_floor(con, complete, floor_section, fit, step_p50, opts)
    model_budgets = class_budgets(floor_result.parts, rules) if floor_result else {}
    inflation = work_inflation(op, floor_section["t_opt_ns"] if floor_section else None, model_budgets,
                               step_p50) if op else None
    layers = layer_tables(Modules.of(load_modules(con)), op.units, op.section["steps"]) if op else None
    cross = cross_rank(results, RankMeta.load(con), floor_section["hardware"] if floor_section else None)
    split = cross.step_split(*_position(results, step)) if cross is not None and step is not None else None
    exposed_comm |= {"wait_ns": split[0] if split else None, "transfer_ns": split[1] if split else None}
    kernel_wait, wait_reason = cross.verdict_note(exposed_comm["exposed_ns"], exposed_comm["wait_ns"]) if cross \
        else (0, None)
    budgets = class_budgets(floor_result.parts, rules) if floor_result is not None else {}
    # the same budgets at the attainable ceilings: what "over budget" is judged against, as the stop rule is
    attainable = class_budgets([SimpleNamespace(name=p.name, floor_ns=p.attainable_ns) for p in floor_result.parts],
                               rules) if floor_result is not None else {}
    verdict_floor, verdict_placement = floor_section, placement
    no_floor = verdict_coverage_reason(op) if floor_section is None and op is not None else None
    if floor_section is None and op is not None and no_floor is None:  # no config: the op floor decides
        verdict_floor = {"t_opt_ns": op.t_opt_ns, "peak_kind": "physical", "kind": "op"}
        verdict_placement, budgets = op.placement, op.class_budgets
    classes = _classes(accounts, results, rules.communication, budgets, opts, step_p50, attainable)

    verdict, reasons = decide(Evidence(
        blocking=caveat_texts([c for c in caveats if c.kind in BLOCKING_CAVEATS]),
        whole_capture=any(r.source.kind == "whole_capture" for r in results), step_p50=step_p50 if results else 0,
        floor=verdict_floor, placement=verdict_placement, fit_reasons=fit.reasons if fit else [],
        host_gaps=host_gaps, exposed_comm=exposed_comm, classes=classes, kernel_wait_ns=kernel_wait,
        wait_reason=wait_reason, config_name=opts.config if floor_section else None, no_floor_reason=no_floor), opts)
    head = host_gaps["before_first_kernel"]
    if head["fraction"] >= HEAD_IDLE_SHARE and verdict != "inconclusive":
        reasons.append(head_text(head))
    targets = ncu_targets(con, results, classes, opts.max_targets) if verdict == "kernel" else []
    gpus = _gpu_models(con)
    graphs = replay_section(con, [str(f.source) for f in store.captures])
    report = {
        "schema": REPORT_SCHEMA,
        "inputs": [{"rank": f.rank, "ranks": list(f.ranks), "path": str(f.source), "format": f.fmt,
                    "gpus": gpus.get(f.rank, []), "role": "trace"}
                   for f in store.files] + [{"rank": f.rank, "ranks": list(f.ranks), "path": str(f.source),
                                             "format": f.fmt, "gpus": [], "role": "graph_capture"}
                                            for f in store.captures],
        "config": {"name": opts.config, "overrides": opts.overrides, "effective": effective,
                   "threshold": opts.threshold, "min_excess_fraction": opts.min_excess_fraction,
                   "step_regex": opts.step_regex, "skip_steps": opts.skip_steps},
        "steps": {"count": len(accounts), "incomplete": len(accounts) - len(complete), "source": sources,
                  "outside_waits": waits_section(results),
                  "step_ns_p50": step_p50, "step_ns_p99": step_p99,
                  "capture_only": any(c.kind == "graph_capture_only" for c in caveats),
                  "count_per_rank": {str(r): n for r, n in sorted(Counter(a.rank for a in accounts).items())},
                  **_rank_spread(complete)},
        "floor": floor_section,
        "floor_used": "model" if floor_section else "op" if verdict_floor is not None else None,
        "op_floor": op.section if op else None,
        "work_inflation": inflation,
        "layers": layers,
        "model_shape": shape.section(),
        "fit": fit.section() if fit else None,
        "host_gaps": host_gaps,
        "exposed_comm": exposed_comm,
        "ranks": cross.section if cross else None,
        "graphs": graphs,
        "classes": classes,
        "kernels": _kernel_table(results, len(accounts)),
        "samples": step_samples(complete, rules.communication),
        "ncu_targets": targets,
        "verdict": verdict,
        "reasons": reasons,
        "caveats": caveat_texts(caveats) + (fit.caveats if fit else []) + store.warnings,
        "walls": walls_section(opts),
    }
    typed = typed_report(report)  # the contract: a section without its field in tracekit/schema/report.py fails here
    return Analysis(report, results, store, opts, cross, typed)


def _position(results: list[DeviceAnalysis], step: StepAccount) -> tuple[int, int, int]:
    """(rank, device, position among its device's accounts) of one analysed step."""
    dev = next(r for r in results if (r.rank, r.device_id) == (step.rank, step.device_id))
    return step.rank, step.device_id, next(i for i, a in enumerate(dev.accounts) if a is step)


def _host_gaps(results: list[DeviceAnalysis], accounts: list[StepAccount], step_p50: int,
               top: int) -> dict[str, Any]:
    """Question 1: host gaps per step (median), by cause, the GPU idle before each step's first operation
    (median, by cause, with its longest instance's context) and the costliest gap findings."""
    gap_ns = _median([a.gap_ns for a in accounts])
    heads = [h for r in results for h in r.heads]
    head_ns = _median([h["total_ns"] for h in heads])
    longest = max((r.head_context for r in results if r.head_context), key=lambda c: c["dur_ns"], default=None)
    return {"statistic": "median over steps", "total_ns": gap_ns, "fraction": gap_ns / step_p50 if step_p50 else 0.0,
            "by_cause": {c: _median([cs[c] for r in results for cs in r.causes]) for c in CAUSES},
            "before_first_kernel": {"ns": head_ns, "fraction": head_ns / step_p50 if step_p50 else 0.0,
                                    "by_cause": {c: _median([h[c] for h in heads]) for c in CAUSES},
                                    "longest": longest},
            "top": _top_gaps(results, top)}


HEAD_IDLE_SHARE = 0.25  # GPU idle before a step's first kernel beyond this share of the step is a finding


def head_text(head: dict[str, Any]) -> str:
    """The finding 'GPU idle before the first kernel', with its cause and what the host was doing."""
    cause = max(head["by_cause"], key=lambda c: head["by_cause"][c])
    host = (head.get("longest") or {}).get("host") or {}
    where = f"; the host was in {host['range']!r}" if host.get("range") else ""
    return (f"GPU idle before the first kernel: {ms(head['ns'])} per step ({head['fraction']:.0%} of the step), "
            f"host time, mostly {cause}{where}")


def _rank_spread(accounts: list[StepAccount]) -> dict[str, Any]:
    """Each rank's median step, the slowest rank and its ratio to the median of the ranks' medians."""
    per_rank = defaultdict(list)
    for a in accounts:
        per_rank[a.rank].append(a.dur_ns)
    rank_p50 = {r: _median(v) for r, v in per_rank.items()}
    slowest = max(rank_p50, key=lambda r: rank_p50[r]) if rank_p50 else None
    typical = _median(list(rank_p50.values()))
    return {"per_rank_p50_ns": {str(r): v for r, v in sorted(rank_p50.items())}, "slowest_rank": slowest,
            "straggler_ratio": rank_p50[slowest] / typical if slowest is not None and typical else None}


def complete_steps(results: list[DeviceAnalysis]) -> list[StepAccount]:
    """The analysed steps whose window is complete: all but the last step of each device that has others.
    Step i's window ends where step i+1's first operation starts; the last has no next step and ends at its
    own last operation, so it is cut short (or runs long, through whatever came after the loop)."""
    return [a for r in results for a in (r.accounts[:-1] if len(r.accounts) > 1 else r.accounts)]


def median_step(accounts: list[StepAccount]) -> StepAccount | None:
    """The (lower) median step by duration over all ranks and devices; ties by rank, device and step."""
    ordered = sorted(accounts, key=lambda a: (a.dur_ns, a.rank, a.device_id, a.window.index))
    return ordered[(len(ordered) - 1) // 2] if ordered else None


def _exposed_comm(accounts: list[StepAccount], step: StepAccount | None,
                  communication: frozenset[str]) -> dict[str, Any]:
    """Question 2 from the figures of one step, so that they add up: each collective's kernel time
    (``comm_ns``, a sum) less ``concurrent_ns`` (time two collectives' kernels overlapped) is the union
    ``comm_ns``; the collectives' exposed shares sum to ``exposed_ns``. Collectives seen in any step are listed."""
    collectives = sorted({c for a in accounts for c in a.exposed_by_class} |
                         {c for a in accounts for c in a.measured_by_class if c in communication})
    if step is None:
        return {"statistic": "the median step", "step": None, "comm_ns": 0, "exposed_ns": 0, "fraction": 0.0,
                "overlap_fraction": None,
                "exposed_under_memops_ns": 0, "overlap_fraction_incl_memops": None, "concurrent_ns": 0,
                "by_collective": {c: {"comm_ns": 0, "exposed_ns": 0} for c in collectives}}
    comm, exposed, under = step.comm_ns, step.exposed_ns, step.exposed_under_memops_ns
    by = {c: {"comm_ns": step.measured_by_class.get(c, 0), "exposed_ns": step.exposed_by_class.get(c, 0)}
          for c in collectives}
    return {
        "statistic": "the median step",
        "step": {"rank": step.rank, "device": step.device_id, "label": step.window.label, "dur_ns": step.dur_ns},
        "comm_ns": comm, "exposed_ns": exposed, "fraction": exposed / step.dur_ns if step.dur_ns else 0.0,
        "overlap_fraction": (1 - exposed / comm) if comm else None,
        "exposed_under_memops_ns": under,
        "overlap_fraction_incl_memops": (1 - (exposed - under) / comm) if comm else None,
        "concurrent_ns": sum(v["comm_ns"] for v in by.values()) - comm,
        "by_collective": by,
    }


def step_samples(complete: list[StepAccount], communication: frozenset[str]) -> dict[str, Any]:
    """Per complete step (in rank, device, step order; at most ``MAX_SAMPLES``, evenly thinned), what `diff`
    tests for noise: the step, its host gaps, its exposed communication and each class's owned time (the
    attributed compute, or a collective's exposed time): the same partition as ``classes.attributed_ns``."""
    picked = complete
    if len(complete) > MAX_SAMPLES:
        picked = [complete[i] for i in np.linspace(0, len(complete) - 1, MAX_SAMPLES).round().astype(int)]
    names = sorted({c for a in picked for c in a.measured_by_class})
    return {
        "step_ns": [a.dur_ns for a in picked], "host_gap_ns": [a.gap_ns for a in picked],
        "exposed_comm_ns": [a.exposed_ns for a in picked],
        "class_ns": {c: [(a.exposed_by_class if c in communication else a.attributed_by_class).get(c, 0)
                         for a in picked] for c in names},
        "thinned": len(complete) > MAX_SAMPLES,
    }


def _kernel_table(results: list[DeviceAnalysis], n_steps: int) -> list[dict[str, Any]]:
    """The ``MAX_KERNELS`` kernels (by name, over all devices) with the most time in the analysed steps: class,
    launches, total and mean time per launch (what `diff`'s kernel-level section and whole-capture gate read)."""
    total: dict[tuple[str, str], int] = defaultdict(int)
    launches: dict[tuple[str, str], int] = defaultdict(int)
    for res in results:
        for key, ns in res.kernel_ns.items():
            total[key] += ns
            launches[key] += res.kernel_launches.get(key, 0)
    top = sorted(total, key=lambda k: (-total[k], k[1]))[:MAX_KERNELS]
    return [{"name": name, "class": cls, "launches": launches[(cls, name)], "total_ns": total[(cls, name)],
             "mean_ns": total[(cls, name)] // max(launches[(cls, name)], 1),
             "per_step_ns": total[(cls, name)] // max(n_steps, 1)} for cls, name in top]


def _overlap_all_steps(accounts: list[StepAccount]) -> dict[str, Any]:
    """Overlap over every analysed step together (all ranks and devices): Σ communication, Σ exposed and
    1 − their ratio; the whole-capture figure beside the median step's (HTA's overlap is over its window)."""
    comm, exposed = sum(a.comm_ns for a in accounts), sum(a.exposed_ns for a in accounts)
    return {"steps": len(accounts), "comm_ns": comm, "exposed_ns": exposed,
            "overlap_fraction": (1 - exposed / comm) if comm else None}


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
             budgets: dict[str, int], opts: AnalyzeOptions, step_p50: int,
             attainable: dict[str, int] | None = None) -> list[dict[str, Any]]:
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
        # over budget at the attainable ceilings (the best measured rates), not at spec-sheet peaks, so a kernel
        # cuBLAS already runs at its limit is not sent to ncu
        reach = (attainable or {}).get(c) or budget
        attainable_ratio = measured / reach if reach else None
        over = bool(budget and c not in communication and attainable_ratio is not None
                    and attainable_ratio > opts.threshold and excess >= opts.min_excess_fraction * step_p50)
        top = kernel_time[c][:5]
        rows.append({
            "name": c, "communication": c in communication, "measured_ns": measured, "attributed_ns": attributed,
            "budget_ns": budget, "ratio": ratio, "excess_ns": excess, "over_budget": over,
            "attainable_budget_ns": reach, "attainable_ratio": attainable_ratio,
            "kernels": [{"name": n, "per_step_ns": int(t / n_steps)} for n, t in top],
        })
    rows.sort(key=lambda r: (-r["excess_ns"], -r["measured_ns"]))
    return rows
