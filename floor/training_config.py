"""Validation of `phase = "training"` configs and their 5D layout (a ConfigError names the field)."""

from __future__ import annotations

from .deployment import PEAK_KINDS, DeploymentConfig
from .errors import ConfigError
from .flash import KERNELS
from .parallel import TrainLayout, build_layout

RECOMPUTE = ("none", "selective", "full")
OPTIMIZERS = ("adam", "sgd")
GRAD_DTYPES = {"fp32": 4.0, "bf16": 2.0}
#: ZeRO stages: 0 replicated, 1 optimizer states sharded, 2 + gradients, 3 + weights (FSDP full sharding).
ZERO_STAGES = (0, 1, 2, 3)
#: Communication a framework hides behind compute (comma-separated in `comm_overlap`):
#: pp  - pipeline sends run asynchronously (Llama 3 section 3.3.2; DualPipe);
#: ep  - expert all-to-alls overlap the paired micro-batch's compute (DualPipe, DeepSeek-V3 section 3.2.1);
#: ep_shared - all-to-alls overlap the shared experts' compute only (DeepSeek-V2 section 3.1.3);
#: tp  - tensor-parallel collectives overlap the adjacent GEMMs (Megatron-Core --tp-comm-overlap).
OVERLAPS = ("pp", "ep", "ep_shared", "tp")
#: GEMM dtypes a training config may compute in (weight_dtype): 16-bit, or FP8 GEMMs (DeepSeek-V3 section 3.3).
TRAIN_GEMM_DTYPES = ("bf16", "fp8")


def overlaps(cfg: DeploymentConfig) -> frozenset[str]:
    """The collectives the config hides behind compute (`comm_overlap`)."""
    return frozenset(x.strip() for x in cfg.comm_overlap.split(",") if x.strip())


def train_layout(cfg: DeploymentConfig) -> TrainLayout:
    """The validated 5D layout of a training config."""
    m = cfg.model
    return build_layout(
        cfg.name, n_gpus=cfg.n_gpus, dp=cfg.dp, tp=cfg.tp, sp=cfg.sp, pp=cfg.pp, ep=cfg.ep,
        pp_interleave=cfg.pp_interleave, micro_batch=cfg.micro_batch, global_batch=cfg.batch,
        n_layers=m.n_layers, n_heads=m.n_heads, n_experts=m.n_routed_experts, seq_len=cfg.context_tokens,
        gpus_per_node=cfg.hardware.gpus_per_node, first_layers=cfg.pp_first_layers, last_layers=cfg.pp_last_layers,
        schedule=cfg.pipeline_schedule,
    )


def validate_training(cfg: DeploymentConfig) -> None:
    """Raise ConfigError for a training config the model cannot evaluate."""
    unknown = sorted(overlaps(cfg) - set(OVERLAPS))
    checks = [
        ("recompute", cfg.recompute in RECOMPUTE, f"'{cfg.recompute}' unknown; use one of: {', '.join(RECOMPUTE)}"),
        ("attention_kernel", cfg.attention_kernel in KERNELS,
         f"'{cfg.attention_kernel}' unknown; use one of: {', '.join(KERNELS)}"),
        ("optimizer", cfg.optimizer in OPTIMIZERS, f"'{cfg.optimizer}' unknown; use one of: {', '.join(OPTIMIZERS)}"),
        ("zero", cfg.zero in ZERO_STAGES, f"{cfg.zero} unsupported; use a ZeRO stage 0-3 (3 = FSDP full sharding)"),
        ("grad_dtype", cfg.grad_dtype in GRAD_DTYPES,
         f"'{cfg.grad_dtype}' unknown; use one of: {', '.join(GRAD_DTYPES)}"),
        ("capacity_factor", cfg.capacity_factor >= 1.0, f"{cfg.capacity_factor} must be >= 1.0"),
        ("weight_dtype", cfg.weight_dtype in TRAIN_GEMM_DTYPES,
         f"'{cfg.weight_dtype}': training GEMMs run in bf16 or fp8; use one of: {', '.join(TRAIN_GEMM_DTYPES)}"),
        ("dp_attention", cfg.dp_attention == 1, "training configs use dp and sp instead; set dp_attention=1"),
        ("context_tokens", cfg.context_tokens >= 1, f"{cfg.context_tokens} must be >= 1"),
        ("peaks", cfg.peaks in PEAK_KINDS, f"'{cfg.peaks}' unknown; use one of: {', '.join(PEAK_KINDS)}"),
        ("comm_overlap", not unknown, f"{', '.join(unknown)} unknown; use a comma-separated subset of: "
                                      f"{', '.join(OVERLAPS)}"),
        ("mtp_depth", cfg.mtp_depth >= 0, f"{cfg.mtp_depth} must be >= 0"),
        ("sequence_parallel", not cfg.sequence_parallel or cfg.tp > 1,
         "Megatron sequence parallelism shards along tensor parallelism; it needs tp > 1"),
    ]
    for field, ok, message in checks:
        if not ok:
            raise ConfigError(f"{cfg.name}: {field}: {message}")
    train_layout(cfg)
