"""vLLM ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py) and the older
``benchmarks/benchmark_serving.py --save-result`` JSON.

Times are milliseconds (``median_tpot_ms``, ``p99_tpot_ms``, ...); ``request_rate`` is a number or the
string ``"inf"`` (all requests sent at once); ``max_concurrency`` is the client-side cap or null.
Per-request ``input_lens``/``output_lens`` are present only with ``--save-detailed`` (serve.py) or in
benchmark_serving.py files; otherwise lengths are totals / completed and their spread is unknown.
"""

from __future__ import annotations

from typing import Any

from .record import CLOSED_LOOP, BenchResult, lengths, mean_std, ms_to_ns, number, s_to_ns

TOOL = "vllm"
VERSION_CHECKED = ("vllm-project/vllm vllm/benchmarks/serve.py @009e6d4a; "
                   "benchmarks/benchmark_serving.py @0049e29c")


def matches(doc: Any) -> bool:
    """A vLLM result: serving metrics with vLLM's own key names (``*_e2el_ms``, ``num_prompts``, ``date``)."""
    return (isinstance(doc, dict) and "request_throughput" in doc and "completed" in doc
            and ("num_prompts" in doc or "date" in doc) and "median_e2e_latency_ms" not in doc)


def read(doc: dict[str, Any], path: str, index: int) -> BenchResult:
    where = f"{path} (vLLM result {index})"
    notes: list[str] = []

    def ms(key: str) -> int | None:
        return ms_to_ns(doc.get(key), f"{where} {key}")

    def sec(key: str) -> int | None:
        return s_to_ns(doc.get(key), f"{where} {key}")

    rate = doc.get("request_rate")
    rate_per_s = CLOSED_LOOP if rate in (None, "inf") else number(rate, f"{where} request_rate")
    if rate is None:
        notes.append("request_rate missing: taken as inf (serve.py's default)")
    completed = doc.get("completed")
    completed_n = int(number(completed, f"{where} completed") or 0) if completed is not None else None
    in_mean, in_std = lengths(doc, "input_lens", "total_input_tokens", completed_n, where)
    out_mean, out_std = lengths(doc, "output_lens", "total_output_tokens", completed_n, where)
    if in_std is None or out_std is None:
        notes.append("no per-request lengths (run with --save-detailed): length spread unknown")
    e2e_mean = ms("mean_e2el_ms")
    if e2e_mean is None and isinstance(doc.get("latencies"), list) and doc["latencies"]:
        lat_mean, _ = mean_std(doc["latencies"], f"{where} latencies")
        e2e_mean = s_to_ns(lat_mean)
    max_conc = doc.get("max_concurrency")
    label = f"rate {rate if rate is not None else 'inf'}/s" + (f", max {max_conc}" if max_conc else "")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s,
        max_concurrency=int(max_conc) if max_conc is not None else None,
        concurrency_reported=None,
        num_requests=completed_n,
        input_len_mean=in_mean, input_len_std=in_std, output_len_mean=out_mean, output_len_std=out_std,
        ttft_ns_p50=ms("median_ttft_ms"), ttft_ns_p99=ms("p99_ttft_ms"),
        tpot_ns_p50=ms("median_tpot_ms"), tpot_ns_p99=ms("p99_tpot_ms"),
        tpot_ns_mean=ms("mean_tpot_ms"),
        itl_ns_p50=ms("median_itl_ms"), itl_ns_p99=ms("p99_itl_ms"),
        e2e_ns_p50=ms("median_e2el_ms"), e2e_ns_p99=ms("p99_e2el_ms"),
        e2e_ns_mean=e2e_mean,
        throughput_requests_per_s=number(doc.get("request_throughput"), f"{where} request_throughput"),
        output_tokens_per_s=number(doc.get("output_throughput"), f"{where} output_throughput"),
        duration_ns=sec("duration"),
        notes=notes,
    )

