"""`tracekit predict`: step time of a training or inference config, by class and resource, with the layout
and (training) memory per GPU and feasibility."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.common import output_options
from tracekit.report.document import Document, Table, rows_frame
from tracekit.report.render import emit


def _analysis_class(config: str) -> dict[str, str]:
    """Floor part -> the first analysis class whose budget includes it (budgets/classes.toml [floor])."""
    from tracekit.budgets.classify import load_rules

    out: dict[str, str] = {}
    for cls, parts in load_rules(config).floor_parts.items():
        for part in parts:
            out.setdefault(part, cls)
    return out


def _training_doc(cfg: Any, classes: dict[str, str]) -> Document:
    from tracekit.floor.training import predict_training

    pred = predict_training(cfg)
    lay, mem = pred.layout, pred.memory
    parts = [{"part": p.name, "class": classes.get(p.name, ""), "time_ns": p.time_ns, "exposed_ns": p.exposed_ns,
              "bound": p.bound, "compute_ns": p.compute_ns, "hbm_ns": p.hbm_ns, "onchip_ns": p.onchip_ns,
              "net_ns": p.net_ns, "flops": round(p.flops), "hbm_bytes": round(p.hbm_bytes),
              "net_bytes": round(p.net_bytes)} for p in pred.parts]
    summary = [
        ("step_ns", pred.step_ns), ("micro_batch_ns", pred.micro_batch_ns), ("micro_batches", lay.micro_batches),
        ("bubble_ns", pred.bubble_ns), ("grad_comm_ns", pred.grad_comm_ns),
        ("grad_exposed_ns", pred.grad_exposed_ns), ("optimizer_ns", pred.optimizer_ns),
        ("tokens_per_step", pred.tokens_per_step), ("tokens_per_s_per_gpu", round(pred.tokens_per_s_per_gpu, 1)),
        ("model_tflops_per_gpu", round(pred.model_flops_per_s_per_gpu / 1e12, 2)), ("mfu", round(pred.mfu, 4)),
        ("peaks", cfg.peaks),
    ]
    layout = [("n_gpus", lay.n_gpus), ("dp", lay.dp), ("tp", lay.tp), ("sp", lay.sp), ("pp", lay.pp),
              ("ep", lay.ep), ("edp", lay.edp), ("pp_interleave", lay.pp_interleave),
              ("micro_batch", lay.micro_batch), ("global_batch", lay.global_batch)]
    memory = [(k, v) for k, v in mem.to_dict().items()]
    kv = lambda rows: rows_frame([{"key": k, "value": v} for k, v in rows])  # noqa: E731
    notes = [] if mem.feasible else [f"does not fit: {mem.total / 1e9:.1f} GB per GPU of {mem.capacity / 1e9:.0f} GB"]
    return Document(
        f"tracekit predict: {cfg.name} (training step)",
        [Table("step", kv(summary)),
         Table("by class and resource", rows_frame(parts), note="per GPU per optimizer step; times in ns"),
         Table("layout", kv(layout)), Table("memory per GPU", kv(memory), note="bytes on the fullest GPU")],
        notes=notes, data=pred.to_dict(),
    )


def _inference_doc(cfg: Any, classes: dict[str, str]) -> Document:
    from tracekit.floor import compute_floor

    result = compute_floor(cfg)
    parts = [{"part": p.name, "class": classes.get(p.name, ""), "floor_ns": p.floor_ns, "compute_ns": p.compute_ns,
              "hbm_ns": p.hbm_ns, "net_ns": p.net_ns, "flops": p.flops, "hbm_bytes": p.hbm_bytes,
              "net_bytes": p.net_bytes} for p in result.parts]
    summary = [("t_opt_ns", result.t_opt_ns), ("t_sum_ns", result.t_sum_ns), ("binding", result.binding),
               ("peak_kind", result.peak_kind), ("expected_ns", result.expected_ns),
               ("tokens_per_s_per_gpu_at_t_opt", round(result.tokens_per_s_per_gpu(), 1)),
               ("layout", f"tp={cfg.tp} dp_attention={cfg.dp_attention} ep={cfg.ep} n_gpus={cfg.n_gpus}"),
               ("weight_bytes_per_gpu", int(cfg.weight_bytes_per_gpu)),
               ("kv_capacity_requests", result.kv_capacity_requests),
               ("feasible", cfg.batch <= result.kv_capacity_requests)]
    return Document(
        f"tracekit predict: {cfg.name} ({cfg.phase} step)",
        [Table("step", rows_frame([{"key": k, "value": v} for k, v in summary])),
         Table("by class and resource", rows_frame(parts), note="per GPU per step; times in ns")],
        notes=result.notes, data=result.to_dict(),
    )


@click.command("predict")
@click.option("--config", required=True, help="Named config (see `tracekit configs`) or a TOML file.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override any config field, e.g. --set micro_batch=16 (repeatable).")
@output_options
def predict_cmd(config: str, sets: tuple[str, ...], fmt: str, out_path: Path | None) -> None:
    """Predicted step time (training or inference) by class and resource, layout, memory and feasibility."""
    from tracekit.budgets.configs import load_config
    from tracekit.cli.common import parse_sets

    cfg = load_config(config, parse_sets(sets))
    classes = _analysis_class(config)
    doc = _training_doc(cfg, classes) if cfg.phase == "training" else _inference_doc(cfg, classes)
    emit(doc, fmt, out_path)
