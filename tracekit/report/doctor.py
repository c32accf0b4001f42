"""The `tracekit doctor` document: each finding of the capture's health check with its fix."""

from __future__ import annotations

import polars as pl

from tracekit.analysis.doctor import Health
from tracekit.report.document import Document, Table

DOCTOR_SCHEMA = "tracekit.doctor/v1"


def doctor_document(health: Health, inputs: list[str]) -> Document:
    """Findings most severe first; the fixes are also blocks to copy (one per finding that has any)."""
    frame = pl.DataFrame([{"severity": f.severity, "kind": f.kind, "finding": f.text, "fix": "; ".join(f.fix)}
                          for f in health.findings],
                         schema={"severity": pl.String, "kind": pl.String, "finding": pl.String, "fix": pl.String})
    counts = {s: sum(f.severity == s for f in health.findings) for s in ("unsupported", "blocking", "warning")}
    head = ("healthy: nothing limits what an analysis can conclude" if not any(counts.values()) else
            ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    notes = [f"written by: {health.writer}", f"findings: {head}"]
    blocks = [(f"fix: {f.kind} ({health.writer})", "\n".join(f.fix)) for f in health.findings if f.fix]
    return Document("tracekit doctor", [Table("findings", frame, note="unsupported: tracekit cannot read the "
                                              "capture; blocking: the verdict will be inconclusive")],
                    notes, data={"schema": DOCTOR_SCHEMA, "inputs": inputs, **health.section()}, blocks=blocks)
