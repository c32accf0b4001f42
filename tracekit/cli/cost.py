"""`tracekit cost`: a GPU's manufacturing cost and the cost per million tokens of a floor config."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.cli.common import config_options, output_options


@click.command("cost")
@config_options(required=True)
@output_options
def cost_cmd(config: str, overrides: dict[str, str], fmt: str, out_path: Path | None) -> None:
    """Manufacturing cost per GPU (dies, yield, HBM, assembly) and cost per million tokens at the floor.

    --set takes floor fields and cost fields alike, e.g. --set yield_model=murphy --set hbm_stacks=6
    --set gpu_cost_usd=25000 --set lifetime_years=4 --set energy_usd_per_kwh=0.12 (see docs/cost.md).
    """
    from tracekit.budgets.configs import config_path
    from tracekit.floor.cost_perf import cost_report
    from tracekit.report.cost import breakdown_rows, sensitivity_rows, token_rows
    from tracekit.report.document import Document, Table, rows_frame
    from tracekit.report.render import emit

    report = cost_report(config_path(config), overrides, resolve=config_path)
    tables = [
        Table("manufacturing cost per GPU", rows_frame(breakdown_rows(report)),
              note="known-good-die cost = wafer cost / (dies per wafer x yield); assembly loss = cost / yield - cost"),
        Table("cost per million tokens (per GPU)", rows_frame(token_rows(report))),
        Table("sensitivity", rows_frame(sensitivity_rows(report)),
              note="floor re-run with one hardware field changed; vs_baseline = cost per token / baseline"),
    ]
    title = f"tracekit cost: {report.config.name} on {report.config.hardware.name}"
    emit(Document(title, tables, notes=report.notes, data=report.to_dict()), fmt, out_path)
