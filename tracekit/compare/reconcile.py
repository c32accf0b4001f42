"""Serving benchmarks against the floor (``tracekit reconcile``): the operating point of each run, its TPOT
P50 and P99 placed against the floor at that point, the closest wall, the measured goodput against the
floor's frontier, and the benchmark-discipline rules, each checked and reported.

The result is the ``tracekit.reconcile/v1`` document (docs/reconcile.md); renderers only format it.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from tracekit import floor
from tracekit.analysis.verdict import ms
from tracekit.budgets.configs import load_config
from tracekit.compare.benchresults import BenchResult
from tracekit.schema.reconcile import (
    Benchmark,
    ClosestWall,
    Goodput,
    ModelCheck,
    Placement,
    Reconcile,
    ReconcileConfig,
    Rule,
    Run,
    RunFloor,
    RunPoint,
    Source,
    Sweep,
    SweepPoint,
    Tpot,
)
from tracekit.schema.report import FrontierPoint, ResourceNs, Wall
from tracekit.schema.verdict import Verdict

STEADY_STATE_FACTOR = 10  # requests needed per request in flight before warm-up and drain stop dominating
DERIVED_KEYS = ("batch", "context_tokens")


@dataclass
class ReconcileOptions:
    """What the user asked for; every threshold is reported back in the document."""

    config: str
    overrides: dict[str, str] = field(default_factory=dict)
    threshold: float = floor.NEAR_FLOOR_THRESHOLD


@dataclass
class OperatingPoint:
    """Requests in flight (and how that was found) and the mean KV length per request."""

    concurrency: float | None
    source: str
    detail: str
    context_tokens: int | None


def operating_point(r: BenchResult) -> OperatingPoint:
    """Concurrency: the tool's measured average, else Little's law (requests/s x mean E2E), else its
    decode-side form (output tokens/s x mean TPOT), else the configured cap. Context: mean input + half
    the mean output (the KV length averaged over a request's decode)."""
    context = None
    if r.input_len_mean is not None and r.output_len_mean is not None:
        context = max(1, round(r.input_len_mean + r.output_len_mean / 2))
    if r.concurrency_reported is not None:
        return OperatingPoint(r.concurrency_reported, "reported",
                              f"{r.tool}'s measured average of requests in flight", context)
    if r.throughput_requests_per_s and r.e2e_ns_mean:
        conc = r.throughput_requests_per_s * r.e2e_ns_mean / 1e9
        return OperatingPoint(conc, "littles_law", f"Little's law: {r.throughput_requests_per_s:.4g} requests/s "
                              f"x mean E2E {r.e2e_ns_mean / 1e6:.1f} ms", context)
    per_token, what = (r.tpot_ns_mean, "TPOT") if r.tpot_ns_mean else (r.itl_ns_mean, "ITL")
    if r.output_tokens_per_s and per_token:
        conc = r.output_tokens_per_s * per_token / 1e9
        return OperatingPoint(conc, "littles_law_tokens", f"Little's law over tokens (no mean E2E reported): "
                              f"{r.output_tokens_per_s:.5g} output tokens/s x mean {what} "
                              f"{per_token / 1e6:.2f} ms", context)
    if r.max_concurrency:
        return OperatingPoint(float(r.max_concurrency), "max_concurrency",
                              "the configured concurrency cap (no throughput and latency to apply Little's law)",
                              context)
    return OperatingPoint(None, "unknown", "neither concurrency nor throughput and latency are reported", context)


def discipline(r: BenchResult, concurrency: float | None) -> list[Rule]:
    """The four rules, each ok, broken or unknown (never assumed), with the numbers behind the status."""
    rules = []
    rate, cap = r.request_rate_per_s, r.max_concurrency
    if rate is None:
        rules.append(_rule("open_loop", "unknown", "the arrival process is not recorded in the result"))
    elif math.isinf(rate):
        rules.append(_rule("open_loop", "broken", "closed loop: requests are sent back to back"
                           + (f" with {cap} in flight" if cap else " all at once")
                           + "; this measures latency at a fixed concurrency, not at an arrival rate"))
    else:
        rules.append(_rule("open_loop", "ok", f"open loop at {rate:g} requests/s"
                           + (f", capped at {cap} in flight (arrivals queue client-side when the cap binds)"
                              if cap else "")))
    stds = {"input": r.input_len_std, "output": r.output_len_std}
    if any(v is None for v in stds.values()):
        rules.append(_rule("length_distribution", "unknown",
                           "the result has no per-request lengths or their spread; cannot tell"))
    else:
        fixed = [k for k, v in stds.items() if v == 0]
        rules.append(_rule("length_distribution", "broken" if fixed else "ok",
                           f"every request has the same {' and '.join(fixed)} length (std 0)" if fixed else
                           f"length std: input {stds['input']:.4g}, output {stds['output']:.4g} tokens"))
    if r.num_requests is None or concurrency is None:
        rules.append(_rule("steady_state", "unknown", f"rule: requests >= {STEADY_STATE_FACTOR} x concurrency; "
                           "the request count or the concurrency is not known"))
    else:
        need = STEADY_STATE_FACTOR * concurrency
        ok = r.num_requests >= need
        rules.append(_rule("steady_state", "ok" if ok else "broken",
                           f"{r.num_requests} requests {'>=' if ok else '<'} {STEADY_STATE_FACTOR} x concurrency "
                           f"{concurrency:.1f} = {need:.0f}" + ("" if ok else ": warm-up and drain dominate")))
    rules.append(failed_rule(r))
    missing = [n for n, v in (("TPOT P50", r.tpot_ns_p50), ("TPOT P99", r.tpot_ns_p99),
                              ("TTFT P50", r.ttft_ns_p50), ("TTFT P99", r.ttft_ns_p99)) if v is None]
    rules.append(_rule("tail_percentiles", "broken" if missing else "ok",
                       f"missing: {', '.join(missing)}" if missing else "TPOT and TTFT P50 and P99 present"))
    return rules


def failed_rule(r: BenchResult) -> Rule:
    """``no_failed_requests``: the latency percentiles of a run with failed requests describe the requests that
    succeeded only (a server that fails its slowest requests looks fast)."""
    if r.failed_requests is None:
        return _rule("no_failed_requests", "unknown", f"{r.tool} does not report failed requests")
    if r.failed_requests == 0:
        return _rule("no_failed_requests", "ok", "no request failed")
    total = (r.num_requests or 0) + r.failed_requests
    share = f" of {total} ({r.failed_requests / total:.1%})" if r.num_requests is not None else ""
    return _rule("no_failed_requests", "broken", f"{r.failed_requests} requests failed{share}: the percentiles "
                 "are over the requests that succeeded only")


_SIZE = re.compile(r"(\d+x)?\d+(\.\d+)?[bm](?![a-z])")


def _family_size(name: str) -> tuple[str, str | None]:
    """('qwen', '8b') for 'Qwen/Qwen3-8B-Instruct': the leading letters of the last path part, and the
    parameter count where the name states one."""
    base = name.rsplit("/", 1)[-1].lower()
    family = re.match(r"[a-z]*", base).group(0)  # type: ignore[union-attr]
    size = _SIZE.search(base.replace("_", "-"))
    return family, size.group(0) if size else None


def model_mismatch(recorded: str | None, model: Any) -> str | None:
    """A reason when the result names a model other than the config's (another family, or another size where
    both names state one); None when they agree or the result names none."""
    if not recorded:
        return None
    fam, size = _family_size(recorded)
    for name in (model.name, model.key):
        f, s = _family_size(name)
        if fam and f and (fam.startswith(f) or f.startswith(fam)) and (size is None or s is None or size == s):
            return None
    return (f"the result is for model {recorded}, the config describes {model.name} ({model.key}): the floor "
            "is another model's; give the config of the served model")


def _rule(name: str, status: Literal["ok", "broken", "unknown"], detail: str) -> Rule:
    return Rule(rule=name, status=status, detail=detail)


def place(result: floor.FloorResult, tpot_ns: int | None, threshold: float) -> Placement | None:
    """One TPOT percentile against the floor per output token (tracekit.floor.place_measured, the stop rule:
    under BELOW_FLOOR_TOLERANCE x t_opt the config does not describe the run, verdict inconclusive)."""
    if not tpot_ns:
        return None
    p = floor.place_measured(result, tpot_ns, threshold, per_token=True)
    return Placement(measured_ns=tpot_ns, t_opt_ns=p.t_opt_ns, t_sum_ns=p.t_sum_ns, position=p.position,
                     residual_ratio=p.residual_ratio, threshold=threshold, verdict=p.verdict, reason=p.reason)


def closest_wall(walls: floor.WallsResult, batch: int) -> ClosestWall | None:
    """The reachable wall nearest the operating concurrency on a log scale."""
    reach = [w for w in walls.walls if w.reachable and w.batch]
    if not reach:
        return None
    w = min(reach, key=lambda w: abs(math.log(batch / w.batch)))
    return ClosestWall(name=w.name, batch=w.batch, batch_ratio=batch / w.batch, note=w.note)


def config_at(opts: ReconcileOptions, derived: dict[str, int], reasons: list[str]) -> floor.DeploymentConfig:
    """The config at the derived batch and context (``--set`` wins). Client-side concurrency beyond the KV
    capacity is requests queued in the server: the decode batch is capped at the capacity, with a reason."""
    settings = {**{k: str(v) for k, v in derived.items()}, **opts.overrides}
    if "batch" not in opts.overrides:
        cap = load_config(opts.config, {**settings, "batch": "1"}).kv_capacity_requests
        if derived["batch"] > cap:
            reasons.append(f"{derived['batch']} requests in flight exceed the KV capacity of {cap} at "
                           f"{derived['context_tokens']} tokens: the rest queue in the server, so the decode "
                           f"batch is taken as {cap}")
            settings["batch"] = str(cap)
    return load_config(opts.config, settings)


def _unplaced(entry: dict[str, Any], reasons: list[str]) -> Run:
    return Run(**entry, floor=None, tpot=Tpot(p50=None, p99=None), closest_wall=None, goodput=None,
               verdict=Verdict.INCONCLUSIVE, reasons=reasons)


def reconcile_one(r: BenchResult, opts: ReconcileOptions) -> Run:
    """One run: operating point, floor there, TPOT placements, closest wall, goodput, discipline, verdict."""
    op = operating_point(r)
    rules = discipline(r, op.concurrency)
    reasons = [f"{x.rule} {x.status}: {x.detail}" for x in rules if x.status != "ok"]
    point = RunPoint(concurrency=op.concurrency, concurrency_source=op.source, concurrency_detail=op.detail,
                     context_tokens=op.context_tokens)
    entry: dict[str, Any] = {"source": Source(path=r.path, index=r.index, tool=r.tool,
                                              tool_version_checked=r.tool_version_checked, label=r.label),
                             "benchmark": msgspec.convert(r.to_dict(), Benchmark), "discipline": rules,
                             "operating_point": point}
    if op.concurrency is None or op.context_tokens is None:
        reasons.insert(0, "no operating point: " + (op.detail if op.concurrency is None else
                                                     "mean input and output lengths are not reported"))
        return _unplaced(entry, reasons)
    derived = {"batch": max(1, round(op.concurrency)), "context_tokens": op.context_tokens}
    try:
        cfg = config_at(opts, derived, reasons)
    except floor.ConfigError as exc:
        reasons.insert(0, f"the config cannot hold this run's operating point: {exc}")
        return _unplaced(entry, reasons)
    for key in DERIVED_KEYS:
        if key in opts.overrides:
            reasons.append(f"--set {key}={opts.overrides[key]} replaces the derived {derived[key]}")
    point.batch, point.effective = cfg.batch, cfg.settings()
    mismatch = model_mismatch(r.model, cfg.model)
    result = floor.compute_floor(cfg)
    p50, p99, source = r.tpot_ns_p50, r.tpot_ns_p99, "tpot"
    if p50 is None and r.itl_ns_p50 is not None:
        p50, p99, source = r.itl_ns_p50, r.itl_ns_p99, "itl"
        reasons.append("no TPOT in the result: ITL is placed instead (the gap between consecutive tokens; its "
                       "mean equals TPOT's, its percentiles are over gaps, not requests)")
    tpot = Tpot(p50=place(result, p50, opts.threshold), p99=place(result, p99, opts.threshold))
    point.latency_source = source  # type: ignore[assignment]
    wall = closest_wall(floor.compute_walls(cfg), cfg.batch)
    goodput = None
    if r.output_tokens_per_s is not None:
        at_floor = result.tokens_per_s_per_gpu()
        per_gpu = r.output_tokens_per_s / cfg.n_gpus
        goodput = Goodput(output_tokens_per_s_per_gpu=per_gpu, floor_tokens_per_s_per_gpu=at_floor,
                          fraction_of_floor=per_gpu / at_floor if at_floor else None)
    headline = tpot.p50
    label = "TPOT" if source == "tpot" else "ITL"
    if headline is None:
        verdict = Verdict.INCONCLUSIVE
        reasons.insert(0, "no TPOT or ITL P50 in the result: nothing to place against the floor")
    else:
        verdict = headline.verdict
        reasons.insert(0, f"{label} P50 {ms(headline.measured_ns)} is {headline.residual_ratio:.2f}x the "
                          f"floor t_opt {ms(headline.t_opt_ns)} (physical peaks) at {cfg.batch} requests x "
                          f"{cfg.context_tokens} tokens: {headline.reason}")
        expected = result.per_token_ns(result.expected_ns)
        reasons.insert(1, f"against the calibrated estimate expected_ns {ms(expected)} ({result.expected_peak_kind} "
                          f"peaks, what tuned kernels usually reach; not a bound): "
                          f"{headline.measured_ns / expected:.2f}x")
        if tpot.p99 is not None:
            reasons.insert(2, f"{label} P99 {ms(tpot.p99.measured_ns)} is {tpot.p99.residual_ratio:.2f}x "
                              "the floor t_opt")
    run_floor = RunFloor(t_opt_ns=result.t_opt_ns, t_sum_ns=result.t_sum_ns, binding=result.binding,
                         resource_ns=ResourceNs(**dict(result.resource_ns)), peak_kind=result.peak_kind,
                         expected_ns=result.expected_ns, expected_peak_kind=result.expected_peak_kind,
                         tokens_per_step=cfg.tokens_per_step, kv_capacity_requests=result.kv_capacity_requests,
                         tokens_per_s_per_gpu_at_t_opt=result.tokens_per_s_per_gpu())
    model = ModelCheck(recorded=r.model, config=cfg.model.key, matches=None if not r.model else not mismatch)
    return Run(**entry, floor=run_floor, model=model, tpot=tpot, closest_wall=wall, goodput=goodput,
               verdict=Verdict.INCONCLUSIVE if mismatch else verdict,
               reasons=([mismatch] if mismatch else []) + reasons)


def _runs(entries: list[Run] | list[dict[str, Any]]) -> list[Run]:
    """Runs as their Structs (the CLI's --plot passes the document's results as JSON's builtins)."""
    return [e if isinstance(e, Run) else msgspec.convert(e, Run) for e in entries]


def sweep(entries: list[Run] | list[dict[str, Any]], opts: ReconcileOptions, min_points: int = 2) -> Sweep | None:
    """Several runs: their goodput points (tokens/s per GPU vs TPOT P50) and the floor's walls and frontier at
    the median context of the runs; None with fewer than ``min_points`` placed runs."""
    placed = [(e, e.tpot.p50, e.goodput) for e in _runs(entries) if e.floor is not None and e.tpot.p50 and e.goodput]
    if not placed or len(placed) < min_points:
        return None
    context = round(statistics.median(e.operating_point.context_tokens or 0 for e, _, _ in placed))
    cfg = load_config(opts.config, {"context_tokens": str(context), "batch": "1", **opts.overrides})
    walls = floor.compute_walls(cfg)
    return Sweep(
        context_tokens=cfg.context_tokens,
        kv_capacity_requests=walls.kv_capacity_requests,
        walls=[Wall(**vars(w)) for w in walls.walls],
        frontier=[FrontierPoint(**vars(p)) for p in walls.frontier],
        points=[SweepPoint(label=e.source.label, path=e.source.path, batch=e.operating_point.batch or 0,
                           tpot_ns_p50=p50.measured_ns, tpot_ns_p99=e.tpot.p99.measured_ns if e.tpot.p99 else None,
                           t_opt_ns=e.floor.t_opt_ns, t_sum_ns=e.floor.t_sum_ns,  # type: ignore[union-attr]
                           tokens_per_s_per_gpu=g.output_tokens_per_s_per_gpu,
                           floor_tokens_per_s_per_gpu=g.floor_tokens_per_s_per_gpu)
                for e, p50, g in sorted(placed, key=lambda x: x[0].operating_point.batch or 0)],
    )


def reconcile(results: list[BenchResult], opts: ReconcileOptions) -> dict[str, Any]:
    """The ``tracekit.reconcile/v1`` document for one or more runs (a sweep when more than one places), as
    JSON's builtins (``msgspec.to_builtins`` of the typed ``tracekit.schema.reconcile.Reconcile``)."""
    # A bad --config or --set fails once, as a usage error; the load itself comes from each run.
    load_config(opts.config, {"batch": "1", "context_tokens": "1", **opts.overrides})
    entries = [reconcile_one(r, opts) for r in results]
    doc = Reconcile(config=ReconcileConfig(name=opts.config, overrides=dict(opts.overrides), threshold=opts.threshold,
                                           below_floor_tolerance=floor.BELOW_FLOOR_TOLERANCE,
                                           steady_state_factor=STEADY_STATE_FACTOR),
                    results=entries, sweep=sweep(entries, opts), plot=None)
    return msgspec.to_builtins(doc)
