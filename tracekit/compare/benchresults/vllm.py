"""vLLM ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py) and the older
``benchmarks/benchmark_serving.py --save-result`` JSON.

Times are milliseconds (``median_tpot_ms``, ``p99_tpot_ms``, ...); ``request_rate`` is a number or the
string ``"inf"`` (all requests sent at once); ``max_concurrency`` is the client-side cap or null.
Per-request ``input_lens``/``output_lens`` are present only with ``--save-detailed`` (serve.py) or in
benchmark_serving.py files; otherwise lengths are totals / completed and their spread is unknown.
"""

from __future__ import annotations

from typing import Any

from .record import CLOSED_LOOP, BenchResult, mean_std, ms_to_ns, number, s_to_ns, vllm_family_fields

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
    fields = vllm_family_fields(doc, where)
    rate = doc.get("request_rate")
    rate_per_s = CLOSED_LOOP if rate in (None, "inf") else number(rate, f"{where} request_rate")
    if rate is None:
        notes.append("request_rate missing: taken as inf (serve.py's default)")
    if fields["input_len_std"] is None or fields["output_len_std"] is None:
        notes.append("no per-request lengths (run with --save-detailed): length spread unknown")
    e2e_mean = ms_to_ns(doc.get("mean_e2el_ms"), f"{where} mean_e2el_ms")
    if e2e_mean is None and isinstance(doc.get("latencies"), list) and doc["latencies"]:
        lat_mean, _ = mean_std(doc["latencies"], f"{where} latencies")
        e2e_mean = s_to_ns(lat_mean)
    max_conc = fields["max_concurrency"]
    label = f"rate {rate if rate is not None else 'inf'}/s" + (f", max {max_conc}" if max_conc else "")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s, concurrency_reported=None, **fields,
        e2e_ns_p50=ms_to_ns(doc.get("median_e2el_ms"), f"{where} median_e2el_ms"),
        e2e_ns_p99=ms_to_ns(doc.get("p99_e2el_ms"), f"{where} p99_e2el_ms"),
        e2e_ns_mean=e2e_mean, notes=notes, model=_text(doc.get("model_id")),
        failed_requests=int(number(doc["failed"], f"{where} failed") or 0) if doc.get("failed") is not None else None,
    )


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None
