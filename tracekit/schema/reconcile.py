"""The reconcile document ``tracekit.reconcile/v1`` as msgspec Structs (docs/reconcile.md, "JSON:
tracekit.reconcile/v1", key for key).

Field order is the JSON key order. ``Number`` keeps an integer an integer and a float a float, as the document
has them (a benchmark tool may write either); ``tracekit.report.reconcile`` and the plot read these.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tracekit.schema.report import FrontierPoint, Number, ResourceNs, Wall, _Strict
from tracekit.schema.verdict import Verdict

RECONCILE_SCHEMA = "tracekit.reconcile/v1"


class ReconcileConfig(_Strict, kw_only=True):
    name: str
    overrides: dict[str, str]
    threshold: float
    below_floor_tolerance: float
    steady_state_factor: int


class Source(_Strict, kw_only=True):
    path: str
    index: int
    tool: str
    tool_version_checked: str
    label: str


class Benchmark(_Strict, kw_only=True):
    """``tracekit.compare.benchresults.BenchResult`` as ``to_dict`` writes it (a closed loop's rate is "inf")."""

    path: str
    index: int
    tool: str
    tool_version_checked: str
    label: str
    request_rate_per_s: Number | Literal["inf"] | None
    max_concurrency: int | None
    concurrency_reported: Number | None
    num_requests: int | None
    input_len_mean: Number | None
    input_len_std: Number | None
    output_len_mean: Number | None
    output_len_std: Number | None
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
    throughput_requests_per_s: Number | None
    output_tokens_per_s: Number | None
    duration_ns: int | None
    notes: list[str]
    model: str | None
    failed_requests: int | None
    itl_ns_mean: int | None


class Rule(_Strict, kw_only=True):
    rule: str
    status: Literal["ok", "broken", "unknown"]
    detail: str


class RunPoint(_Strict, omit_defaults=True, kw_only=True):
    """The run's operating point; ``batch``, ``effective`` and ``latency_source`` only where the config could
    be set at it."""

    concurrency: Number | None
    concurrency_source: str
    concurrency_detail: str
    context_tokens: int | None
    batch: int | None = None
    effective: dict[str, Any] | None = None
    latency_source: Literal["tpot", "itl"] | None = None


class ModelCheck(_Strict, kw_only=True):
    recorded: str | None
    config: str
    matches: bool | None


class RunFloor(_Strict, kw_only=True):
    t_opt_ns: int
    t_sum_ns: int
    binding: str
    resource_ns: ResourceNs
    peak_kind: str
    expected_ns: int
    expected_peak_kind: str
    tokens_per_step: Number
    kv_capacity_requests: int
    tokens_per_s_per_gpu_at_t_opt: Number


class Placement(_Strict, kw_only=True):
    measured_ns: int
    t_opt_ns: Number
    t_sum_ns: Number
    position: float | None
    residual_ratio: float
    threshold: float
    verdict: Verdict
    reason: str


class Tpot(_Strict, kw_only=True):
    p50: Placement | None
    p99: Placement | None


class ClosestWall(_Strict, kw_only=True):
    name: str
    batch: int
    batch_ratio: float
    note: str


class Goodput(_Strict, kw_only=True):
    output_tokens_per_s_per_gpu: Number
    floor_tokens_per_s_per_gpu: Number
    fraction_of_floor: float | None


class Run(_Strict, omit_defaults=True, kw_only=True):
    """One run; ``model`` only where a point was placed (a run without one has no config to compare)."""

    source: Source
    benchmark: Benchmark
    discipline: list[Rule]
    operating_point: RunPoint
    floor: RunFloor | None
    model: ModelCheck | None = None
    tpot: Tpot
    closest_wall: ClosestWall | None
    goodput: Goodput | None
    verdict: Verdict
    reasons: list[str]


class SweepPoint(_Strict, kw_only=True):
    label: str
    path: str
    batch: int
    tpot_ns_p50: int
    tpot_ns_p99: int | None
    t_opt_ns: int
    t_sum_ns: int
    tokens_per_s_per_gpu: Number
    floor_tokens_per_s_per_gpu: Number


class Sweep(_Strict, kw_only=True):
    context_tokens: int
    kv_capacity_requests: int
    walls: list[Wall]
    frontier: list[FrontierPoint]
    points: list[SweepPoint]


class Reconcile(_Strict, kw_only=True):
    """Benchmark runs against the floor: ``tracekit reconcile --format json`` is this document."""

    schema: Literal["tracekit.reconcile/v1"] = RECONCILE_SCHEMA
    config: ReconcileConfig
    results: list[Run]
    sweep: Sweep | None
    plot: str | None


def typed_reconcile(doc: dict[str, Any]) -> Reconcile:
    """The reconcile document as its typed contract (the one conversion); an unknown key or a value of another
    type is a loud ``msgspec.ValidationError``."""
    return msgspec.convert(doc, Reconcile)


def typed_sweep(section: dict[str, Any]) -> Sweep:
    """The ``sweep`` section alone (``tracekit reconcile --plot`` draws one before the document is done)."""
    return msgspec.convert(section, Sweep)
