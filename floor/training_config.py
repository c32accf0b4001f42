"""Validation of `phase = "training"` configs and their 5D layout (a ConfigError names the field)."""

from __future__ import annotations

from .deployment import PEAK_KINDS, DeploymentConfig
from .errors import ConfigError
from .flash import KERNELS
from .parallel import TrainLayout, build_layout

RECOMPUTE = ("none", "selective", "full")
OPTIMIZERS = ("adam", "sgd")
GRAD_DTYPES = {"fp32": 4.0, "bf16": 2.0}


def train_layout(cfg: DeploymentConfig) -> TrainLayout:
    """The validated 5D layout of a training config."""
    m = cfg.model
    return build_layout(
        cfg.name, n_gpus=cfg.n_gpus, dp=cfg.dp, tp=cfg.tp, sp=cfg.sp, pp=cfg.pp, ep=cfg.ep,
        pp_interleave=cfg.pp_interleave, micro_batch=cfg.micro_batch, global_batch=cfg.batch,
        n_layers=m.n_layers, n_heads=m.n_heads, n_experts=m.n_routed_experts, seq_len=cfg.context_tokens,
        gpus_per_node=cfg.hardware.gpus_per_node,
    )


def validate_training(cfg: DeploymentConfig) -> None:
    """Raise ConfigError for a training config the model cannot evaluate."""
    checks = [
        ("recompute", cfg.recompute in RECOMPUTE, f"'{cfg.recompute}' unknown; use one of: {', '.join(RECOMPUTE)}"),
        ("attention_kernel", cfg.attention_kernel in KERNELS,
         f"'{cfg.attention_kernel}' unknown; use one of: {', '.join(KERNELS)}"),
        ("optimizer", cfg.optimizer in OPTIMIZERS, f"'{cfg.optimizer}' unknown; use one of: {', '.join(OPTIMIZERS)}"),
        ("zero", cfg.zero in (0, 1), f"{cfg.zero} unsupported; use 0 (replicated) or 1 (sharded optimizer states)"),
        ("grad_dtype", cfg.grad_dtype in GRAD_DTYPES,
         f"'{cfg.grad_dtype}' unknown; use one of: {', '.join(GRAD_DTYPES)}"),
        ("capacity_factor", cfg.capacity_factor >= 1.0, f"{cfg.capacity_factor} must be >= 1.0"),
        ("weight_dtype", cfg.weight_dtype == "bf16", "training computes in 16-bit; use weight_dtype=bf16"),
        ("dp_attention", cfg.dp_attention == 1, "training configs use dp and sp instead; set dp_attention=1"),
        ("context_tokens", cfg.context_tokens >= 1, f"{cfg.context_tokens} must be >= 1"),
        ("peaks", cfg.peaks in PEAK_KINDS, f"'{cfg.peaks}' unknown; use one of: {', '.join(PEAK_KINDS)}"),
    ]
    for field, ok, message in checks:
        if not ok:
            raise ConfigError(f"{cfg.name}: {field}: {message}")
    train_layout(cfg)
