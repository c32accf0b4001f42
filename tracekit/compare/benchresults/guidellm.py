"""GuideLLM ``benchmarks.json`` (``guidellm benchmark --output-path ...json``): ``{"benchmarks": [...]}``,
one generative benchmark per strategy of the profile (a sweep gives several).

Each metric is a StatusDistributionSummary ``{"successful", "incomplete", "errored", "total"}`` of
DistributionSummary ``{"mean", "median", "std_dev", "count", "percentiles": {"p50", "p99", ...}}``;
``request_latency`` is in seconds, the ``*_ms`` metrics in ms. The strategy is under ``args.strategy``
(GuideLLM 0.2/0.3) or ``config.strategy`` (later): ``synchronous``, ``concurrent`` (``streams``),
``throughput``, ``constant`` or ``poisson`` (``rate``). GuideLLM's ``inter_token_latency_ms`` is per
request (last token - first token) / (tokens - 1), i.e. vLLM's TPOT, and is read as TPOT.
"""

from __future__ import annotations

from typing import Any

from tracekit.errors import InputError

from .record import CLOSED_LOOP, BenchResult, ms_to_ns, number, s_to_ns

TOOL = "guidellm"
VERSION_CHECKED = ("vllm-project/guidellm src/guidellm/benchmark/benchmark.py @47ce2924, "
                   "utils/statistics.py @1bd8846a, benchmark/schemas/generative/{benchmark,metrics}.py @03820eba")
OPEN_LOOP = ("constant", "poisson")


def matches(doc: Any) -> bool:
    """A GuideLLM report: a ``benchmarks`` list whose entries carry ``metrics.request_latency``."""
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    return (isinstance(benches, list) and bool(benches) and isinstance(benches[0], dict)
            and isinstance(benches[0].get("metrics"), dict) and "request_latency" in benches[0]["metrics"])


def read_report(doc: dict[str, Any], path: str) -> list[BenchResult]:
    return [_read_one(b, path, i) for i, b in enumerate(doc["benchmarks"])]


def _strategy(bench: dict[str, Any], where: str) -> tuple[float | None, int | None, str, list[str]]:
    """The arrival process: (request rate per s or CLOSED_LOOP, max concurrency, label, notes)."""
    holder = bench.get("args") if isinstance(bench.get("args"), dict) else bench.get("config") or {}
    strategy = holder.get("strategy") if isinstance(holder, dict) else None
    kind = str((strategy or {}).get("type_", "unknown"))
    notes = ["TPOT is GuideLLM's inter_token_latency_ms (per request (last - first token) / (tokens - 1))"]
    max_conc: int | None = None
    if kind in OPEN_LOOP:
        rate = number(strategy.get("rate"), f"{where} strategy.rate")
        rate_per_s: float | None = rate
        label = f"{kind} {rate:g}/s" if rate is not None else kind
    elif kind in ("synchronous", "concurrent", "throughput"):
        rate_per_s = CLOSED_LOOP
        streams = strategy.get("streams") if kind == "concurrent" else strategy.get("max_concurrency")
        max_conc = 1 if kind == "synchronous" else (int(streams) if streams else None)
        label = kind + (f" {streams}" if kind == "concurrent" and streams else "")
    else:
        rate_per_s, label = None, f"strategy {kind}"
        notes.append(f"strategy {kind!r} not recognised: arrival process unknown")
    return rate_per_s, max_conc, label, notes


def _read_one(bench: Any, path: str, index: int) -> BenchResult:
    where = f"{path} (GuideLLM benchmark {index})"
    if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
        raise InputError(f"{where}: not a benchmark object; is this an unmodified benchmarks.json?")
    metrics = bench["metrics"]

    def dist(metric: str) -> dict[str, Any]:
        entry = metrics.get(metric) or {}
        ok = entry.get("successful") if isinstance(entry, dict) else None
        return ok if isinstance(ok, dict) else {}

    def pct(metric: str, p: str) -> float | None:
        d = dist(metric)
        pcts = d.get("percentiles") or {}
        value = pcts.get(p, d.get("median") if p == "p50" else None)
        return number(value, f"{where} metrics.{metric}.successful.percentiles.{p}")

    def field(metric: str, key: str) -> float | None:
        return number(dist(metric).get(key), f"{where} metrics.{metric}.successful.{key}")

    rate_per_s, max_conc, label, notes = _strategy(bench, where)
    totals = bench.get("request_totals") or metrics.get("request_totals") or {}
    successful = totals.get("successful") if isinstance(totals, dict) else None
    duration_s = number(bench.get("duration"), f"{where} duration")
    n_ok = int(successful) if successful is not None else None
    errored = totals.get("errored") if isinstance(totals, dict) else None
    throughput = (n_ok / duration_s) if n_ok is not None and duration_s else field("requests_per_second", "mean")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s, max_concurrency=max_conc,
        concurrency_reported=field("request_concurrency", "mean"),
        num_requests=n_ok,
        input_len_mean=field("prompt_token_count", "mean"), input_len_std=field("prompt_token_count", "std_dev"),
        output_len_mean=field("output_token_count", "mean"),
        output_len_std=field("output_token_count", "std_dev"),
        ttft_ns_p50=ms_to_ns(pct("time_to_first_token_ms", "p50")),
        ttft_ns_p99=ms_to_ns(pct("time_to_first_token_ms", "p99")),
        tpot_ns_p50=ms_to_ns(pct("inter_token_latency_ms", "p50")),
        tpot_ns_p99=ms_to_ns(pct("inter_token_latency_ms", "p99")),
        tpot_ns_mean=ms_to_ns(field("inter_token_latency_ms", "mean")),
        itl_ns_p50=None, itl_ns_p99=None,
        e2e_ns_p50=s_to_ns(pct("request_latency", "p50")), e2e_ns_p99=s_to_ns(pct("request_latency", "p99")),
        e2e_ns_mean=s_to_ns(field("request_latency", "mean")),
        throughput_requests_per_s=throughput,
        output_tokens_per_s=field("output_tokens_per_second", "mean"),
        duration_ns=s_to_ns(duration_s),
        notes=notes,
        failed_requests=int(errored) if isinstance(errored, (int, float)) and not isinstance(errored, bool) else None,
    )
