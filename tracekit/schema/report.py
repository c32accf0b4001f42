"""The analysis report ``tracekit.report/v2`` as msgspec Structs (docs/report-schema.md, key for key).

Field order is the JSON key order. ``Number`` marks a figure that may be an integer or a float in JSON (a
config's value, a catalog figure): msgspec would otherwise turn an integer into a float and change the
document. All times are integer nanoseconds.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tracekit.schema.verdict import Verdict

REPORT_SCHEMA = "tracekit.report/v2"  # v2: gap causes launch_call + host_code, exposed_comm of the median step

Number = int | float
StepSource = Literal["regex", "engine_annotation", "profiler_step", "xla_module", "graph_launch", "whole_capture"]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every section: an unknown key is an error, not silently dropped."""


class _Named(_Strict, kw_only=True):
    """A section whose fields are a fixed set of named figures (causes, resources), iterable in order."""

    def items(self) -> list[tuple[str, int]]:
        return [(name, getattr(self, name)) for name in self.__struct_fields__]

    def values(self) -> list[int]:
        return [getattr(self, name) for name in self.__struct_fields__]


class Input(_Strict, kw_only=True):
    rank: int
    ranks: list[int]
    path: str
    format: str
    gpus: list[str] | None = None  # null only in a report written before v2 recorded them
    role: Literal["trace", "graph_capture"] = "trace"


class ReportConfig(_Strict, kw_only=True):
    name: str | None
    overrides: dict[str, str]
    effective: dict[str, Any]
    threshold: float
    min_excess_fraction: float
    step_regex: str | None
    skip_steps: int


class OutsideWait(_Strict, kw_only=True):
    rank: int
    device: int
    step: str | None
    kind: Literal["blocking_call", "launched_waiting"]
    api_call: str | None
    start_ns: int
    step_offset_ns: int
    dur_ns: int
    call_dur_ns: int | None


class Steps(_Strict, kw_only=True):
    count: int
    incomplete: int
    source: list[StepSource]
    outside_waits: list[OutsideWait]
    step_ns_p50: int
    step_ns_p99: int
    capture_only: bool
    count_per_rank: dict[str, int]
    per_rank_p50_ns: dict[str, int]
    slowest_rank: int | None
    straggler_ratio: float | None


class ResourceNs(_Named, kw_only=True):
    hbm: int
    compute: int
    network: int


class Ceiling(_Strict, kw_only=True):
    gpu: str
    resource: str
    dtype: str
    shape: str
    rate_per_s: Number
    fraction_of_peak: float
    source: str
    measured: bool


class FloorSection(_Strict, kw_only=True):
    hardware: str
    t_opt_ns: int
    t_sum_ns: int
    binding: str
    resource_ns: ResourceNs
    latency_chain_ns: int
    peak_kind: str
    expected_ns: int
    expected_peak_kind: str
    residual_ratio: float | None
    position: float | None
    attainable_ns: int
    attainable_resource_ns: ResourceNs | None  # null for a training config (no ceilings applied)
    attainable_ceilings: list[Ceiling] | None
    attainable_ratio: float | None
    stop_rule_floor: Literal["attainable", "physical"]
    beats_ceiling: bool | None


class FitGpu(_Strict, kw_only=True):
    names: list[str]
    vendor: str | None
    sm_count: int | None
    memory_bytes: int | None
    compute: str | None
    identified_as: str | None
    evidence: Literal["name", "properties"] | None


class FitOperatingPoint(_Strict, kw_only=True):
    phase: str
    batch: int | None
    context: int | None
    source: str
    detail: str | None
    prefill_requests: int | None
    prefill_tokens: int | None


class Fit(_Strict, kw_only=True):
    gpu: FitGpu
    world_size: int | None
    operating_point: FitOperatingPoint | None
    overrides: dict[str, str]
    reasons: list[str]
    notes: list[str]


class GapCauses(_Named, kw_only=True):
    launch_call: int
    host_code: int
    sync: int
    dependency: int
    host_idle: int


class GapHost(_Strict, kw_only=True):
    range: str | None
    api_call: str | None


class GapFinding(_Strict, omit_defaults=True, kw_only=True):
    rank: int
    device: int
    next_kernel: str | None
    occurrences: int
    total_ns: int
    step: str
    start_ns: int
    step_offset_ns: int
    dur_ns: int
    by_cause: GapCauses
    cause: str
    host: GapHost | None = None  # absent where the gap's next operation has no launching thread


class LongestBeforeFirst(_Strict, omit_defaults=True, kw_only=True):
    step: str | None
    dur_ns: int
    host: GapHost | None = None  # absent where the first operation has no launching thread


class BeforeFirstKernel(_Strict, kw_only=True):
    ns: int
    fraction: float
    by_cause: GapCauses
    longest: LongestBeforeFirst | None


class HostGaps(_Strict, kw_only=True):
    statistic: Literal["median over steps"]
    total_ns: int
    fraction: float
    by_cause: GapCauses
    before_first_kernel: BeforeFirstKernel
    top: list[GapFinding]


class MedianStep(_Strict, kw_only=True):
    rank: int
    device: int
    label: str
    dur_ns: int


class CollectiveComm(_Strict, kw_only=True):
    comm_ns: int
    exposed_ns: int


class AllSteps(_Strict, kw_only=True):
    steps: int
    comm_ns: int
    exposed_ns: int
    overlap_fraction: float | None


class ExposedComm(_Strict, kw_only=True):
    statistic: Literal["the median step"]
    step: MedianStep | None
    comm_ns: int
    exposed_ns: int
    fraction: float
    overlap_fraction: float | None
    exposed_under_memops_ns: int
    overlap_fraction_incl_memops: float | None
    concurrent_ns: int
    by_collective: dict[str, CollectiveComm]
    all_steps: AllSteps
    wait_ns: int | None
    transfer_ns: int | None


class Instances(_Strict, kw_only=True):
    matched: int
    unmatched: int
    ambiguous: int
    inconsistent: int


class Clock(_Strict, kw_only=True):
    rank: int
    ranks: list[int]
    host: str | None
    offset_ns: int
    residual_ns: int | None
    collectives: int
    estimated: bool
    excluded: bool
    note: str | None


class Host(_Strict, kw_only=True):
    host: str
    ranks: list[int]
    offset_ns: int
    spread_ns: int


class RankRow(_Strict, kw_only=True):
    rank: int
    device: int
    host: str | None
    offset_ns: int
    collectives: int
    wait_ns: int
    transfer_ns: int
    waited_for_ns: int
    last_in: int
    step_start_late_ns: int | None


class Contribution(_Strict, kw_only=True):
    kind: str
    detail: str | None
    excess_ns: int


class StragglerCause(_Strict, kw_only=True):
    kind: Literal["late_step_start", "late_window_start", "host_gap", "kernel_class"] | None
    detail: str | None
    excess_ns: int
    text: str
    contributions: list[Contribution]


class Straggler(_Strict, kw_only=True):
    rank: int
    device: int
    waited_for_ns: int
    share: float
    instances: int
    late_ns: int
    cause: StragglerCause


class StepWait(_Strict, kw_only=True):
    step: str
    rank: int
    device: int
    waited_for_ns: int
    wait_ns: int


class NetworkRow(_Strict, kw_only=True):
    collective: str
    ranks: int
    instances: int
    size_bytes: int
    transfer_ns: int
    busbw_bytes_per_s: float
    catalog_busbw_bytes_per_s: Number | None
    budget_ns: int | None
    transfer_over_budget: float | None


class Ranks(_Strict, kw_only=True):
    participants: int
    devices_per_rank: int
    instances: Instances
    methods: list[Literal["seq", "order"]]
    name_sources: dict[str, int]
    unmatched_records: int
    clocks: list[Clock]
    hosts: list[Host]
    wait_ns: int
    transfer_ns: int
    per_rank: list[RankRow]
    straggler: Straggler | None
    per_step: list[StepWait]
    network: list[NetworkRow]
    network_gpu: str | None
    reasons: list[str]


class ClassKernel(_Strict, kw_only=True):
    name: str
    per_step_ns: int


class ClassRow(_Strict, kw_only=True):
    name: str
    communication: bool
    measured_ns: int
    attributed_ns: int
    budget_ns: int | None
    ratio: float | None
    excess_ns: int
    over_budget: bool
    attainable_budget_ns: int | None
    attainable_ratio: float | None
    kernels: list[ClassKernel]


class TopModule(_Strict, kw_only=True):
    module: str
    ns: int
    kernels: int


class Graphs(_Strict, kw_only=True):
    captures: list[str]
    replayed_kernels: int
    replayed_ns: int
    attributed_kernels: int
    attributed_ns: int
    attributed_fraction: float
    top_modules: list[TopModule]
    how_to_attribute: list[str]


class KernelRow(_Strict, kw_only=True):
    name: str
    cls: str = msgspec.field(name="class")
    launches: int
    total_ns: int
    mean_ns: int
    per_step_ns: int


class Samples(_Strict, kw_only=True):
    """Per complete step, in (rank, device, step) order, as columns (what diff's noise test resamples)."""

    step_ns: list[int]
    host_gap_ns: list[int]
    exposed_comm_ns: list[int]
    class_ns: dict[str, list[int]]
    thinned: bool


class Target(_Strict, kw_only=True):
    kernel: str
    cls: str = msgspec.field(name="class")
    excess_ns: int
    tool: Literal["ncu", "rocprofv3"]
    launch_skip: int
    in_graph: bool
    function: str
    command: str


class MinInstance(_Strict, kw_only=True):
    ratio: float | None
    op: str | None
    shapes: str | None
    measured_ns: Number | None
    t_opt_ns: Number | None


class Unmodelled(_Strict, kw_only=True):
    op: str | None
    measured_ns: Number


class OpClass(_Strict, kw_only=True):
    measured_ns: Number
    t_opt_ns: Number | None
    ratio: float | None


class OpRow(_Strict, kw_only=True):
    op: str | None
    family: str | None
    shapes: str | None
    cls: str | None = msgspec.field(name="class")
    instances_per_step: Number | None
    measured_ns: Number
    t_opt_ns: Number | None
    ratio: float | None
    min_instance_ratio: float | None
    flops: Number | None
    hbm_bytes: Number | None
    floor_model: str | None


class OpFloor(_Strict, kw_only=True):
    """The kernels that ran against their ops' floors (docs/op-floor.md)."""

    hardware: str | None
    peak_kind: str
    t_opt_ns: Number
    binding: str | None
    attainable_ns: Number | None
    attainable_ratio: float | None
    stop_rule_floor: str | None
    stream_ns: Number
    compute_ns: Number
    memory_ns: Number
    sum_ns: Number
    t_sum_ns: Number
    residual_ratio: float | None
    position: float | None
    covered_fraction: float | None
    covered_launched_fraction: float | None
    unattributed_ns: Number | None
    tight_fraction: float | None
    min_instance_ratio: MinInstance | None
    unmodelled: list[Unmodelled]
    classes: dict[str, OpClass]
    ops: list[OpRow]
    steps: int


class InflationClass(_Strict, kw_only=True):
    op_floor_ns: Number | None
    model_budget_ns: Number | None
    ratio: float | None


class InflationFinding(_Strict, kw_only=True):
    kind: str
    ops: list[str]
    measured_ns: Number
    t_opt_ns: Number | None
    step_fraction: float | None
    intermediate_bytes: Number | None
    text: str


class WorkInflation(_Strict, kw_only=True):
    model_t_opt_ns: Number | None
    op_t_opt_ns: Number | None
    ratio: float | None
    by_class: dict[str, InflationClass]
    findings: list[InflationFinding]


class LayerRow(_Strict, kw_only=True):
    layer: int
    measured_ns: Number
    t_opt_ns: Number | None
    ratio: float | None
    vs_siblings: float | None


class ModuleType(_Strict, kw_only=True):
    module: str
    instances_per_step: Number
    measured_ns: Number
    t_opt_ns: Number | None
    ratio: float | None


class Layers(_Strict, kw_only=True):
    block: str | None
    count: int
    parent: str | None
    layers: list[LayerRow]
    module_types: list[ModuleType]
    outliers: list[str]


class ShapeAttention(_Strict, kw_only=True):
    op: str | None
    kind: str | None
    batch: int | None
    query_len: int | None
    key_len: int | None
    gpu_ns: Number | None
    share_of_attention_with_shapes: float | None
    share_of_attn_core: float | None
    part: str | None


class ModelShape(_Strict, kw_only=True):
    hidden: int | None
    intermediate: int | None
    vocab: int | None
    experts: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    layers: int | None
    block: str | None
    dtype: str | None
    mlp_matrices: int | None
    attention: ShapeAttention | None
    evidence: dict[str, str]


class Wall(_Strict, kw_only=True):
    name: str
    batch: int | None
    reachable: bool
    t_opt_ns: int | None
    note: str


class FrontierPoint(_Strict, kw_only=True):
    batch: int
    t_opt_ns: int
    t_sum_ns: int
    tokens_per_s_per_gpu: float
    binding: str


class Walls(_Strict, kw_only=True):
    """The config's walls as concurrency grows (``tracekit walls``'s document without its targets), which the
    HTML page and the plots draw; it reads as the floor's ``WallsResult`` where they do."""

    config: str
    peak_kind: str
    kv_capacity_requests: int
    ordering: list[str]
    walls: list[Wall]
    frontier: list[FrontierPoint]

    @property
    def slo(self) -> None:  # the report's walls have no targets (no --tpot-slo, no --vs)
        return None

    @property
    def crossover(self) -> None:
        return None


class Report(_Strict, kw_only=True):
    """One analysis: ``tracekit analyze --format json`` is this document."""

    schema: Literal["tracekit.report/v2"] = REPORT_SCHEMA
    inputs: list[Input]
    config: ReportConfig
    steps: Steps
    floor: FloorSection | None
    floor_used: Literal["model", "op"] | None
    op_floor: OpFloor | None
    work_inflation: WorkInflation | None
    layers: Layers | None
    model_shape: ModelShape | None
    fit: Fit | None
    host_gaps: HostGaps
    exposed_comm: ExposedComm
    ranks: Ranks | None
    graphs: Graphs | None
    classes: list[ClassRow]
    kernels: list[KernelRow] = msgspec.field(default_factory=list)  # absent in a report written before it was
    samples: Samples | None = None  # absent in a report written before it was (diff then tests one sample)
    ncu_targets: list[Target]
    verdict: Verdict
    reasons: list[str]
    caveats: list[str]
    walls: Walls | None = None  # null without a config or for a training config; absent in older reports


def typed_report(doc: dict[str, Any]) -> Report:
    """The assembled report as its typed contract (the one conversion); a key the contract lacks (a new
    section without its field here) or a value of another type is a loud ``msgspec.ValidationError``."""
    return msgspec.convert(doc, Report)
