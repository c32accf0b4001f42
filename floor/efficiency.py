"""Hierarchical roofline of one kernel: compute, HBM, L2 and shared memory, with size-dependent efficiency.

A kernel's time is the largest of its level times, or compute plus the largest memory level where the two
do not overlap: FlashAttention's tile loop (``KernelWork.serial``), and at achievable peaks a GPU whose
catalog entry follows Calculon's ``no_overlap`` calibration. Compute uses the GPU's size-dependent efficiency table
(Calculon-style, data/gpus.toml [derates]); HBM uses the bandwidth derate plus a constant latency per memory
operation (aiconfigurator `mem_empirical_constant_latency: 3 us`, floor-facts.md section 8), so small kernels
do not reach peak either. L2 and shared-memory levels are timed only where data/gpus.toml gives a sourced
bandwidth; otherwise their bytes are reported and not timed.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .hardware import GpuSpec

#: aiconfigurator systems/*.yaml `mem_empirical_constant_latency`: charged once per kernel when achievable.
MEM_LATENCY_S = 3e-6
LEVELS = ("compute", "hbm", "l2", "smem")


@dataclass(frozen=True)
class Hierarchy:
    """On-chip memory of one GPU (0 = not in the catalog): SMs, shared memory per SM, L2 and bandwidths."""

    sms: int
    smem_per_sm_bytes: float
    l2_bytes: float
    smem_bytes_per_s: float
    l2_bytes_per_s: float


@cache
def _rows() -> dict[str, dict]:
    text = (resources.files(__package__) / "data" / "gpus.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def hierarchy(gpu: GpuSpec) -> Hierarchy:
    """The memory hierarchy of a catalog GPU (fields absent from data/gpus.toml read as 0)."""
    row = _rows().get(gpu.key, {})
    return Hierarchy(
        sms=int(row.get("sms", 0)),
        smem_per_sm_bytes=float(row.get("smem_per_sm_bytes", 0.0)),
        l2_bytes=float(row.get("l2_bytes", 0.0)),
        smem_bytes_per_s=float(row.get("smem_bytes_per_s", 0.0)),
        l2_bytes_per_s=float(row.get("l2_bytes_per_s", 0.0)),
    )


@dataclass(frozen=True)
class KernelWork:
    """What a group of identical launches does: FLOPs, bytes at each level, dtype of its math, launches.
    serial: the kernel loads, computes and stores tile by tile without overlapping them (the FlashAttention
    time model t = t_HBM-load + t_GEMM + t_HBM-store of issue 6 / Optimus), so its time is the sum of levels."""

    flops: float = 0.0
    hbm_bytes: float = 0.0
    l2_bytes: float = 0.0
    smem_bytes: float = 0.0
    dtype: str = "bf16"
    launches: int = 1
    serial: bool = False


@dataclass(frozen=True)
class KernelTime:
    """Seconds at each level; the kernel takes the largest (its binding level)."""

    compute_s: float
    hbm_s: float
    l2_s: float
    smem_s: float
    serial: bool = False

    @property
    def time_s(self) -> float:
        if self.serial:
            return self.compute_s + max(self.hbm_s, self.l2_s, self.smem_s)
        return max(self.compute_s, self.hbm_s, self.l2_s, self.smem_s)

    @property
    def bound(self) -> str:
        times = dict(zip(LEVELS, (self.compute_s, self.hbm_s, self.l2_s, self.smem_s), strict=True))
        return max(times, key=lambda k: times[k])


def kernel_time(gpu: GpuSpec, work: KernelWork, achievable: bool = True) -> KernelTime:
    """Level times of `work` on `gpu`: achievable (derated, size-dependent) or physical peaks. At achievable
    peaks on a GPU whose catalog entry says compute and memory do not overlap (Calculon's calibration mode),
    the kernel's time is their sum; its ``bound`` is still the larger level."""
    launches = max(work.launches, 1)
    eff = gpu.compute_efficiency(work.flops / launches) if achievable else 1.0
    compute = work.flops / (gpu.peak_flops_per_s(work.dtype) * eff) if work.flops else 0.0
    hbm_bw = gpu.hbm_bytes_per_s * (gpu.hbm_efficiency if achievable else 1.0)
    hbm = work.hbm_bytes / hbm_bw + (launches * MEM_LATENCY_S if achievable and work.hbm_bytes else 0.0)
    h = hierarchy(gpu)
    l2 = work.l2_bytes / h.l2_bytes_per_s if h.l2_bytes_per_s else 0.0
    smem = work.smem_bytes / h.smem_bytes_per_s if h.smem_bytes_per_s else 0.0
    serial = work.serial or (achievable and not gpu.compute_memory_overlap)
    return KernelTime(compute, hbm, l2, smem, serial)
