"""The collective bandwidth the product uses, against published nccl-tests bus bandwidths.

The floor times a collective with ``gpu_collective_s``: the GPU catalog's achievable scale-up bandwidth and
NVLink SHARP efficiency, with NCCL's choice of algorithm (NVLS for an all-reduce on 8 Hopper GPUs, the ring
otherwise). These tests run that very function on the catalog entries, so a catalog value or an algorithm
choice that drifts fails them; no bandwidth or protocol factor is defined here. (tests/test_floor_collectives.py
checks the topology formulas themselves.)

The floor is a lower bound: its bus bandwidth may not fall below what nccl-tests measured (1 % allowed for
how the published figure is read off a plot or rounded), and stays within 5 % above it so budgets stay tight.
Figures (facts section 4): 8x A100 ring all-reduce ~230 GB/s (NVIDIA/nccl-tests#149), 8x H100 ring ~370 GB/s
and NVLS all-reduce ~480 GB/s (NVIDIA/nccl-tests#212), 8x H200 NVLS all-reduce 475 GB/s (NVIDIA/nccl-tests#272).
"""

from __future__ import annotations

import pytest

from tracekit.floor import get_gpu
from tracekit.floor.collectives import bus_factor, gpu_collective_s

GB = 1e9
MESSAGE_BYTES = 4 * GB  # large enough that the per-collective latency is under 0.1 % of the time


@pytest.mark.parametrize(("gpu", "op", "published_gb_per_s"), [
    ("a100", "allreduce", 230), ("a100", "allgather", 230), ("h100", "allgather", 370),
    ("h100", "allreduce", 480), ("h200", "allreduce", 475),
])
def test_product_busbw_matches_nccl_tests(gpu: str, op: str, published_gb_per_s: float) -> None:
    seconds = gpu_collective_s(get_gpu(gpu), op, MESSAGE_BYTES, 8)
    busbw = MESSAGE_BYTES / seconds * bus_factor(op, 8)
    assert 0.99 * published_gb_per_s * GB <= busbw <= 1.05 * published_gb_per_s * GB, busbw / GB
