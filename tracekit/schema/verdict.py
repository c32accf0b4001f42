"""The one verdict enumeration, used by the analysis, the comparisons and the renderers alike."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """What the triage concludes (docs/report-schema.md, **Verdict**); the value is the JSON string.

    An analysis ends in near-floor, pipeline, kernel or inconclusive. ABOVE_FLOOR is the floor's placement of a
    measurement alone (``tracekit reconcile``, ``floor --measured``: no trace to split the residual into
    pipeline and kernel time); ``tracekit.floor.place_measured`` names its placements with these strings."""

    NEAR_FLOOR = "near-floor"
    PIPELINE = "pipeline"
    KERNEL = "kernel"
    INCONCLUSIVE = "inconclusive"
    ABOVE_FLOOR = "above-floor"


#: What ``tracekit analyze`` can conclude (ABOVE_FLOOR is for a measurement placed without a trace).
TRIAGE_VERDICTS = (Verdict.NEAR_FLOOR, Verdict.PIPELINE, Verdict.KERNEL, Verdict.INCONCLUSIVE)
