"""Attention HBM bytes and FLOPs from the kernel's loop order: FlashAttention-1/2/3 and standard attention.

Counts are per (sequence, head) pair and scale linearly with their number. Shapes: n_q queries attend n_k
keys of width d (sequence parallelism gives n_q < n_k). Block sizes follow FlashAttention Algorithm 1
(Dao et al. 2022, arXiv 2205.14135): B_c = ceil(M / 4d), B_r = min(B_c, d) with M the on-chip SRAM of one SM
in elements (shared/facts/floor-facts.md section 5).

- FA-1 (K/V outer loop): K_j, V_j load once; Q_i, O_i (and l_i, m_i) are re-read and O_i re-written once per
  K/V block: forward 2Nd + T_c * 3Nd elements. Backward (Algorithm 4): K, V read and dK, dV written once;
  Q_i, O_i, dO_i, dQ_i read and dQ_i written once per K/V block.
- FA-2/3 (Q outer loop): K and V re-read once per query block. Per-head K/V often stay in L2, so the HBM floor
  is the compulsory traffic and the tiled count is the L2 traffic (an upper estimate of HBM traffic).
- Standard attention materialises the n_q x n_k score matrix: Megatron-style fused scale+mask+softmax,
  dropout with a 1-byte mask, and autograd saving the softmax output, the mask and the dropped-out matrix.

Causal masking: tiled kernels skip blocks above the diagonal, so re-streaming counts (T + 1) / 2 blocks and
FLOPs halve (averaged over the ring when sequence parallelism splits the queries); standard attention still
materialises the whole matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KERNELS = ("fa1", "fa2", "fa3", "standard")
#: FP32 softmax statistics (row max m and sum l, or the log-sum-exp) in bytes per row.
STAT_BYTES = 4.0
#: Dropout mask bytes per score element (a bool tensor).
MASK_BYTES = 1.0
#: FlashAttention backward FLOPs over forward (recompute of S and P included): FA-2 paper, facts section 6.2.
FLASH_BWD_OVER_FWD = 2.5
#: Standard attention backward: dV, dP, dQ, dK matmuls, twice the forward's two.
STANDARD_BWD_OVER_FWD = 2.0


@dataclass(frozen=True)
class AttnShape:
    """One attention call: pairs = sequences x heads; n_q queries, n_k keys, head width d."""

    pairs: float
    n_q: int
    n_k: int
    head_dim: int
    causal: bool = True
    elem_bytes: float = 2.0
    dropout: bool = True


@dataclass(frozen=True)
class AttnCost:
    """HBM bytes (the floor level), L2 bytes (tiled re-reads; = HBM for FA-1 and standard), FLOPs, launches."""

    hbm_bytes: float
    l2_bytes: float
    flops: float
    launches: int

    def __add__(self, other: AttnCost) -> AttnCost:
        return AttnCost(self.hbm_bytes + other.hbm_bytes, self.l2_bytes + other.l2_bytes,
                        self.flops + other.flops, self.launches + other.launches)

    def scaled(self, k: float) -> AttnCost:
        return AttnCost(self.hbm_bytes * k, self.l2_bytes * k, self.flops * k, round(self.launches * k))


def block_sizes(sram_bytes: float, head_dim: int, elem_bytes: float = 2.0) -> tuple[int, int]:
    """(B_r, B_c) of Algorithm 1: B_c = ceil(M / 4d), B_r = min(B_c, d), M = SRAM size in elements."""
    m = sram_bytes / elem_bytes
    b_c = math.ceil(m / (4 * head_dim))
    return min(b_c, head_dim), b_c


def _passes(n_blocks: int, causal: bool) -> float:
    """How many times the re-streamed operand passes: once per outer block, (T + 1) / 2 when causal."""
    return (n_blocks + 1) / 2 if causal else float(n_blocks)


def attention_flops(shape: AttnShape, kernel: str, direction: str) -> float:
    """FLOPs per call: forward 4 n_q n_k d (halved when causal; with sequence parallelism the average over
    the ring); backward 2.5x (flash, recompute included) or 2x (standard)."""
    fwd = 4.0 * shape.n_q * shape.n_k * shape.head_dim * shape.pairs
    if shape.causal:
        fwd /= 2
    if direction == "fwd":
        return fwd
    return fwd * (STANDARD_BWD_OVER_FWD if kernel == "standard" else FLASH_BWD_OVER_FWD)


def flash_cost(shape: AttnShape, kernel: str, direction: str, sram_bytes: float) -> AttnCost:
    """HBM and L2 bytes of one FlashAttention call (fwd or bwd) from its loop order and block sizes."""
    d, e, nq, nk = shape.head_dim, shape.elem_bytes, shape.n_q, shape.n_k
    b_r, b_c = block_sizes(sram_bytes, d, e)
    q, kv = nq * d * e, nk * d * e  # one Q-shaped / one K-shaped tensor, bytes
    stats = nq * STAT_BYTES
    if kernel == "fa1":
        t_c = _passes(math.ceil(nk / b_c), shape.causal)
        # forward: K, V once; Q, O, l, m read and O, l, m written per K/V block. Backward: K, V read, dK, dV
        # written; Q, O, dO, dQ, l, m read and dQ written per K/V block.
        fwd = direction == "fwd"
        tiled = 2 * kv + t_c * (3 * q + 4 * stats) if fwd else 4 * kv + t_c * (5 * q + 2 * stats)
        hbm = tiled
    elif kernel in ("fa2", "fa3"):
        if direction == "fwd":  # Q outer: Q read, O and LSE written once; K, V re-read per query block
            t_r = _passes(math.ceil(nq / b_r), shape.causal)
            tiled = 2 * q + stats + t_r * 2 * kv
            hbm = 2 * q + stats + 2 * kv
        else:  # D = rowsum(dO * O) pre-pass; K/V-block outer loop re-reads Q, dO and accumulates dQ in FP32
            t_c = _passes(math.ceil(nk / b_c), shape.causal)
            pre = 2 * q + stats
            tiled = pre + 4 * kv + t_c * (2 * q + 2 * stats + 2 * nq * d * 4)
            hbm = pre + 4 * kv + 3 * q + 2 * stats  # Q, dO, LSE, D read; dQ, dK, dV written
    else:
        raise ValueError(f"flash_cost: kernel '{kernel}' is not a FlashAttention kernel")
    pairs = shape.pairs
    return AttnCost(hbm * pairs, tiled * pairs, attention_flops(shape, kernel, direction), 1)


def standard_cost(shape: AttnShape, direction: str) -> AttnCost:
    """HBM bytes of unfused attention: every n_q x n_k intermediate goes through HBM.

    Forward: S = QK^T written; fused scale+mask+softmax reads S, writes P; dropout reads P, writes P' and
    the mask; P'V reads P'. Backward: dV = P'^T dO reads P'; dP' = dO V^T written; dropout backward reads
    dP' and the mask, writes dP; softmax backward reads dP and P, writes dS; dQ = dS K and dK = dS^T Q each
    read dS. Q/K/V/O-shaped reads and writes are counted per matmul.
    """
    e, nq, nk, d = shape.elem_bytes, shape.n_q, shape.n_k, shape.head_dim
    s = nq * nk * e  # one score matrix, bytes
    mask = nq * nk * MASK_BYTES if shape.dropout else 0.0
    q, kv = nq * d * e, nk * d * e
    if direction == "fwd":
        drop = 2 * s + mask if shape.dropout else 0.0
        scores = s + 2 * s + drop + s  # write S; softmax r/w; dropout r/w + mask; PV reads P'
        vecs = q + kv + kv + q  # QK^T reads Q, K; PV reads V, writes O
        launches = 4 if shape.dropout else 3
    else:
        drop = 2 * s + mask if shape.dropout else 0.0
        scores = s + s + drop + 3 * s + 2 * s  # dV reads P'; dP' written; dropout bwd; softmax bwd; dQ, dK
        vecs = (q + kv) + (q + kv) + (kv + q) + (kv + q)  # dO->dV; dO,V->dP; K->dQ; Q->dK (reads and writes)
        launches = 6 if shape.dropout else 5
    total = (scores + vecs) * shape.pairs
    return AttnCost(total, total, attention_flops(shape, "standard", direction), launches)


def attention_cost(shape: AttnShape, kernel: str, direction: str, sram_bytes: float) -> AttnCost:
    """Cost of one attention call with the named kernel ('fa1', 'fa2', 'fa3' or 'standard')."""
    if kernel not in KERNELS:
        raise ValueError(f"attention kernel '{kernel}' unknown; use one of: {', '.join(KERNELS)}")
    if direction not in ("fwd", "bwd"):
        raise ValueError(f"direction '{direction}' unknown; use fwd or bwd")
    if kernel == "standard":
        return standard_cost(shape, direction)
    return flash_cost(shape, kernel, direction, sram_bytes)
