"""`tracekit doctor FILE...`: the capture's health check, each finding with the fix for the engine that
wrote the trace (over tracekit.analysis.doctor). Exit 2 when tracekit cannot read the capture at all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import input_options, output_options

if TYPE_CHECKING:
    from tracekit.store.ingest import Store


@click.command("doctor")
@input_options
@output_options
def doctor_cmd(store: Store, fmt: str, out_path: Path | None) -> None:
    """Check a capture before any number: dropped events, missing shapes or stacks, graphs without node
    tracing or capture trace, late start, step markers, the device, clocks; with the re-capture flags."""
    from tracekit.analysis.analyze import refuse_unsupported_device, refuse_without_gpu_activity
    from tracekit.api.traces import doctor_of  # the API's: tracekit.doctor gives the same document
    from tracekit.report.render import emit

    result = doctor_of(store)
    emit(result.document(), fmt, out_path)
    if result.unsupported:  # after the findings: the one-line error naming the file, exit 2
        refuse_unsupported_device(store)
        refuse_without_gpu_activity(store)
