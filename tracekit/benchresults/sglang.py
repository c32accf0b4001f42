"""SGLang ``python -m sglang.bench_serving`` output: one JSON object per line (JSONL), one line per run.

Times are milliseconds with SGLang's names (``median_e2e_latency_ms``); ``concurrency`` is the measured
average in flight, sum(E2E) / duration; ``request_rate`` may be Infinity (Python's json writes it so) or
``"trace"`` (replayed timestamps). Per-request lengths appear only with ``--output-details``.
"""

from __future__ import annotations

from typing import Any

from .record import CLOSED_LOOP, BenchResult, lengths, ms_to_ns, number, s_to_ns

TOOL = "sglang"
VERSION_CHECKED = "sgl-project/sglang python/sglang/bench_serving.py @0033168f"


def matches(doc: Any) -> bool:
    """An SGLang line: SGLang's E2E key names plus its ``concurrency`` field."""
    return isinstance(doc, dict) and "median_e2e_latency_ms" in doc and "request_throughput" in doc


def read(doc: dict[str, Any], path: str, index: int) -> BenchResult:
    where = f"{path} (SGLang line {index + 1})"
    notes: list[str] = []

    def ms(key: str) -> int | None:
        return ms_to_ns(doc.get(key), f"{where} {key}")

    def sec(key: str) -> int | None:
        return s_to_ns(doc.get(key), f"{where} {key}")

    rate = doc.get("request_rate")
    if rate == "trace":
        rate_per_s: float | None = None
        notes.append("request_rate 'trace': arrivals replayed from a trace, rate not recorded")
    else:
        rate_per_s = CLOSED_LOOP if rate is None else number(rate, f"{where} request_rate")
    completed = doc.get("completed")
    completed_n = int(number(completed, f"{where} completed") or 0) if completed is not None else None
    in_mean, in_std = lengths(doc, "input_lens", "total_input_tokens", completed_n, where)
    out_mean, out_std = lengths(doc, "output_lens", "total_output_tokens", completed_n, where)
    dataset = str(doc.get("dataset_name") or "")
    if dataset.startswith("random") and doc.get("random_range_ratio") == 1:
        # bench_serving samples random lengths uniformly in [L * ratio, L]: ratio 1 fixes every length.
        in_std = 0.0 if in_std is None else in_std
        out_std = 0.0 if out_std is None else out_std
        notes.append("random dataset with random_range_ratio 1: every request has the same lengths")
    elif dataset == "sharegpt" and doc.get("sharegpt_output_len") is not None and out_std is None:
        out_std = 0.0
        notes.append("sharegpt_output_len set: every request has the same output length")
    if in_std is None or out_std is None:
        notes.append("no per-request lengths (run with --output-details): length spread unknown")
    max_conc = doc.get("max_concurrency")
    label = f"rate {rate}/s" + (f", max {max_conc}" if max_conc else "")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s,
        max_concurrency=int(max_conc) if max_conc is not None else None,
        concurrency_reported=number(doc.get("concurrency"), f"{where} concurrency"),
        num_requests=completed_n,
        input_len_mean=in_mean, input_len_std=in_std, output_len_mean=out_mean, output_len_std=out_std,
        ttft_ns_p50=ms("median_ttft_ms"), ttft_ns_p99=ms("p99_ttft_ms"),
        tpot_ns_p50=ms("median_tpot_ms"), tpot_ns_p99=ms("p99_tpot_ms"),
        tpot_ns_mean=ms("mean_tpot_ms"),
        itl_ns_p50=ms("median_itl_ms"), itl_ns_p99=ms("p99_itl_ms"),
        e2e_ns_p50=ms("median_e2e_latency_ms"),
        e2e_ns_p99=ms("p99_e2e_latency_ms"),
        e2e_ns_mean=ms("mean_e2e_latency_ms"),
        throughput_requests_per_s=number(doc.get("request_throughput"), f"{where} request_throughput"),
        output_tokens_per_s=number(doc.get("output_throughput"), f"{where} output_throughput"),
        duration_ns=sec("duration"),
        notes=notes,
    )

