"""The diff document ``tracekit.diff/v1`` as msgspec Structs (docs/reconcile.md, "JSON: tracekit.diff/v1", key
for key).

Field order is the JSON key order; ``Number`` keeps an integer an integer (a delta of nanoseconds) and a float a
float (a ratio's), as the document has them. ``tracekit.compare.gate`` and ``tracekit.report.diff`` read these.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tracekit.schema.report import Number, _Strict
from tracekit.schema.verdict import Verdict

DIFF_SCHEMA = "tracekit.diff/v1"

NoiseVerdict = Literal["regression", "improvement", "within noise", "untested"]


class DiffSide(_Strict, omit_defaults=True, kw_only=True):
    path: str
    kind: Literal["report", "trace"]
    config: str | None
    baseline: str | None = None  # BEFORE's baseline name, only with --against baseline:NAME


class Delta(_Strict, kw_only=True):
    """``{before, after, delta (after − before), delta_fraction (delta / before)}``."""

    before: Number | None
    after: Number | None
    delta: Number | None
    delta_fraction: float | None


class Counts(_Strict, kw_only=True):
    before: int
    after: int


class DiffStep(_Strict, kw_only=True):
    p50_ns: Delta
    p99_ns: Delta
    count: Counts
    significant: bool


class Check(_Strict, kw_only=True):
    name: str
    before: Any
    after: Any
    same: bool | None
    blocking: bool
    reason: str | None


class Comparability(_Strict, kw_only=True):
    fraction: float | None
    checks: list[Check]


class Tested(_Strict, kw_only=True):
    """A tested change (``tracekit.compare.noise.Change.section``)."""

    verdict: NoiseVerdict
    delta_ns: int
    low_ns: int | None
    high_ns: int | None
    delta_fraction: float | None
    low_fraction: float | None
    high_fraction: float | None
    samples: list[int]
    confidence: float | None


class TestedClass(Tested, kw_only=True):
    own_fraction: float | None


class Noise(_Strict, kw_only=True):
    method: str
    resamples: int
    practical_threshold: float
    step: Tested
    host_gaps: Tested
    exposed_comm: Tested
    classes: dict[str, TestedClass]
    regressions: list[str]
    improvements: list[str]


class DiffFloor(_Strict, kw_only=True):
    t_opt_ns: Delta
    t_sum_ns: Delta
    residual_ratio: Delta
    position: Delta


class Verdicts(_Strict, kw_only=True):
    before: Verdict
    after: Verdict


class DiffChange(_Strict, kw_only=True):
    component: str
    kind: Literal["host_gap", "class", "exposed_comm"]
    name: str
    before_ns: int
    after_ns: int
    delta_ns: int
    share_of_step_delta: float | None


class DiffClass(_Strict, kw_only=True):
    name: str
    communication: bool
    measured_ns: Delta
    attributed_ns: Delta
    budget_ns: int | None


class StepDelta(_Strict, kw_only=True):
    before: int
    after: int
    delta: int


class MeanChange(_Strict, kw_only=True):
    before: int | None
    after: int | None
    delta_fraction: float | None


class DiffKernel(_Strict, kw_only=True):
    name: str
    cls: str | None = msgspec.field(name="class")
    launches: Counts
    per_step_ns: StepDelta
    mean_ns: MeanChange


class KernelFigure(_Strict, kw_only=True):
    kernels: int
    before_ns: int
    after_ns: int
    delta_fraction: float | None
    coverage: float | None


class DiffGaps(_Strict, kw_only=True):
    total_ns: Delta
    by_cause: dict[str, Delta]


class DiffComm(_Strict, kw_only=True):
    exposed_ns: Delta
    by_collective: dict[str, Delta]


class Gate(_Strict, kw_only=True):
    gate: bool
    fail_if_slower: float | None
    expect_faster: str | None
    exit_status: int
    reasons: list[str]


class Diff(_Strict, kw_only=True):
    """Two analyses compared: ``tracekit diff --format json`` is this document."""

    schema: Literal["tracekit.diff/v1"] = DIFF_SCHEMA
    before: DiffSide
    after: DiffSide
    step: DiffStep
    conclusive: bool
    inconclusive: list[str]
    comparability: Comparability
    gate_basis: Literal["steps", "kernels"] | None
    noise: Noise
    floor: DiffFloor
    verdict: Verdicts
    changes: list[DiffChange]
    classes: list[DiffClass]
    kernels: list[DiffKernel]
    kernel_figure: KernelFigure | None
    host_gaps: DiffGaps
    exposed_comm: DiffComm
    reasons: list[str]
    caveats: list[str]
    gate: Gate | None = None  # absent only before tracekit.compare.gate has judged the diff


def typed_diff(doc: dict[str, Any]) -> Diff:
    """The diff document as its typed contract (the one conversion); an unknown key or a value of another type
    is a loud ``msgspec.ValidationError``."""
    return msgspec.convert(doc, Diff)
