"""Expert parallelism: capacity-based all-to-all volume and expert GEMM work per GPU.

Switch Transformer (arXiv 2101.03961, Eq. 3): expert capacity = tokens per batch / experts x capacity
factor; a token over capacity skips the expert. Padding to capacity makes every expert process and exchange
`capacity` slots, so the dispatched volume is tokens x top-k x capacity factor rows of the hidden size, of which
the share headed for experts on other GPUs crosses the network (floor-facts.md section 4: dispatch bytes
leaving a rank ~ T k d b (n-1)/n under uniform routing). Combine returns the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def expert_capacity(tokens: float, n_experts: int, capacity_factor: float, top_k: int = 1) -> int:
    """Token slots per expert: ceil(tokens x top_k / experts x capacity factor)."""
    return math.ceil(tokens * top_k / n_experts * capacity_factor)


def remote_fraction(ep: int) -> float:
    """Share of a token's expert choices that live on another GPU under uniform routing: (ep - 1) / ep."""
    return (ep - 1) / ep if ep > 1 else 0.0


@dataclass(frozen=True)
class A2AVolume:
    """Bytes one GPU sends in one dispatch and one combine, and the rows its experts compute."""

    dispatch_bytes: float
    combine_bytes: float
    expert_rows: float


def a2a_volume(tokens: float, top_k: int, hidden: int, capacity_factor: float, ep: int,
               dispatch_bytes_per_elem: float = 2.0, combine_bytes_per_elem: float = 2.0,
               remote: float | None = None) -> A2AVolume:
    """Per-GPU all-to-all volume for `tokens` tokens entering one MoE layer on this GPU.

    remote: fraction of routed rows that leave the GPU (default (ep - 1) / ep). expert_rows: rows this GPU's
    experts process, tokens x top_k x capacity factor (each EP rank receives what it sends, on average).
    """
    frac = remote_fraction(ep) if remote is None else remote
    rows = tokens * top_k * capacity_factor
    return A2AVolume(rows * hidden * dispatch_bytes_per_elem * frac, rows * hidden * combine_bytes_per_elem * frac,
                     rows)


def expert_gemm_flops(expert_rows: float, expert_params: int, etp: int = 1) -> float:
    """Forward FLOPs of the expert MLPs: 2 x rows x params of one expert (sharded over etp)."""
    return 2.0 * expert_rows * expert_params / etp
