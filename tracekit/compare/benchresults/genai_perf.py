"""NVIDIA GenAI-Perf ``profile_export_genai_perf.json`` (genai_perf/export_data/json_exporter.py).

Each metric is ``{"unit", "avg", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max", "std"}``; times in
ms, ``request_throughput`` and ``output_token_throughput`` carry only ``avg``. The arguments are under
``input_config`` (``concurrency`` for a closed loop, ``request_rate`` for an open one, ``request_count``).
GenAI-Perf's ``inter_token_latency`` is per request (E2E - TTFT) / (output tokens - 1), i.e. vLLM's TPOT,
so it is read as TPOT; the token-to-token ITL distribution is not exported.
"""

from __future__ import annotations

from typing import Any

from tracekit.errors import InputError

from .record import CLOSED_LOOP, BenchResult, ms_to_ns, number

TOOL = "genai-perf"
VERSION_CHECKED = ("triton-inference-server/perf_analyzer genai-perf json_exporter.py @4cc7650c, "
                   "llm_profile_data_parser.py @00168fe7, tests/test_json_exporter.py @00afbedf")


def matches(doc: Any) -> bool:
    """A GenAI-Perf export: metric dicts with ``avg`` plus the ``input_config`` arguments."""
    return (isinstance(doc, dict) and isinstance(doc.get("input_config"), dict)
            and isinstance(doc.get("request_throughput"), dict))


def read(doc: dict[str, Any], path: str, index: int) -> BenchResult:
    where = f"{path} (GenAI-Perf export)"
    args = doc["input_config"]
    notes = ["TPOT is GenAI-Perf's inter_token_latency (per request (E2E - TTFT) / (tokens - 1))"]

    def stat(metric: str, key: str) -> float | None:
        return metric_stat(doc, where, metric, key)

    concurrency, rate = args.get("concurrency"), args.get("request_rate")
    if rate:
        rate_per_s: float | None = number(rate, f"{where} input_config.request_rate")
        label = f"rate {rate}/s"
    elif concurrency:
        rate_per_s = CLOSED_LOOP
        label = f"concurrency {concurrency}"
    else:
        rate_per_s, label = None, "load not recorded"
        notes.append("input_config has neither concurrency nor request_rate")
    count = args.get("request_count")
    if not count:
        notes.append("request_count 0: the run was bounded by a measurement interval; requests not counted")
    return BenchResult(
        path=path, index=index, tool=TOOL, tool_version_checked=VERSION_CHECKED, label=label,
        request_rate_per_s=rate_per_s,
        max_concurrency=int(concurrency) if concurrency else None,
        concurrency_reported=None,
        num_requests=int(count) if count else None,
        input_len_mean=stat("input_sequence_length", "avg"), input_len_std=stat("input_sequence_length", "std"),
        output_len_mean=stat("output_sequence_length", "avg"),
        output_len_std=stat("output_sequence_length", "std"),
        ttft_ns_p50=ms_to_ns(stat("time_to_first_token", "p50")),
        ttft_ns_p99=ms_to_ns(stat("time_to_first_token", "p99")),
        tpot_ns_p50=ms_to_ns(stat("inter_token_latency", "p50")),
        tpot_ns_p99=ms_to_ns(stat("inter_token_latency", "p99")),
        tpot_ns_mean=ms_to_ns(stat("inter_token_latency", "avg")),
        itl_ns_p50=None, itl_ns_p99=None,
        e2e_ns_p50=ms_to_ns(stat("request_latency", "p50")), e2e_ns_p99=ms_to_ns(stat("request_latency", "p99")),
        e2e_ns_mean=ms_to_ns(stat("request_latency", "avg")),
        throughput_requests_per_s=stat("request_throughput", "avg"),
        output_tokens_per_s=stat("output_token_throughput", "avg"),
        duration_ns=None,
        notes=notes,
        model=model_name(args),
    )


def metric_stat(doc: dict[str, Any], where: str, metric: str, key: str) -> float | None:
    """One statistic of a GenAI-Perf-style metric ``{unit, avg, p50, ...}`` (AIPerf keeps the layout); None
    when the metric is absent."""
    entry = doc.get(metric)
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise InputError(f"{where}: {metric} is not a statistics object; is this an unmodified export?")
    return number(entry.get(key), f"{where} {metric}.{key}")


def model_name(args: dict[str, Any]) -> str | None:
    """The served model from the arguments: GenAI-Perf ``model`` (a list), AIPerf ``endpoint.model_names``."""
    names = args.get("model") or (args.get("endpoint") or {}).get("model_names") or args.get("model_names")
    if isinstance(names, list):
        names = names[0] if names else None
    return names if isinstance(names, str) and names else None
