"""The `tracekit predict` document: the estimate beside the floor t_opt of the same step, by class and
resource; for training, the layout and memory per GPU."""

from __future__ import annotations

from typing import Any

from tracekit.report.document import Document, Table, rows_frame

ESTIMATE_NOTE = ("estimate_ns is an estimate of the step, not a bound: a real step can be faster or slower. "
                 "floor_t_opt_ns is the bound: no step of this config on this hardware is faster.")
STEP_NOTE = "estimate_ns: an estimate, not a bound; floor_t_opt_ns: the floor (physical peaks), a bound"


def analysis_class() -> dict[str, str]:
    """Floor part -> the first analysis class whose budget includes it (budgets/classes.toml [floor])."""
    from tracekit.budgets.classify import load_rules

    out: dict[str, str] = {}
    for cls, parts in load_rules().floor_parts.items():
        for part in parts:
            out.setdefault(part, cls)
    return out


def _figures(estimate_ns: int, estimate_peaks: str, floor: Any) -> dict[str, Any]:
    """The two figures every predict report carries, with their ratio and which peaks each used (the floor's are
    always the physical ones: docs/floor.md, "Peaks")."""
    return {"estimate_ns": estimate_ns, "estimate_peak_kind": estimate_peaks, "floor_t_opt_ns": floor.t_opt_ns,
            "peak_kind": floor.peak_kind, "estimate_over_floor": round(estimate_ns / max(floor.t_opt_ns, 1), 4)}


def _kv(rows: list[tuple[str, Any]]) -> Any:
    return rows_frame([{"key": k, "value": v} for k, v in rows])


def training_document(cfg: Any, classes: dict[str, str]) -> Document:
    from tracekit.floor import compute_floor
    from tracekit.floor.training import predict_training

    pred = predict_training(cfg)
    floor = compute_floor(cfg)
    figures = _figures(pred.step_ns, cfg.peaks, floor)
    lay, mem = pred.layout, pred.memory
    parts = [{"part": p.name, "class": classes.get(p.name, ""), "time_ns": p.time_ns, "exposed_ns": p.exposed_ns,
              "bound": p.bound, "compute_ns": p.compute_ns, "hbm_ns": p.hbm_ns, "onchip_ns": p.onchip_ns,
              "net_ns": p.net_ns, "flops": round(p.flops), "hbm_bytes": round(p.hbm_bytes),
              "net_bytes": round(p.net_bytes)} for p in pred.parts]
    summary = [
        *figures.items(), ("floor_binding", floor.binding),
        ("micro_batch_ns", pred.micro_batch_ns), ("micro_batches", lay.micro_batches),
        ("critical_stage", pred.critical_stage), ("bubble_ns", pred.bubble_ns), ("grad_comm_ns", pred.grad_comm_ns),
        ("grad_exposed_ns", pred.grad_exposed_ns), ("optimizer_ns", pred.optimizer_ns),
        ("tokens_per_step", pred.tokens_per_step), ("tokens_per_s_per_gpu", round(pred.tokens_per_s_per_gpu, 1)),
        ("model_tflops_per_gpu", round(pred.model_flops_per_s_per_gpu / 1e12, 2)), ("mfu", round(pred.mfu, 4)),
    ]
    layout = [("n_gpus", lay.n_gpus), ("dp", lay.dp), ("tp", lay.tp), ("cp", lay.sp), ("pp", lay.pp),
              ("ep", lay.ep), ("edp", lay.edp), ("pp_interleave", lay.pp_interleave),
              ("stage_layers", " ".join(map(str, lay.stage_layers()))), ("schedule", lay.schedule),
              ("micro_batch", lay.micro_batch), ("global_batch", lay.global_batch)]
    memory = [(k, v) for k, v in mem.to_dict().items() if k != "items"] + list(mem.items)
    return Document(
        f"tracekit predict: {cfg.name} (training step)",
        [Table("step", _kv(summary), note=STEP_NOTE),
         Table("by class and resource", rows_frame(parts),
               note=f"the estimate on the critical stage, per GPU per optimizer step, at {cfg.peaks} peaks "
                    "(JSON and CSV: ns)"),
         Table("layout", _kv(layout)),
         Table("memory per GPU", _kv(memory), note=f"bytes on the fullest GPU; {mem.verdict()}")],
        notes=[ESTIMATE_NOTE] + ([] if mem.feasible else [mem.verdict()]),
        data={**figures, **pred.to_dict(), "floor": floor.to_dict()},
    )


def inference_document(cfg: Any, classes: dict[str, str]) -> Document:
    from tracekit.floor import compute_floor

    result = compute_floor(cfg)  # t_opt on physical peaks; expected_ns, the estimate, at the config's peaks
    figures = _figures(result.expected_ns, result.expected_peak_kind, result)
    parts = [{"part": p.name, "class": classes.get(p.name, ""), "floor_ns": p.floor_ns, "compute_ns": p.compute_ns,
              "hbm_ns": p.hbm_ns, "net_ns": p.net_ns, "flops": p.flops, "hbm_bytes": p.hbm_bytes,
              "net_bytes": p.net_bytes} for p in result.parts]
    summary = [*figures.items(), ("t_sum_ns", result.t_sum_ns), ("binding", result.binding),
               ("tokens_per_s_per_gpu_at_t_opt", round(result.tokens_per_s_per_gpu(), 1)),
               ("layout", f"tp={cfg.tp} dp_attention={cfg.dp_attention} ep={cfg.ep} n_gpus={cfg.n_gpus}"),
               ("weight_bytes_per_gpu", int(cfg.weight_bytes_per_gpu)),
               ("kv_capacity_requests", result.kv_capacity_requests),
               ("feasible", cfg.batch <= result.kv_capacity_requests)]
    return Document(
        f"tracekit predict: {cfg.name} ({cfg.phase} step)",
        [Table("step", _kv(summary), note=STEP_NOTE),
         Table("by class and resource", rows_frame(parts),
               note="the floor per GPU per step, physical peaks (JSON and CSV: ns)")],
        notes=[ESTIMATE_NOTE, *result.notes], data={**figures, **result.to_dict()},
    )
