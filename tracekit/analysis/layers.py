"""Per-layer and per-module breakdown: GPU time and op floor grouped by the module hierarchy the trace records.

Modules are Kineto's ``python_function`` ranges ``nn.Module: Name_N`` (the module nodes of ``op_nodes``, each with
the nearest module above it). The repeated block (a transformer layer) is the module type with the most GPU
time among those with several instances under one parent module. Its instances are numbered in start order
under their parent; each gets its measured time, its op floor (``tracekit.analysis.opfloor``) and their ratio,
and an instance more than ``OUTLIER_FACTOR`` times the median of its siblings is flagged. Every module type
inside the block gets the same three figures.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tracekit.analysis.attribution import MODULE_PREFIX

OUTLIER_FACTOR = 1.25  # an instance this many times the median of its siblings is an outlier
_INSTANCE = re.compile(r"_\d+$")


def module_type(name: str) -> str:
    """'nn.Module: Qwen2DecoderLayer_17' -> 'Qwen2DecoderLayer'."""
    return _INSTANCE.sub("", name.removeprefix(MODULE_PREFIX))


@dataclass(frozen=True)
class Block:
    """The repeated block: its module type, its instances (module nodes, in start order) and their parent."""

    type: str
    instances: tuple[int, ...]
    parent: int


@dataclass(frozen=True)
class Modules:
    """The module nodes: name and parent module by node, and each one's chain (itself, then the modules above)."""

    names: dict[int, str]
    parent: dict[int, int]
    chains: dict[int, tuple[int, ...]]

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Modules:
        """From ``load_modules``'s frame (rows in node order: a parent before its children)."""
        names = dict(zip(frame["node"].to_list(), frame["name"].to_list(), strict=True))
        parent = dict(zip(frame["node"].to_list(), frame["module_parent"].to_list(), strict=True))
        chains: dict[int, tuple[int, ...]] = {}
        for m in frame["node"].to_list():
            p = parent[m]
            chains[m] = (m, *chains.get(p, ())) if p is not None and p >= 0 else (m,)
        return cls(names, parent, chains)

    def time_by_module(self, module: list[int], ns: list[float]) -> dict[int, float]:
        """GPU time per module node, its own and its children's (``module``: innermost module per row)."""
        out: dict[int, float] = defaultdict(float)
        for m, t in zip(module, ns, strict=True):
            for a in self.chains.get(m, ()):
                out[a] += t
        return out


def find_block(modules: Modules, node_ns: dict[int, float]) -> Block | None:
    """The module type with the most GPU time among those with several instances under one parent module."""
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for m, n in modules.names.items():
        groups[(modules.parent[m], module_type(n))].append(m)
    best = None
    for (p, t), members in groups.items():
        if len(members) < 2:
            continue
        total = sum(node_ns.get(m, 0.0) for m in members)
        key = (total, len(members))
        if total > 0 and (best is None or key > best[0]):
            best = (key, Block(t, tuple(sorted(members)), p))
    return best[1] if best else None


def instance_counts(modules: Modules, block: Block) -> list[int]:
    """How many instances of the block type each parent module holds (one per forward pass)."""
    per_parent: dict[int, int] = defaultdict(int)
    for m, n in modules.names.items():
        if module_type(n) == block.type:
            per_parent[modules.parent[m]] += 1
    return sorted(per_parent.values())


def layer_tables(modules: Modules, units: pl.DataFrame, n_steps: int) -> dict[str, Any] | None:
    """The report's ``layers`` section from the op floor's units (one row per step and unit, with ``module``,
    ``measured_ns``, ``t_opt_ns``): the block, one row per layer index, one per module type inside the block."""
    if not modules.names:
        return None
    mods = units["module"].fill_null(-1).to_numpy()
    measured, floor = units["measured_ns"].to_numpy(), units["t_opt_ns"].to_numpy().astype(np.float64)
    distinct, row_of = np.unique(mods, return_inverse=True)  # per row, its module among the distinct ones
    module_ns = np.bincount(row_of, weights=measured, minlength=len(distinct))  # integers: exact in a double
    block = find_block(modules, modules.time_by_module(distinct.tolist(), module_ns.tolist()))
    if block is None:
        return None
    by_parent: dict[int, list[int]] = defaultdict(list)
    for m, n in modules.names.items():
        if module_type(n) == block.type:
            by_parent[modules.parent[m]].append(m)
    index = {m: k for members in by_parent.values() for k, m in enumerate(sorted(members))}
    # Per distinct module: its layer index (-1: in no layer) and the module types on its chain below the layer.
    layer_of = np.full(len(distinct), -1, dtype=np.int64)
    below: dict[str, np.ndarray] = {}  # type -> per distinct module, how often the type is on its chain below
    type_instances: dict[str, set[int]] = defaultdict(set)
    types_on: dict[int, list[str]] = {}  # per distinct module, the types below its layer in chain order
    for i, m in enumerate(distinct.tolist()):
        chain = modules.chains.get(m, ())
        layer = next((a for a in chain if a in index), None)
        if layer is None:
            continue
        layer_of[i] = index[layer]
        types_on[i] = [module_type(modules.names[a]) for a in chain[:chain.index(layer)]]
        for a in chain[:chain.index(layer)]:
            t = module_type(modules.names[a])
            below.setdefault(t, np.zeros(len(distinct), dtype=np.int64))[i] += 1
            type_instances[t].add(a)
    # Sums in row order, one addition after another (np.cumsum), as a loop over the rows would add them.
    row_layer = layer_of[row_of]
    per_layer: dict[int, list[float]] = {}
    for k in np.unique(row_layer[row_layer >= 0]).tolist():
        mine = row_layer == k
        per_layer[k] = [float(measured[mine].sum()), float(np.cumsum(floor[mine])[-1])]
    per_type: dict[str, list[float]] = {}
    seen: dict[str, tuple[int, int]] = {}  # type -> (first row, place on that row's chain): a loop's first sight
    for t, count in below.items():
        times = count[row_of]
        mine = times > 0
        first = int(np.argmax(mine))
        seen[t] = (first, types_on[int(row_of[first])].index(t))
        per_type[t] = [float((measured[mine] * times[mine]).sum()), float(np.cumsum(np.repeat(floor[mine],
                                                                                             times[mine]))[-1])]
    per_type = {t: per_type[t] for t in sorted(per_type, key=lambda t: seen[t])}
    rows = [{"layer": k, "measured_ns": int(v[0] / n_steps), "t_opt_ns": int(round(v[1] / n_steps)),
             "ratio": v[0] / v[1] if v[1] else None} for k, v in sorted(per_layer.items())]
    median = float(np.median([r["measured_ns"] for r in rows])) if rows else 0.0
    outliers = []
    for r in rows:
        r["vs_siblings"] = r["measured_ns"] / median if median else None
        if median and r["measured_ns"] > OUTLIER_FACTOR * median:
            outliers.append(f"layer {r['layer']} is {r['measured_ns'] / median:.2f}x its siblings "
                            f"({r['measured_ns'] / 1e6:.3f} ms against a median of {median / 1e6:.3f} ms)")
    types = [{"module": t, "instances_per_step": len(type_instances[t]) / n_steps, "measured_ns": int(v[0] / n_steps),
              "t_opt_ns": int(round(v[1] / n_steps)), "ratio": v[0] / v[1] if v[1] else None}
             for t, v in sorted(per_type.items(), key=lambda kv: -kv[1][0])]
    parent = modules.names.get(block.parent)
    return {"block": block.type, "count": len(rows), "parent": module_type(parent) if parent else None,
            "layers": rows, "module_types": types, "outliers": outliers}
