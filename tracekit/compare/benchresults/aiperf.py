"""NVIDIA AIPerf ``profile_export_aiperf.json`` (ai-dynamo/aiperf ``exporters/metrics_json_exporter.py`` and
``common/models/export_models.py``: ``JsonExportData``), GenAI-Perf's successor.

The layout mimics GenAI-Perf's: each metric tag (``time_to_first_token``, ``inter_token_latency``,
``request_latency``, ``request_throughput``, ``output_token_throughput``, ``input_sequence_length``,
``output_sequence_length``, ``request_count``, ``error_request_count``, ``benchmark_duration``) is
``{"unit", "avg", "p1".."p99", "min", "max", "std"}``, beside ``schema_version``, ``aiperf_version`` and the
run's ``input_config`` (``endpoint.model_names``, ``loadgen.concurrency`` / ``request_rate`` /
``request_count``). AIPerf's ``inter_token_latency`` is per request (latency - TTFT) / (output tokens - 1):
read as TPOT, as GenAI-Perf's.
"""

from __future__ import annotations

from typing import Any

from .genai_perf import metric_stat, model_name
from .record import CLOSED_LOOP, BenchResult, ms_to_ns, number

TOOL = "aiperf"
VERSION_CHECKED = ("ai-dynamo/aiperf exporters/metrics_json_exporter.py @047d59dd, "
                   "common/models/export_models.py @26240f9e")
_TIME_SCALE = {"ms": 1.0, "s": 1e3, "sec": 1e3, "us": 1e-3, "ns": 1e-6}


def matches(doc: Any) -> bool:
    """An AIPerf summary export: ``aiperf_version`` (or its ``schema_version``) beside metric dicts."""
    return isinstance(doc, dict) and "aiperf_version" in doc and isinstance(doc.get("request_throughput")
                                                                             or doc.get("request_count"), dict)


def read(doc: dict[str, Any], path: str, index: int) -> BenchResult:
    where = f"{path} (AIPerf export)"
    args = doc.get("input_config") or {}
    loadgen = args.get("loadgen") or {}
    notes = ["TPOT is AIPerf's inter_token_latency (per request (latency - TTFT) / (tokens - 1))"]

    def stat(metric: str, key: str) -> float | None:
        return metric_stat(doc, where, metric, key)

    def ms(metric: str, key: str) -> int | None:
        value = stat(metric, key)
        unit = str((doc.get(metric) or {}).get("unit") or "ms")
        return None if value is None else ms_to_ns(value * _TIME_SCALE.get(unit, 1.0))

    concurrency, rate = loadgen.get("concurrency"), loadgen.get("request_rate")
    if rate:
        rate_per_s: float | None = number(rate, f"{where} input_config.loadgen.request_rate")
        label = f"rate {rate}/s"
    elif concurrency:
        rate_per_s, label = CLOSED_LOOP, f"concurrency {concurrency}"
    else:
        rate_per_s, label = None, "load not recorded"
        notes.append("input_config.loadgen has neither concurrency nor request_rate")
    count = stat("request_count", "avg")
    errors = stat("error_request_count", "avg")
    duration = stat("benchmark_duration", "avg")
    if doc.get("was_cancelled"):
        notes.append("the run was cancelled before it finished")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s, max_concurrency=int(concurrency) if concurrency else None,
        concurrency_reported=None, num_requests=int(count) if count else None,
        input_len_mean=stat("input_sequence_length", "avg"), input_len_std=stat("input_sequence_length", "std"),
        output_len_mean=stat("output_sequence_length", "avg"),
        output_len_std=stat("output_sequence_length", "std"),
        ttft_ns_p50=ms("time_to_first_token", "p50"), ttft_ns_p99=ms("time_to_first_token", "p99"),
        tpot_ns_p50=ms("inter_token_latency", "p50"), tpot_ns_p99=ms("inter_token_latency", "p99"),
        tpot_ns_mean=ms("inter_token_latency", "avg"), itl_ns_p50=None, itl_ns_p99=None,
        e2e_ns_p50=ms("request_latency", "p50"), e2e_ns_p99=ms("request_latency", "p99"),
        e2e_ns_mean=ms("request_latency", "avg"),
        throughput_requests_per_s=stat("request_throughput", "avg"),
        output_tokens_per_s=stat("output_token_throughput", "avg"),
        duration_ns=None if duration is None else int(round(duration * 1e9)),
        notes=notes, model=model_name(args), failed_requests=int(errors) if errors is not None else 0,
    )
