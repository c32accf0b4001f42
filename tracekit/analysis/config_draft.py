"""A config draft from a trace: the inferred model, GPU, world size and operating point, each field with how it
was found (``inferred: ...``) or that it is an assumption to check (``assumed: ...``).

The model goes into the config's own ``[model_spec]`` table (``tracekit.floor.config``), so a trace whose model
is in no catalog still gets a model floor. ``tracekit config-draft FILE`` writes it (``report/config_draft.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from tracekit.analysis.fit import trace_point, world_size
from tracekit.analysis.gpu import identify
from tracekit.analysis.model_shape import ModelShape, infer_shape
from tracekit.errors import InputError


@dataclass
class Draft:
    """(key, value, provenance) rows of the config and of its ``[model_spec]`` table."""

    config: list[tuple[str, Any, str]] = field(default_factory=list)
    model: list[tuple[str, Any, str]] = field(default_factory=list)
    shape: ModelShape | None = None


def draft_config(con: duckdb.DuckDBPyConnection, source: str) -> Draft:
    """The draft for the capture in ``con`` (``register_attribution`` must have run); an InputError naming
    ``source`` when its ops record too little to describe a model."""
    shape = infer_shape(con)
    if shape.hidden is None or shape.layers is None or shape.heads is None or shape.head_dim is None:
        raise InputError(f"{source}: the trace's ops record no shapes to infer a model from (hidden, layers, heads "
                         "and head dim are needed); capture with torch.profiler(record_shapes=True, with_modules=True)")
    d = Draft(shape=shape)
    gpu, point, ranks = identify(con), trace_point(con), world_size(con)
    name = f"traced-{(shape.block or 'model').lower()}"
    d.config.append(("description", f"drafted by tracekit config-draft from {source}", "a description to edit"))
    d.config.append(("model", name, "the [model_spec] table below"))
    d.config.append(("hardware", gpu.key or "h100", f"inferred: {gpu.describe()} (by its {gpu.evidence})"
                     if gpu.key else "assumed: the trace identifies no catalogued GPU; set it"))
    n = ranks or 1
    d.config.append(("n_gpus", n, "inferred: the trace's world size" if ranks else "assumed: one GPU"))
    d.config.append(("tp", 1, "assumed: no tensor parallelism (the shapes are one GPU's)"))
    d.config.append(("weight_dtype", shape.dtype if shape.dtype in ("bf16", "fp8") else "bf16",
                     f"inferred: the weight GEMMs' inputs are {shape.dtype}" if shape.dtype else "assumed"))
    d.config.append(("kv_format", "bf16", "assumed"))
    phase = point.phase if point and point.phase in ("decode", "prefill") else "prefill"
    a = shape.attention or {}
    batch = (point.batch if point and point.batch else a.get("batch")) or 1
    context = (point.context if point and point.context else a.get("query_len")) or 1
    how = f"inferred: {point.source}" if point and point.phase else "assumed: the trace states no phase"
    d.config += [("phase", phase, how), ("batch", int(batch), how), ("context_tokens", int(context), how)]
    heads, kv = shape.heads, shape.kv_heads or shape.heads
    d.model += [
        ("name", shape.block or "traced model", "inferred: the repeated block's module"),
        ("attention", "gqa", "inferred: query and key/value heads from attention" if kv != heads else
         "inferred: as many key/value heads as query heads"),
        ("n_layers", shape.layers, f"inferred: {shape.evidence.get('layers', '')}"),
        ("d_model", shape.hidden, f"inferred: {shape.evidence.get('hidden', '')}"),
        ("vocab", shape.vocab or 0, f"inferred: {shape.evidence['vocab']}" if shape.vocab else
         "assumed: no LM head or embedding in the capture"),
        ("tied_embeddings", False, "assumed"),
        ("n_heads", heads, f"inferred: {shape.evidence.get('heads', '')}"),
        ("n_kv_heads", kv, "inferred: attention key heads"),
        ("head_dim", shape.head_dim, "inferred: attention head dim"),
        ("mlp_matrices", shape.mlp_matrices or 3, "inferred: weight GEMMs from hidden to intermediate per layer"
         if shape.mlp_matrices else "assumed: gated MLP"),
        ("dense_intermediate", shape.intermediate or 4 * shape.hidden,
         f"inferred: {shape.evidence['intermediate']}" if shape.intermediate else "assumed: 4 x hidden"),
    ]
    return d
