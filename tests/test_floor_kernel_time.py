"""One kernel's time from its work: the roofline max at physical peaks, Calculon's sum when calibrated."""

from __future__ import annotations

import pytest

from tracekit.floor.efficiency import KernelWork, kernel_time
from tracekit.floor.hardware import get_gpu

A100 = get_gpu("a100")
GEMM = KernelWork(flops=2 * 8192**3, hbm_bytes=3 * 8192**2 * 2)  # 1.1 TFLOP, 403 MB: compute-bound


def test_physical_peaks_take_the_roofline_max() -> None:
    t = kernel_time(A100, GEMM, achievable=False)
    assert t.compute_s == pytest.approx(GEMM.flops / 312e12)
    assert t.hbm_s == pytest.approx(GEMM.hbm_bytes / 2.039e12)
    assert t.bound == "compute" and t.time_s == t.compute_s


def test_achievable_peaks_add_compute_and_memory_as_calculon_calibrates() -> None:
    t = kernel_time(A100, GEMM)
    assert not A100.compute_memory_overlap
    assert t.compute_s == pytest.approx(GEMM.flops / (312e12 * 0.95))  # >= 128 GFLOP: 0.95 of peak
    assert t.hbm_s == pytest.approx(GEMM.hbm_bytes / (2.039e12 * 0.8) + 3e-6)  # derate plus one memory latency
    assert t.time_s == pytest.approx(t.compute_s + t.hbm_s) and t.bound == "compute"


def test_shared_memory_binds_where_its_bandwidth_is_sourced() -> None:
    work = KernelWork(flops=1e9, hbm_bytes=1e6, smem_bytes=1e12)  # A100 SRAM: 19 TB/s (FlashAttention paper)
    t = kernel_time(A100, work, achievable=False)
    assert t.smem_s == pytest.approx(1e12 / 19e12) and t.bound == "smem" and t.time_s == t.smem_s
    assert kernel_time(get_gpu("h100"), work, achievable=False).smem_s == 0.0  # no sourced SMEM bandwidth
