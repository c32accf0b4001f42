"""Deployment configs from TOML files: loading (with `extends`), `--set` overrides and validation.

The floor loads a config from a path it is given. Named configs live elsewhere (tracekit's
`budgets/configs`, resolved by `tracekit.budgets.configs`); an `extends = "NAME"` is resolved by the
caller's resolver, or as NAME.toml beside the extending file.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .deployment import DEFAULTS, FIELD_TYPES, PEAK_KINDS, PHASES, DeploymentConfig
from .errors import ConfigError
from .hardware import get_gpu
from .layout import WEIGHT_BYTES
from .models import get_model, model_from_table
from .training_config import validate_training

#: name -> path of a named config (the caller's catalogue); raises ConfigError for an unknown name.
Resolver = Callable[[str], Path]


#: The values a number field may take, (lowest, highest): anything outside is refused before use, so no
#: NaN, infinity or overflowing product reaches the floor. The highest values are far above any real
#: deployment (the shipped configs reach n_gpus 16,384, batch 15,360, context 131,072) and keep every
#: product of them (bytes of the KV cache, FLOPs of a step) well inside float and int64 ranges.
PARALLEL_MAX = 2**20  # GPUs and parallel degrees: a million
FIELD_RANGES: dict[str, tuple[float, float]] = {
    "n_gpus": (1, PARALLEL_MAX), "tp": (1, PARALLEL_MAX), "dp_attention": (1, PARALLEL_MAX),
    "ep": (1, PARALLEL_MAX), "dp": (0, PARALLEL_MAX), "pp": (1, PARALLEL_MAX), "sp": (1, PARALLEL_MAX),
    "pp_interleave": (1, 2**10), "batch": (1, 2**24), "micro_batch": (1, 2**24),
    "context_tokens": (1, 2**27), "tokens_per_step": (1.0, 64.0), "reserve_per_gpu_bytes": (0, 2**50),
    "zero": (0, 3), "capacity_factor": (1.0, 1e3), "pp_first_layers": (0, 2**16), "pp_last_layers": (0, 2**16),
    "mtp_depth": (0, 64), "moe_route_limit": (0, 2**16), "prefill_tokens": (0, 2**27), "prefill_requests": (0, 2**24),
}


def check_value(key: str, value: Any, origin: str) -> Any:
    """``value`` of a number field when it is finite and in ``FIELD_RANGES`` (a whole number for an int
    field), else a ConfigError naming ``origin`` (the option or file) and the field, with what is allowed."""
    want = FIELD_TYPES.get(key)
    if want not in (int, float) or isinstance(value, bool):
        return value
    lo, hi = FIELD_RANGES.get(key, (-math.inf, math.inf))
    kind = "a whole number" if want is int else "a number"
    show = (lambda x: f"{int(x):,}") if want is int else (lambda x: f"{x:g}")
    if math.isfinite(lo) and math.isfinite(hi):
        allowed = f"{kind} from {show(lo)} to {show(hi)}"
    else:
        allowed = f"a finite {kind.removeprefix('a ')}"
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{origin}: {key} must be {allowed}, got {value}; fix the value")
    if want is int and isinstance(value, float) and value != int(value):
        raise ConfigError(f"{origin}: {key} must be {allowed}, got {value}; give an integer")
    if not lo <= value <= hi:
        raise ConfigError(f"{origin}: {key} must be {allowed}, got {value:g}; fix the value")
    return int(value) if want is int else float(value)


def config_names(folder: Path) -> list[str]:
    """Names of the config files in a folder (NAME.toml -> NAME), sorted; empty when it is not a folder."""
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.iterdir() if p.suffix == ".toml")


def parse_sets(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """['batch=64', 'kv_format=fp8'] (the --set KEY=VALUE options) -> dict; a missing '=' is a ConfigError."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = item if len(item) <= 80 else item[:39] + "…" + item[-40:]
            raise ConfigError(f"--set '{shown}': expected key=value, e.g. --set kv_format=fp8")
        out[key.strip()] = value.strip()
    return out


def _read_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML ({exc}); fix the file") from None


def _extends_path(base: str, origin: Path, resolve: Resolver | None) -> Path:
    """Where `extends = base` points: a path (relative to the extending file), or a name, resolved by the
    caller's resolver or found as NAME.toml beside the extending file."""
    if base.endswith(".toml") or "/" in base or "\\" in base:
        path = Path(base)
        return path if path.is_absolute() else origin.parent / path
    return resolve(base) if resolve is not None else origin.parent / f"{base}.toml"


def _load_raw(path: Path, resolve: Resolver | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """Raw settings of the TOML file at `path` with `extends` resolved (child keys win)."""
    shown = str(path) if len(str(path)) <= 80 else str(path)[:39] + "…" + str(path)[-40:]
    try:
        found = path.is_file()
    except OSError:  # a name too long for a path
        found = False
    if not found:
        raise ConfigError(
            f"config file '{shown}' not found; pass an existing path (or a name from `tracekit configs`)"
        )
    origin = str(path)
    if origin in seen:
        raise ConfigError(f"{origin}: `extends` forms a cycle ({' -> '.join((*seen, origin))}); break it")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        cause = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"config file '{shown}': cannot read ({cause}); check the file and its permissions") from None
    raw = _read_toml(text, origin)
    base = raw.pop("extends", None)
    _check_types(raw, origin)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ConfigError(f"{origin}: 'extends' must be a config name or path string; fix the value")
    parent = _load_raw(_extends_path(base, path, resolve), resolve, (*seen, origin))
    return {**parent, **raw}


#: a config's own model (``[model_spec]``: the fields of a data/models.toml entry), named by its ``model`` key:
#: what `tracekit config-draft` writes for a model the catalog lacks.
MODEL_SPEC = "model_spec"


def _check_types(raw: dict[str, Any], origin: str) -> None:
    for key, value in raw.items():
        if key == MODEL_SPEC:
            if not isinstance(value, dict):
                raise ConfigError(f"{origin}: '{MODEL_SPEC}' must be a table of model fields; fix the value")
            continue
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
        check_value(key, value, origin)


def parse_override(key: str, text: str) -> Any:
    """Cast one `--set key=value` string to the field's type (ints accept 8e9, 8GB, 8GiB); a number must be
    finite, in its field's range and whole for an int field (``check_value``)."""
    if key not in FIELD_TYPES:
        shown = key if len(key) <= 60 else key[:29] + "…" + key[-30:]
        raise ConfigError(f"--set: unknown key '{shown}'; valid keys: {', '.join(FIELD_TYPES)}")
    shown = text if len(text) <= 60 else text[:29] + "…" + text[-30:]
    if FIELD_TYPES[key] is str:
        return text
    if FIELD_TYPES[key] is bool:
        low = text.strip().lower()
        if low not in ("true", "false", "1", "0", "on", "off"):
            raise ConfigError(f"--set {key}={shown}: not a boolean; give true or false")
        return low in ("true", "1", "on")
    if FIELD_TYPES[key] is float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"--set {key}={shown}: not a number; give a number such as {key}=1.25") from None
        return check_value(key, value, f"--set {key}={shown}")
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9, "k": 1e3}
    low, scale = text.strip().lower().replace("_", ""), 1.0
    for suffix, mult in units.items():
        if low.endswith(suffix):
            low, scale = low.removesuffix(suffix), mult
            break
    try:
        value = float(low) * scale
    except (ValueError, OverflowError):
        raise ConfigError(f"--set {key}={shown}: not a number; give an integer such as {key}=64") from None
    return check_value(key, value, f"--set {key}={shown}")


def build_config(raw: dict[str, Any], name: str) -> DeploymentConfig:
    """Resolve catalog keys, fill defaults and validate."""
    merged = {**DEFAULTS, **raw}
    inline = merged.pop(MODEL_SPEC, None)
    missing = [k for k in FIELD_TYPES if k not in merged]
    if missing:
        raise ConfigError(
            f"{name}: missing key '{missing[0]}'; add it to the config or pass --set {missing[0]}=..."
        )
    merged["model"] = model_from_table(merged["model"], inline, name) if inline is not None \
        else get_model(merged["model"])
    merged["hardware"] = get_gpu(merged["hardware"])
    cfg = DeploymentConfig(name=name, **merged)
    validate(cfg)
    return cfg


def load_config(path: str | Path, overrides: dict[str, str] | None = None,
                resolve: Resolver | None = None) -> DeploymentConfig:
    """Load the TOML config at `path` (its `extends` resolved by `resolve`, else beside it), then apply
    --set overrides. The config is named after the file."""
    path = Path(path)
    raw = _load_raw(path, resolve)
    for key, text in (overrides or {}).items():
        raw[key] = parse_override(key, text)
    return build_config(raw, path.stem)


def validate(cfg: DeploymentConfig) -> None:
    """Raise ConfigError (one line) for a layout, precision or load the floor cannot model."""
    if cfg.phase == "training":
        validate_training(cfg)
        return
    for ok, message in _serving_checks(cfg):
        if not ok:
            raise ConfigError(f"{cfg.name}: {message}")
    cfg.model.kv_bytes_per_token_layer(cfg.kv_format)  # raises for a format the model cannot use
    _check_memory(cfg)


def _serving_checks(cfg: DeploymentConfig) -> list[tuple[bool, str]]:
    """(holds, message if not) for every field of a decode or prefill config."""
    m = cfg.model
    return [
        (cfg.batch >= 1, f"batch must be >= 1 concurrent request, got {cfg.batch}; set --batch to a positive number"),
        (cfg.context_tokens >= 1, f"context_tokens must be >= 1, got {cfg.context_tokens}; set --context"),
        (cfg.tokens_per_step >= 1.0,
         f"tokens_per_step must be >= 1 (output tokens per request per decode step), got {cfg.tokens_per_step}"),
        (cfg.phase != "prefill" or cfg.tokens_per_step == 1.0,
         "tokens_per_step (MTP / speculative decoding) applies to decode; set it to 1 for prefill"),
        (cfg.n_gpus >= 1 and cfg.tp >= 1 and cfg.n_gpus % cfg.tp == 0,
         f"n_gpus ({cfg.n_gpus}) must be a positive multiple of tp ({cfg.tp}); fix n_gpus or tp"),
        (cfg.dp_attention in (1, cfg.tp),
         f"dp_attention must be 1 (attention TP) or tp={cfg.tp} (DP-attention), got {cfg.dp_attention}"),
        (cfg.ep in (1, cfg.tp), f"ep must be 1 or tp={cfg.tp}, got {cfg.ep}; set --set ep=..."),
        (cfg.ep == 1 or m.is_moe, f"ep={cfg.ep} needs an MoE model, '{m.key}' is dense; set ep=1"),
        (cfg.weight_dtype in ("bf16", "fp8"), f"weight_dtype '{cfg.weight_dtype}' unknown; use one of: bf16, fp8"),
        (cfg.expert_weight_dtype in ("", *WEIGHT_BYTES),
         f"expert_weight_dtype '{cfg.expert_weight_dtype}' unknown; use one of: {', '.join(WEIGHT_BYTES)}"),
        (not cfg.expert_weight_dtype or m.is_moe,
         f"expert_weight_dtype needs an MoE model, '{m.key}' is dense; remove it"),
        (cfg.phase in PHASES, f"phase '{cfg.phase}' unknown; use one of: {', '.join(PHASES)}"),
        (cfg.prefill_tokens >= cfg.prefill_requests >= 0 and (cfg.prefill_tokens > 0) == (cfg.prefill_requests > 0),
         f"prefill_tokens ({cfg.prefill_tokens}) and prefill_requests ({cfg.prefill_requests}) of a mixed step: "
         "both 0, or at least one token per request"),
        (cfg.phase == "decode" or not cfg.prefill_tokens,
         "prefill_tokens (a mixed step) applies to decode configs; use batch and context_tokens for prefill"),
        (cfg.peaks in PEAK_KINDS, f"peaks '{cfg.peaks}' unknown; use one of: {', '.join(PEAK_KINDS)}"),
        (cfg.reserve_per_gpu_bytes >= 0, "reserve_per_gpu_bytes must be >= 0; fix the value"),
    ]


def _check_memory(cfg: DeploymentConfig) -> None:
    """Weights, reserve and the KV cache of `batch` requests must fit in the device's HBM."""
    hbm = cfg.hardware.hbm_bytes
    if hbm - cfg.weight_bytes_per_gpu - cfg.reserve_per_gpu_bytes <= 0:
        raise ConfigError(
            f"{cfg.name}: weights ({cfg.weight_bytes_per_gpu / 2**30:.1f} GiB/GPU) plus reserve do not fit "
            f"in {hbm / 2**30:.1f} GiB; use more GPUs, FP8 weights or a smaller reserve"
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
