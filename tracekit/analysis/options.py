"""What a user can ask of an analysis, and the names and numbers its verdict is stated in: each defined once."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.floor import NEAR_FLOOR_THRESHOLD
from tracekit.schema.report import REPORT_SCHEMA
from tracekit.schema.verdict import Verdict

__all__ = ["GATE_EXIT", "MIN_GAP_FINDING_NS", "REPORT_SCHEMA", "AnalyzeOptions", "Verdict"]

MIN_GAP_FINDING_NS = 1_000  # gap findings costing less in all (launch latency between kernels) are not listed
#: The verdicts, each with its `--gate` exit status.
GATE_EXIT = {Verdict.NEAR_FLOOR: 0, Verdict.PIPELINE: 10, Verdict.KERNEL: 11, Verdict.INCONCLUSIVE: 12}


@dataclass
class AnalyzeOptions:
    """What the user asked for; every threshold is reported back in the report."""

    config: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    step_regex: str | None = None
    skip_steps: int = 0
    threshold: float = NEAR_FLOOR_THRESHOLD
    min_excess_fraction: float = 0.02
    pipeline_share: float = 0.5
    top_gaps: int = 5
    max_targets: int = 5
    batch_rows: int = 500_000  # operations read at once (a batch of steps); bounds memory, not the report
