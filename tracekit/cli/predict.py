"""`tracekit predict`: two figures for the step of a training or inference config: the estimate (what a tuned
stack usually reaches; not a bound) and the floor t_opt of the same step on physical peaks (a bound), with their
ratio, the breakdown by class and resource, and for training the layout and memory per GPU."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.cli.common import output_options, parse_sets


@click.command("predict")
@click.option("--config", required=True, help="Named config (see `tracekit configs`) or a TOML file.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override any config field, e.g. --set micro_batch=16 (repeatable).")
@output_options
def predict_cmd(config: str, sets: tuple[str, ...], fmt: str, out_path: Path | None) -> None:
    """Estimated step time (not a bound) beside the floor t_opt of the same step (a bound), by class and
    resource; training configs add the layout and memory per GPU with feasibility."""
    from tracekit.budgets.configs import load_config
    from tracekit.report.predict import analysis_class, inference_document, training_document
    from tracekit.report.render import emit

    cfg = load_config(config, parse_sets(sets))
    classes = analysis_class()
    doc = training_document(cfg, classes) if cfg.phase == "training" else inference_document(cfg, classes)
    emit(doc, fmt, out_path)
