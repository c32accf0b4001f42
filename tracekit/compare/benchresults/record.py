"""The one typed record every benchmark reader produces: units in the names, ``None`` when the tool did not
report a quantity (never a guessed value)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from tracekit.errors import InputError

CLOSED_LOOP = math.inf  # request_rate_per_s of a closed loop (fixed concurrency, requests sent back to back)


@dataclass
class BenchResult:
    """One benchmark run (one load level) of one tool, normalised.

    ``concurrency_reported`` is the time-averaged number of requests in flight when the tool measures it
    (SGLang ``concurrency``, GuideLLM ``request_concurrency``); ``max_concurrency`` is the configured cap.
    TPOT follows vLLM's definition: (E2E - TTFT) / (output tokens - 1) per request.
    """

    path: str
    index: int
    tool: str
    tool_version_checked: str
    label: str
    request_rate_per_s: float | None
    max_concurrency: int | None
    concurrency_reported: float | None
    num_requests: int | None
    input_len_mean: float | None
    input_len_std: float | None
    output_len_mean: float | None
    output_len_std: float | None
    ttft_ns_p50: int | None
    ttft_ns_p99: int | None
    tpot_ns_p50: int | None
    tpot_ns_p99: int | None
    tpot_ns_mean: int | None
    itl_ns_p50: int | None
    itl_ns_p99: int | None
    e2e_ns_p50: int | None
    e2e_ns_p99: int | None
    e2e_ns_mean: int | None
    throughput_requests_per_s: float | None
    output_tokens_per_s: float | None
    duration_ns: int | None
    notes: list[str] = field(default_factory=list)
    model: str | None = None  # the served model as the tool recorded it (vLLM model_id, GenAI-Perf/AIPerf model)
    failed_requests: int | None = None  # requests that errored (None: the tool does not say)
    itl_ns_mean: int | None = None  # mean gap between consecutive tokens (vLLM and SGLang)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["request_rate_per_s"] is not None and math.isinf(out["request_rate_per_s"]):
            out["request_rate_per_s"] = "inf"  # JSON has no infinity
        return out


def ms_to_ns(value: Any, where: str = "a time in ms") -> int | None:
    """Milliseconds (the tools' unit) -> int ns; None stays None."""
    out = number(value, where)
    return None if out is None else int(round(out * 1e6))


def s_to_ns(value: Any, where: str = "a time in s") -> int | None:
    """Seconds -> int ns; None stays None."""
    out = number(value, where)
    return None if out is None else int(round(out * 1e9))


def number(value: Any, where: str) -> float | None:
    """A finite-or-infinite float from a JSON value ('inf' strings included); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, found {value!r}; is this the tool's result file?")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected a number, found {str(value)[:40]!r}; "
                         "is this the tool's unmodified result file?") from None
    if math.isnan(out):
        raise InputError(f"{where}: value is NaN; the run produced no such measurement")
    return out


def mean_std(values: list[Any], where: str) -> tuple[float | None, float | None]:
    """Population mean and standard deviation of per-request values (numpy's default, as the tools use)."""
    nums = [number(v, where) for v in values]
    clean = [v for v in nums if v is not None]
    if not clean:
        return None, None
    mean = sum(clean) / len(clean)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in clean) / len(clean))


def lengths(doc: dict[str, Any], per_request: str, total: str, completed: int | None,
            where: str) -> tuple[float | None, float | None]:
    """(mean, std) of a length from the per-request list when saved, else (total / completed, None)."""
    values = doc.get(per_request)
    if isinstance(values, list) and values:
        return mean_std(values, f"{where} {per_request}")
    tot = number(doc.get(total), f"{where} {total}")
    if tot is None or not completed:
        return None, None
    return tot / completed, None


def vllm_family_fields(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields vLLM's benchmark_serving.py and SGLang's bench_serving (derived from it) name alike:
    completed requests, lengths, TTFT/TPOT/ITL percentiles in ms, throughputs and duration in s."""

    def ms(key: str) -> int | None:
        return ms_to_ns(doc.get(key), f"{where} {key}")

    completed = doc.get("completed")
    completed_n = int(number(completed, f"{where} completed") or 0) if completed is not None else None
    in_mean, in_std = lengths(doc, "input_lens", "total_input_tokens", completed_n, where)
    out_mean, out_std = lengths(doc, "output_lens", "total_output_tokens", completed_n, where)
    max_conc = doc.get("max_concurrency")
    return {
        "max_concurrency": int(max_conc) if max_conc is not None else None, "num_requests": completed_n,
        "input_len_mean": in_mean, "input_len_std": in_std, "output_len_mean": out_mean, "output_len_std": out_std,
        "ttft_ns_p50": ms("median_ttft_ms"), "ttft_ns_p99": ms("p99_ttft_ms"),
        "tpot_ns_p50": ms("median_tpot_ms"), "tpot_ns_p99": ms("p99_tpot_ms"), "tpot_ns_mean": ms("mean_tpot_ms"),
        "itl_ns_p50": ms("median_itl_ms"), "itl_ns_p99": ms("p99_itl_ms"), "itl_ns_mean": ms("mean_itl_ms"),
        "throughput_requests_per_s": number(doc.get("request_throughput"), f"{where} request_throughput"),
        "output_tokens_per_s": number(doc.get("output_throughput"), f"{where} output_throughput"),
        "duration_ns": s_to_ns(doc.get("duration"), f"{where} duration"),
    }
