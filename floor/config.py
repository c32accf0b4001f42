"""Named deployment configs: loading (with `extends`), `--set` overrides and validation."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .hardware import GpuSpec, get_gpu
from .layout import WEIGHT_BYTES, Layout, kv_capacity_requests, weight_bytes_per_gpu
from .models import ModelSpec, get_model

PHASES = ("decode", "prefill", "training")
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
DEFAULTS: dict[str, Any] = {
    "description": "",
    "dp_attention": 1,
    "ep": 1,
    "weight_dtype": "bf16",
    "expert_weight_dtype": "",
    "kv_format": "bf16",
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
        keys = [k for k in FIELD_TYPES if self.phase == "training" or k not in TRAINING_FIELDS]
        return {k: out[k] for k in keys}


def _configs_dir():
    """Named configs: package data of the sibling `budgets` package, or ../budgets/configs in a checkout."""
    pkg = (__package__ or "floor").rpartition(".")[0]
    try:
        return resources.files(f"{pkg}.budgets" if pkg else "budgets") / "configs"
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "budgets" / "configs"


def list_configs() -> list[str]:
    """Names of the shipped configs (empty when the budgets package is absent)."""
    folder = _configs_dir()
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def _read_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML ({exc}); fix the file") from None


def _load_raw(name_or_path: str, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """Raw settings with `extends` resolved (child keys win), and where they came from."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.is_file():
        if not path.is_file():
            raise ConfigError(
                f"config file '{name_or_path}' not found; pass an existing path or a name from "
                "`tracekit configs`"
            )
        origin, raw = str(path), _read_toml(path.read_text(encoding="utf-8"), str(path))
    else:
        entry = _configs_dir() / f"{name_or_path}.toml"
        if not entry.is_file():
            known = ", ".join(list_configs()) or "none installed"
            raise ConfigError(
                f"unknown config '{name_or_path}'; use one of: {known} (or a path to a .toml file)"
            )
        origin, raw = f"config '{name_or_path}'", _read_toml(entry.read_text(encoding="utf-8"), name_or_path)
    if origin in seen:
        raise ConfigError(f"{origin}: `extends` forms a cycle ({' -> '.join((*seen, origin))}); break it")
    base = raw.pop("extends", None)
    _check_types(raw, origin)
    if base is None:
        return raw, origin
    if not isinstance(base, str):
        raise ConfigError(f"{origin}: 'extends' must be a config name or path string; fix the value")
    parent, _ = _load_raw(base, (*seen, origin))
    return {**parent, **raw}, origin


def _check_types(raw: dict[str, Any], origin: str) -> None:
    for key, value in raw.items():
        if key not in FIELD_TYPES:
            raise ConfigError(f"{origin}: unknown key '{key}'; valid keys: extends, {', '.join(FIELD_TYPES)}")
        want = FIELD_TYPES[key]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            raw[key] = value = float(value)
        if (isinstance(value, bool) and want is not bool) or not isinstance(value, want):
            raise ConfigError(
                f"{origin}: key '{key}' must be {want.__name__}, got {type(value).__name__} "
                f"{value!r}; fix the value"
            )


def parse_override(key: str, text: str) -> Any:
    """Cast one `--set key=value` string to the field's type (ints accept 8e9, 8GB, 8GiB)."""
    if key not in FIELD_TYPES:
        raise ConfigError(f"--set: unknown key '{key}'; valid keys: {', '.join(FIELD_TYPES)}")
    if FIELD_TYPES[key] is str:
        return text
    if FIELD_TYPES[key] is bool:
        low = text.strip().lower()
        if low not in ("true", "false", "1", "0", "on", "off"):
            raise ConfigError(f"--set {key}={text}: not a boolean; give true or false")
        return low in ("true", "1", "on")
    if FIELD_TYPES[key] is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"--set {key}={text}: not a number; give a number such as {key}=1.25") from None
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9, "k": 1e3}
    low, scale = text.strip().lower().replace("_", ""), 1.0
    for suffix, mult in units.items():
        if low.endswith(suffix):
            low, scale = low.removesuffix(suffix), mult
            break
    try:
        value = float(low) * scale
    except ValueError:
        raise ConfigError(f"--set {key}={text}: not a number; give an integer such as {key}=64") from None
    if value != int(value):
        raise ConfigError(f"--set {key}={text}: must be a whole number; give an integer")
    return int(value)


def build_config(raw: dict[str, Any], name: str) -> DeploymentConfig:
    """Resolve catalog keys, fill defaults and validate."""
    merged = {**DEFAULTS, **raw}
    missing = [k for k in FIELD_TYPES if k not in merged]
    if missing:
        raise ConfigError(
            f"{name}: missing key '{missing[0]}'; add it to the config or pass --set {missing[0]}=..."
        )
    merged["model"] = get_model(merged["model"])
    merged["hardware"] = get_gpu(merged["hardware"])
    cfg = DeploymentConfig(name=name, **merged)
    validate(cfg)
    return cfg


def load_config(name_or_path: str, overrides: dict[str, str] | None = None) -> DeploymentConfig:
    """Load a named config or a TOML path (which may `extends` a named one), then apply --set overrides."""
    raw, origin = _load_raw(name_or_path)
    for key, text in (overrides or {}).items():
        raw[key] = parse_override(key, text)
    name = Path(name_or_path).stem if origin != f"config '{name_or_path}'" else name_or_path
    return build_config(raw, name)


def validate(cfg: DeploymentConfig) -> None:
    """Raise ConfigError (one line) for a layout, precision or load the floor cannot model."""
    if cfg.phase == "training":
        from .training_config import validate_training

        validate_training(cfg)
        return
    m = cfg.model
    checks = [
        (
            cfg.batch >= 1,
            f"batch must be >= 1 concurrent request, got {cfg.batch}; set --batch to a positive number",
        ),
        (cfg.context_tokens >= 1, f"context_tokens must be >= 1, got {cfg.context_tokens}; set --context"),
        (
            cfg.n_gpus >= 1 and cfg.tp >= 1 and cfg.n_gpus % cfg.tp == 0,
            f"n_gpus ({cfg.n_gpus}) must be a positive multiple of tp ({cfg.tp}); fix n_gpus or tp",
        ),
        (
            cfg.dp_attention in (1, cfg.tp),
            f"dp_attention must be 1 (attention TP) or tp={cfg.tp} (DP-attention), got {cfg.dp_attention}",
        ),
        (cfg.ep in (1, cfg.tp), f"ep must be 1 or tp={cfg.tp}, got {cfg.ep}; set --set ep=..."),
        (cfg.ep == 1 or m.is_moe, f"ep={cfg.ep} needs an MoE model, '{m.key}' is dense; set ep=1"),
        (
            cfg.weight_dtype in ("bf16", "fp8"),
            f"weight_dtype '{cfg.weight_dtype}' unknown; use one of: bf16, fp8",
        ),
        (
            cfg.expert_weight_dtype in ("", *WEIGHT_BYTES),
            f"expert_weight_dtype '{cfg.expert_weight_dtype}' unknown; use one of: {', '.join(WEIGHT_BYTES)}",
        ),
        (
            not cfg.expert_weight_dtype or m.is_moe,
            f"expert_weight_dtype needs an MoE model, '{m.key}' is dense; remove it",
        ),
        (cfg.phase in PHASES, f"phase '{cfg.phase}' unknown; use one of: {', '.join(PHASES)}"),
        (cfg.peaks in PEAK_KINDS, f"peaks '{cfg.peaks}' unknown; use one of: {', '.join(PEAK_KINDS)}"),
        (cfg.reserve_per_gpu_bytes >= 0, "reserve_per_gpu_bytes must be >= 0; fix the value"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"{cfg.name}: {message}")
    m.kv_bytes_per_token_layer(cfg.kv_format)  # raises for a format the model cannot use
    free = cfg.hardware.hbm_bytes - cfg.weight_bytes_per_gpu - cfg.reserve_per_gpu_bytes
    if free <= 0:
        raise ConfigError(
            f"{cfg.name}: weights ({cfg.weight_bytes_per_gpu / 1e9:.1f} GB/GPU) plus reserve do not fit "
            f"in {cfg.hardware.hbm_bytes / 1e9:.0f} GB; use more GPUs, FP8 weights or a smaller reserve"
        )
    cap = cfg.kv_capacity_requests
    if cap < 1:
        raise ConfigError(
            f"{cfg.name}: context_tokens={cfg.context_tokens} does not fit in memory beside the weights; "
            "lower --context, use an FP8 kv_format or add GPUs"
        )
    if cfg.batch > cap:
        raise ConfigError(
            f"{cfg.name}: batch={cfg.batch} exceeds the KV capacity of {cap} requests at context "
            f"{cfg.context_tokens}; lower --batch or --context"
        )
