"""Model catalog (data/models.toml) and the per-layer parameter and KV-cache arithmetic."""

from __future__ import annotations

import math
import tomllib
from dataclasses import MISSING, dataclass, fields
from functools import cache
from importlib import resources

from .errors import ConfigError

#: KV-cache formats for the attention cache. The DSA indexer cache is always FP8 + FP32 scales.
KV_FORMATS = ("bf16", "fp8", "fp8_ds_mla")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture numbers needed for the floor; see data/models.toml for their sources."""

    key: str
    name: str
    attention: str
    n_layers: int
    d_model: int
    vocab: int
    tied_embeddings: bool
    n_heads: int
    n_kv_heads: int = 0
    head_dim: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    mlp_matrices: int = 3
    dense_intermediate: int = 0
    n_dense_layers: int = 0
    moe_intermediate: int = 0
    n_routed_experts: int = 0
    experts_per_token: int = 0
    n_shared_experts: int = 0
    n_group: int = 0  # expert groups for group-limited routing (DeepSeek n_group); 0 = none
    topk_group: int = 0  # groups a token may route to (DeepSeek topk_group: at most 4 nodes per token)
    sliding_window: int = 0
    n_sliding_layers: int = 0
    published_params_total: float = 0.0
    published_params_active: float = 0.0

    # ---- layer counts -------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    @property
    def has_indexer(self) -> bool:
        return self.index_topk > 0

    @property
    def moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.n_dense_layers if self.is_moe else self.n_layers

    def attention_spans(self, attended: int) -> tuple[tuple[int, int], ...]:
        """(layers, tokens attended per query) per attention kind; sliding-window layers see the window."""
        n_sw = self.n_sliding_layers if self.sliding_window else 0
        spans = ((self.n_layers - n_sw, attended), (n_sw, min(attended, self.sliding_window)))
        return tuple(span for span in spans if span[0])

    # ---- attention geometry -------------------------------------------------------------------
    @property
    def qk_head_dim(self) -> int:
        """Query/key width per head (MLA: nope + rope)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.attention == "mla" else self.head_dim

    @property
    def out_head_dim(self) -> int:
        """Value/output width per head."""
        return self.v_head_dim if self.attention == "mla" else self.head_dim

    def attn_params_split(self) -> tuple[int, int, int]:
        """Attention projection params per layer as (replicated under TP, head-sharded, KV-head-sharded).

        MLA: the low-rank down projections (wq_a, wkv_a) are not split by head; wq_b, wkv_b and wo are.
        GQA: q and o are split by head; k and v by KV head.
        """
        d, h = self.d_model, self.n_heads
        if self.attention == "mla":
            lat = self.kv_lora_rank + self.qk_rope_head_dim
            if self.q_lora_rank:
                repl = d * self.q_lora_rank + d * lat
                sharded = self.q_lora_rank * h * self.qk_head_dim
            else:
                repl = d * lat
                sharded = d * h * self.qk_head_dim
            sharded += self.kv_lora_rank * h * (self.qk_nope_head_dim + self.v_head_dim)
            sharded += h * self.v_head_dim * d
            return repl, sharded, 0
        return 0, 2 * d * h * self.head_dim, 2 * d * self.n_kv_heads * self.head_dim

    def indexer_params_split(self) -> tuple[int, int]:
        """DSA indexer params per layer as (replicated: wk, head-sharded: wq_b + weights_proj)."""
        if not self.has_indexer:
            return 0, 0
        repl = self.d_model * self.index_head_dim
        sharded = (
            self.q_lora_rank * self.index_n_heads * self.index_head_dim + self.d_model * self.index_n_heads
        )
        return repl, sharded

    @property
    def expert_params(self) -> int:
        """Params of one routed (or shared) expert."""
        return self.mlp_matrices * self.d_model * self.moe_intermediate

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.d_model * self.dense_intermediate

    @property
    def router_params(self) -> int:
        return self.d_model * self.n_routed_experts

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.d_model

    # ---- totals -------------------------------------------------------------------------------
    def params_total(self) -> int:
        """All parameters (embedding and LM head counted once each unless tied; MTP layers excluded)."""
        return self._params(self.n_routed_experts)

    def params_active(self) -> int:
        """Parameters touched by one token: routed experts count top-k, not all."""
        return self._params(self.experts_per_token)

    def _params(self, routed_experts: int) -> int:
        attn = sum(self.attn_params_split()) + sum(self.indexer_params_split())
        per_moe = (routed_experts + self.n_shared_experts) * self.expert_params + self.router_params
        heads = self.embedding_params * (1 if self.tied_embeddings else 2)
        return self.n_layers * attn + self.dense_layers * self.dense_mlp_params + self.moe_layers * per_moe + heads

    # ---- KV cache -----------------------------------------------------------------------------
    def kv_bytes_per_token_layer(self, kv_format: str) -> float:
        """Attention-cache bytes per token per layer for the whole model (all KV heads).

        MLA: latent (kv_lora) + rope key. 'bf16': (512 + 64) x 2 = 1152; 'fp8': 576 x 1;
        'fp8_ds_mla' (FlashMLA FP8 with scale): 512 FP8 + 4 FP32 scales per 128 + 64 BF16 rope = 656.
        GQA: 2 (K and V) x n_kv x head_dim x bytes per element.
        """
        if kv_format not in KV_FORMATS:
            raise ConfigError(f"unknown kv_format '{kv_format}'; use one of: {', '.join(KV_FORMATS)}")
        if self.attention == "mla":
            lat, rope = self.kv_lora_rank, self.qk_rope_head_dim
            if kv_format == "bf16":
                return (lat + rope) * 2
            if kv_format == "fp8":
                return (lat + rope) * 1
            return lat + math.ceil(lat / 128) * 4 + rope * 2
        if kv_format == "fp8_ds_mla":
            raise ConfigError(f"kv_format 'fp8_ds_mla' needs an MLA model, not '{self.key}'; use bf16 or fp8")
        return 2 * self.n_kv_heads * self.head_dim * (2 if kv_format == "bf16" else 1)

    def indexer_bytes_per_token_layer(self) -> float:
        """DSA indexer key cache: index_head_dim FP8 + one FP32 scale per 128 (128 + 4 = 132)."""
        if not self.has_indexer:
            return 0.0
        return self.index_head_dim + math.ceil(self.index_head_dim / 128) * 4


_TYPES = {f.name: f.type for f in fields(ModelSpec)}
_CASTS = {"str": str, "int": int, "bool": bool, "float": float}


def model_from_table(key: str, row: dict, origin: str = "data/models.toml") -> ModelSpec:
    """A ModelSpec from one TOML table (a catalog entry, or a config's inline ``[model_spec]``)."""
    kwargs = {}
    for field, value in row.items():
        if not isinstance(value, (str, int, float, bool)) or field not in _TYPES or field == "key":
            raise ConfigError(f"{origin}: [{key}] has unknown field '{field}'; remove or rename it")
        kwargs[field] = _CASTS[_TYPES[field]](value)
    missing = [f.name for f in fields(ModelSpec) if f.default is MISSING and f.name not in kwargs and f.name != "key"]
    if missing:
        raise ConfigError(f"{origin}: [{key}] lacks '{missing[0]}'; add it")
    return ModelSpec(key=key, **kwargs)


@cache
def _catalog() -> dict[str, ModelSpec]:
    text = (resources.files(__package__) / "data" / "models.toml").read_text(encoding="utf-8")
    return {key: model_from_table(key, row) for key, row in tomllib.loads(text).items()}


def model_names() -> list[str]:
    """Catalog keys, sorted."""
    return sorted(_catalog())


def get_model(key: str) -> ModelSpec:
    """Look up a model by catalog key (e.g. 'deepseek-v3.2')."""
    try:
        return _catalog()[key.lower()]
    except KeyError:
        raise ConfigError(f"unknown model '{key}'; use one of: {', '.join(model_names())}") from None
