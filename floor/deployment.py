"""One operating point (DeploymentConfig) and its settable fields, their types and defaults.

A leaf beside the catalogs: loading and validation (config.py), the training checks (training_config.py)
and the result types (result.py) all import it, and it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .hardware import GpuSpec
from .layout import Layout, kv_capacity_requests, weight_bytes_per_gpu
from .models import ModelSpec

PHASES = ("decode", "prefill", "training")
#: The peaks of the estimate (`expected_ns`, `predict`'s training step). The floor itself is always physical.
PEAK_KINDS = ("achievable", "physical")

#: settable fields and their TOML/--set types. `model` and `hardware` are catalog keys.
FIELD_TYPES: dict[str, type] = {
    "description": str,
    "model": str,
    "hardware": str,
    "n_gpus": int,
    "tp": int,
    "dp_attention": int,
    "ep": int,
    "weight_dtype": str,
    "expert_weight_dtype": str,
    "kv_format": str,
    "batch": int,
    "context_tokens": int,
    "tokens_per_step": float,
    "prefill_tokens": int,
    "prefill_requests": int,
    "reserve_per_gpu_bytes": int,
    "phase": str,
    "peaks": str,
    # training only (phase = "training"): batch = global batch in sequences, context_tokens = sequence length
    "micro_batch": int,
    "dp": int,
    "pp": int,
    "sp": int,
    "pp_interleave": int,
    "recompute": str,
    "attention_kernel": str,
    "optimizer": str,
    "zero": int,
    "grad_overlap": bool,
    "grad_dtype": str,
    "capacity_factor": float,
    "sequence_parallel": bool,
    "pipeline_schedule": str,
    "comm_overlap": str,
    "pp_first_layers": int,
    "pp_last_layers": int,
    "dropout": bool,
    "mtp_depth": int,
    "moe_route_limit": int,
}
#: fields that only training configs use; settings() shows them for training configs only.
TRAINING_FIELDS = ("micro_batch", "dp", "pp", "sp", "pp_interleave", "recompute", "attention_kernel", "optimizer",
                   "zero", "grad_overlap", "grad_dtype", "capacity_factor", "sequence_parallel", "pipeline_schedule",
                   "comm_overlap", "pp_first_layers", "pp_last_layers", "dropout", "mtp_depth",
                   "moe_route_limit")
#: fields that only serving (decode / prefill) configs use; settings() hides them for training configs.
SERVING_FIELDS = ("tokens_per_step", "prefill_tokens", "prefill_requests")
DEFAULTS: dict[str, Any] = {
    "description": "",
    "dp_attention": 1,
    "ep": 1,
    "weight_dtype": "bf16",
    "expert_weight_dtype": "",
    "kv_format": "bf16",
    "tokens_per_step": 1.0,
    "prefill_tokens": 0,
    "prefill_requests": 0,
    "reserve_per_gpu_bytes": 0,
    "phase": "decode",
    "peaks": "achievable",
    "micro_batch": 1,
    "dp": 0,
    "pp": 1,
    "sp": 1,
    "pp_interleave": 1,
    "recompute": "none",
    "attention_kernel": "fa2",
    "optimizer": "adam",
    "zero": 0,
    "grad_overlap": True,
    "grad_dtype": "fp32",
    "capacity_factor": 1.0,
    "sequence_parallel": False,
    "pipeline_schedule": "1f1b",
    "comm_overlap": "",
    "pp_first_layers": 0,
    "pp_last_layers": 0,
    "dropout": False,
    "mtp_depth": 0,
    "moe_route_limit": 0,
}


@dataclass(frozen=True)
class DeploymentConfig:
    """One operating point: model + hardware + GPU count + layout + precision + load.

    batch counts concurrent requests in the whole deployment (all n_gpus); context_tokens is the KV
    length per request at the step (decode) or the prompt length (prefill). expert_weight_dtype is the
    routed experts' storage dtype ("" = weight_dtype), e.g. "mxfp4" for weight-only MXFP4 experts.
    tokens_per_step: output tokens one request gains per decode step (MTP / speculative decoding: the mean
    accepted tokens, >= 1); prefill_tokens / prefill_requests: a decode step that also carries a prefill chunk
    of that many tokens from that many requests (a mixed step, floor/mixed.py; 0: none); peaks: the peaks of
    the calibrated estimate, never of the floor.
    """

    name: str
    description: str
    model: ModelSpec
    hardware: GpuSpec
    n_gpus: int
    tp: int
    dp_attention: int
    ep: int
    weight_dtype: str
    expert_weight_dtype: str
    kv_format: str
    batch: int
    context_tokens: int
    reserve_per_gpu_bytes: int
    phase: str
    peaks: str
    tokens_per_step: float = 1.0
    prefill_tokens: int = 0
    prefill_requests: int = 0
    micro_batch: int = 1
    dp: int = 0
    pp: int = 1
    sp: int = 1
    pp_interleave: int = 1
    recompute: str = "none"
    attention_kernel: str = "fa2"
    optimizer: str = "adam"
    zero: int = 0
    grad_overlap: bool = True
    grad_dtype: str = "fp32"
    capacity_factor: float = 1.0
    sequence_parallel: bool = False
    pipeline_schedule: str = "1f1b"
    comm_overlap: str = ""
    pp_first_layers: int = 0
    pp_last_layers: int = 0
    dropout: bool = False
    mtp_depth: int = 0
    moe_route_limit: int = 0

    @property
    def layout(self) -> Layout:
        return Layout(self.n_gpus, self.tp, self.dp_attention, self.ep)

    @property
    def weight_bytes_per_gpu(self) -> float:
        return weight_bytes_per_gpu(self.model, self.layout, self.weight_dtype, self.expert_weight_dtype)

    @property
    def kv_capacity_requests(self) -> int:
        """Deployment-wide concurrent requests of context_tokens that fit (layout.kv_capacity_requests)."""
        return kv_capacity_requests(
            self.model,
            self.hardware,
            self.layout,
            self.weight_dtype,
            self.kv_format,
            self.context_tokens,
            self.reserve_per_gpu_bytes,
            self.expert_weight_dtype,
        )

    def settings(self) -> dict[str, Any]:
        """The effective settable fields, as a TOML/--set user would write them."""
        out = {k: getattr(self, k) for k in FIELD_TYPES if k not in ("model", "hardware")}
        out["model"] = self.model.key
        out["hardware"] = self.hardware.key
        hidden = SERVING_FIELDS if self.phase == "training" else TRAINING_FIELDS
        return {k: out[k] for k in FIELD_TYPES if k not in hidden}
