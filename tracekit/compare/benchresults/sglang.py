"""SGLang ``python -m sglang.bench_serving`` output: one JSON object per line (JSONL), one line per run.

Times are milliseconds with SGLang's names (``median_e2e_latency_ms``); ``concurrency`` is the measured
average in flight, sum(E2E) / duration; ``request_rate`` may be Infinity (Python's json writes it so) or
``"trace"`` (replayed timestamps). Per-request lengths appear only with ``--output-details``.
"""

from __future__ import annotations

from typing import Any

from .record import CLOSED_LOOP, BenchResult, ms_to_ns, number, vllm_family_fields

TOOL = "sglang"
VERSION_CHECKED = "sgl-project/sglang python/sglang/bench_serving.py @0033168f"


def matches(doc: Any) -> bool:
    """An SGLang line: SGLang's E2E key names plus its ``concurrency`` field."""
    return isinstance(doc, dict) and "median_e2e_latency_ms" in doc and "request_throughput" in doc


def read(doc: dict[str, Any], path: str, index: int) -> BenchResult:
    where = f"{path} (SGLang line {index + 1})"
    notes: list[str] = []
    fields = vllm_family_fields(doc, where)

    def ms(key: str) -> int | None:
        return ms_to_ns(doc.get(key), f"{where} {key}")

    rate = doc.get("request_rate")
    if rate == "trace":
        rate_per_s: float | None = None
        notes.append("request_rate 'trace': arrivals replayed from a trace, rate not recorded")
    else:
        rate_per_s = CLOSED_LOOP if rate is None else number(rate, f"{where} request_rate")
    dataset = str(doc.get("dataset_name") or "")
    if dataset.startswith("random") and doc.get("random_range_ratio") == 1:
        # bench_serving samples random lengths uniformly in [L * ratio, L]: ratio 1 fixes every length.
        for key in ("input_len_std", "output_len_std"):
            fields[key] = 0.0 if fields[key] is None else fields[key]
        notes.append("random dataset with random_range_ratio 1: every request has the same lengths")
    elif dataset == "sharegpt" and doc.get("sharegpt_output_len") is not None and fields["output_len_std"] is None:
        fields["output_len_std"] = 0.0
        notes.append("sharegpt_output_len set: every request has the same output length")
    if fields["input_len_std"] is None or fields["output_len_std"] is None:
        notes.append("no per-request lengths (run with --output-details): length spread unknown")
    max_conc = fields["max_concurrency"]
    label = f"rate {rate}/s" + (f", max {max_conc}" if max_conc else "")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s,
        concurrency_reported=number(doc.get("concurrency"), f"{where} concurrency"), **fields,
        e2e_ns_p50=ms("median_e2e_latency_ms"), e2e_ns_p99=ms("p99_e2e_latency_ms"),
        e2e_ns_mean=ms("mean_e2e_latency_ms"), notes=notes,
        model=str(doc["model_id"]) if isinstance(doc.get("model_id"), str) and doc["model_id"] else None,
    )
