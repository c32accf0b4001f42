"""The model that ran, inferred from the trace's own op shapes, and a config checked against it.

- hidden: the commonest K of the weight GEMMs (``aten::linear`` weights [N, K], else ``mm``/``addmm`` weights);
- intermediate: an N of a hidden-K GEMM that comes back as the K of a GEMM with N = hidden (the MLP's
  up and down projections; a fused QKV's N never comes back);
- vocabulary: the largest N of a hidden-K GEMM when it is over 8x hidden (the LM head);
- experts: the group count of grouped GEMMs;
- heads and head dim: from the attention op with most GPU time (SDPA, flash), else from the 4-d inputs of the
  score GEMMs under an attention module (the math path);
- layers: the repeated block's instance count per forward (``tracekit.analysis.layers``);
- dtype: the commonest input type of the weight GEMMs.
A config whose model contradicts an inferred field makes the verdict inconclusive (``check``).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import duckdb

from tracekit.analysis.attribution import ATTENTION_MODULE_REGEX, MODULE_PREFIX, load_modules
from tracekit.analysis.layers import Modules, find_block, instance_counts, module_type
from tracekit.floor.ops import ATTENTION_OPS

_WEIGHT_OPS = frozenset({"aten::linear", "aten::mm", "aten::addmm", "aten::_grouped_mm", "aten::_scaled_mm",
                         "aten::_scaled_grouped_mm", "aten::embedding"})
VOCAB_FACTOR = 8  # an N this many times hidden is a vocabulary (LM head), not a projection
_DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "c10::Float8_e4m3fn": "fp8",
           "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8"}


@dataclass
class ModelShape:
    """What the trace's ops say about the model; None where they do not say."""

    hidden: int | None = None
    intermediate: int | None = None
    vocab: int | None = None
    experts: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    layers: int | None = None
    block: str | None = None
    dtype: str | None = None
    mlp_matrices: int | None = None  # weight GEMMs per MLP: 3 gated (gate, up, down), 2 plain
    attention: dict[str, Any] | None = None  # the dominant attention: op, shapes, GPU time, the part it ran in
    evidence: dict[str, str] = field(default_factory=dict)

    def section(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        parts = [f"{k.replace('_', ' ')} {v}" for k, v in
                 (("hidden", self.hidden), ("intermediate", self.intermediate), ("heads", self.heads),
                  ("kv_heads", self.kv_heads), ("head_dim", self.head_dim), ("vocabulary", self.vocab),
                  ("experts", self.experts), ("layers", self.layers), ("dtype", self.dtype)) if v is not None]
        return ", ".join(parts) if parts else "nothing (the trace records no op shapes)"


@lru_cache(maxsize=65536)
def _dims(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def infer_shape(con: duckdb.DuckDBPyConnection) -> ModelShape:
    """The model shape from the ops of the whole capture (``register_attribution`` must have run)."""
    shape = ModelShape()
    # One row per distinct (weight op, inputs), not under an aten::linear (the linear is counted), with its count.
    distinct = con.execute("""
        SELECT n.name, n.input_dims, n.input_types, count(*) FROM op_nodes n LEFT JOIN op_nodes p ON p.node = n.parent
        WHERE n.name IN (SELECT unnest($ops)) AND n.input_dims IS NOT NULL
          AND (n.name = 'aten::linear' OR p.name IS DISTINCT FROM 'aten::linear')
        GROUP BY ALL
    """, {"ops": sorted(_WEIGHT_OPS)}).fetchall()
    weights: Counter[tuple[int, int]] = Counter()
    dtypes: Counter[str] = Counter()
    grouped: Counter[int] = Counter()
    embeddings: Counter[tuple[int, int]] = Counter()
    for n, dims, types_text, count in distinct:
        d = _dims(dims)
        if n == "aten::embedding":
            if d and isinstance(d[0], list) and len(d[0]) == 2:
                embeddings[(d[0][0], d[0][1])] += count
            continue
        tensors = [x for x in d if isinstance(x, list) and x and all(isinstance(v, int) for v in x)]
        if n == "aten::linear" and len(tensors) >= 2 and len(tensors[1]) == 2:
            weights[(tensors[1][1], tensors[1][0])] += count  # weight [N, K]
        elif n in ("aten::mm", "aten::_scaled_mm") and len(tensors) >= 2 and len(tensors[1]) == 2:
            weights[(tensors[1][0], tensors[1][1])] += count
        elif n == "aten::addmm" and len(tensors) >= 3 and len(tensors[2]) == 2:
            weights[(tensors[2][0], tensors[2][1])] += count
        elif "grouped" in n and len(tensors) >= 2 and len(tensors[1]) == 3:
            grouped[tensors[1][0]] += count
        types = _dims(types_text)
        if types and str(types[0]) in _DTYPES:
            dtypes[_DTYPES[str(types[0])]] += count
    _gemm_fields(shape, weights)
    if shape.vocab is None and embeddings:  # no LM head in the capture: the token embedding's rows
        rows, width = max(embeddings)
        if shape.hidden is None or width == shape.hidden:
            shape.vocab = rows
            shape.evidence["vocab"] = "rows of the token embedding table (aten::embedding)"
    if grouped:
        shape.experts = _commonest(grouped)
        shape.evidence["experts"] = "grouped GEMMs' weight groups"
    if dtypes:
        shape.dtype = _commonest(dtypes)
    modules = Modules.of(load_modules(con))
    _attention_fields(shape, con, modules)
    kernels = con.execute("SELECT module, sum(dur_ns) AS ns FROM kernel_ops WHERE module >= 0 GROUP BY module"
                          ).fetchall()
    block = find_block(modules, modules.time_by_module([k[0] for k in kernels], [float(k[1]) for k in kernels]))
    if block is not None:
        counts = instance_counts(modules, block)
        shape.layers, shape.block = counts[len(counts) // 2], block.type
        shape.evidence["layers"] = f"instances of the repeated block {block.type} under one parent"
        if shape.intermediate and shape.hidden:
            ups = weights[(shape.hidden, shape.intermediate)] / max(sum(counts), 1)
            shape.mlp_matrices = 3 if round(ups) >= 2 else 2
    return shape


def _commonest(counts: Counter) -> Any:
    """The most frequent key, the larger key on a tie: the SQL rows come in no set order, and a tie broken by
    arrival order made the inferred shape differ between runs."""
    return max(counts, key=lambda k: (counts[k], k))


def _gemm_fields(shape: ModelShape, weights: Counter[tuple[int, int]]) -> None:
    if not weights:
        return
    by_k: Counter[int] = Counter()
    for (k, _), c in weights.items():
        by_k[k] += c
    hidden = _commonest(by_k)
    shape.hidden = hidden
    shape.evidence["hidden"] = "commonest K of the weight GEMMs"
    outs = {n for (k, n) in weights if k == hidden}
    back = {k for (k, n) in weights if n == hidden}
    inter = sorted((n for n in outs & back if n != hidden), key=lambda n: (-weights[(hidden, n)], n))
    if inter:
        shape.intermediate = inter[0]
        shape.evidence["intermediate"] = "N of a hidden-K GEMM that is the K of a GEMM back to hidden"
    big = max(outs)
    if big > VOCAB_FACTOR * hidden:
        shape.vocab = big
        shape.evidence["vocab"] = "the largest N of a hidden-K GEMM (the LM head)"


def _part(module: int, modules: Modules) -> str | None:
    """The outermost module around a node: the part of a composite model (text encoder, transformer) it ran in."""
    chain = modules.chains.get(module, ())
    return module_type(modules.names[chain[-1]]) if chain else None


def _attention_fields(shape: ModelShape, con: duckdb.DuckDBPyConnection, modules: Modules) -> None:
    """Heads and head dim from the attention with most GPU time (fused op, else the math path's score GEMM)."""
    units = con.execute("""
        SELECT n.name, n.input_dims, n.family, n.module_of, sum(k.dur_ns) FROM kernel_ops k
        JOIN op_nodes n ON n.node = k.unit
        WHERE k.unit >= 0 AND n.family IS NOT NULL AND n.name IN (SELECT unnest($ops)) GROUP BY ALL
    """, {"ops": sorted(ATTENTION_OPS | {"aten::matmul", "aten::bmm"})}).fetchall()
    time: dict[tuple, float] = defaultdict(float)
    first: dict[tuple, int] = {}
    for name, dims, family, module, ns in units:
        d = _dims(dims)
        tensors = [x for x in d if isinstance(x, list) and len(x) == 4 and all(isinstance(v, int) for v in x)]
        if name in ATTENTION_OPS and len(tensors) >= 2:
            q, k = tensors[0], tensors[1]
            bshd = not name.startswith("aten::_scaled") and not name.startswith("aten::scaled")
            h, hkv, dh = (q[2], k[2], q[3]) if bshd else (q[1], k[1], q[3])
            b, sq, sk = (q[0], q[1], k[1]) if bshd else (q[0], q[2], k[2])
            key = ("fused", name, h, hkv, dh, b, sq, sk)
        elif family == "gemm" and name in ("aten::matmul", "aten::bmm") and len(tensors) >= 2 \
                and tensors[1][2] == tensors[0][3] and tensors[1][3] != tensors[0][3] \
                and any(_is_attention_module(modules.names[m]) for m in modules.chains.get(module, ())[:3]):
            q = tensors[0]  # q [B, H, S, d] x k^T [B, H, d, S]
            key = ("math", name, q[1], q[1], q[3], q[0], q[2], tensors[1][3])
        else:
            continue
        time[key] += float(ns)
        first.setdefault(key, module)
    if not time:
        return
    # Time of the kernels whose name says attention (flash, FMHA, SageAttention): what the point must explain.
    named_ns = float(con.execute("SELECT coalesce(sum(k.dur_ns), 0) FROM kernel_ops k JOIN kernel_class c "
                                 "USING (name) WHERE NOT k.is_memop AND c.class = 'attn_core'").fetchall()[0][0])
    key = max(time, key=lambda k: (time[k], k))
    kind, op, h, hkv, dh, b, sq, sk = key
    if kind == "math" and (dh > h * 16 or sk < dh):  # not [B, H, S, d] x [B, H, d, S]: no reading
        return
    shape.heads, shape.kv_heads, shape.head_dim = h, hkv, dh
    part = _part(first[key], modules)
    total = sum(time.values())
    attn_core = max(named_ns, total)
    shape.attention = {"op": op, "kind": kind, "batch": b, "query_len": sq, "key_len": sk, "gpu_ns": int(time[key]),
                       "share_of_attention_with_shapes": time[key] / total if total else None,
                       "share_of_attn_core": time[key] / attn_core if attn_core else None, "part": part}
    shape.evidence["heads"] = f"{'fused attention' if kind == 'fused' else 'attention score GEMM'} {op}" + (
        f" in {part}" if part else "")


def _is_attention_module(name: str) -> bool:
    return name.startswith(MODULE_PREFIX) and bool(ATTENTION_MODULE_REGEX.search(name.removeprefix(MODULE_PREFIX)))


def check(shape: ModelShape, cfg: Any) -> list[str]:
    """The reason (one line naming every mismatched field) when the config's model contradicts the trace."""
    m = cfg.model
    tp = max(int(getattr(cfg, "tp", 1) or 1), 1)
    pp = max(int(getattr(cfg, "pp", 1) or 1), 1)
    pairs = [("hidden", shape.hidden, m.d_model),
             ("layers", shape.layers * pp if shape.layers is not None else None, m.n_layers),
             ("heads", shape.heads * tp if shape.heads is not None else None, m.n_heads)]
    if tp == 1:  # a tensor-parallel rank's MLP and head dims are its shard's: compared unsharded only
        pairs += [("intermediate", shape.intermediate, m.dense_intermediate or m.moe_intermediate or None),
                  ("head dim", shape.head_dim, m.qk_head_dim or None)]
    wrong = [(what, traced, configured) for what, traced, configured in pairs
             if traced is not None and configured and traced != configured]
    if not wrong:
        return []
    traced = ", ".join(f"{w} {t}" for w, t, _ in wrong)
    configured = ", ".join(f"{w} {c}" for w, _, c in wrong)
    scope = f" (over tp {tp}{f', pp {pp}' if pp > 1 else ''})" if tp > 1 or pp > 1 else ""
    return [f"the trace's model has {traced}; config {getattr(cfg, 'name', '?')} ({m.key}) has {configured}{scope}: "
            "its floor is for another model (tracekit config-draft FILE writes a config from this trace)"]
