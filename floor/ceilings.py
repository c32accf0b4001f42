"""Attainable ceilings: the best measured rate per GPU, resource, dtype and shape class (data/ceilings.toml).

The stop rule's floor. `t_opt` is computed at physical peaks and stays the lower bound; the "attainable
floor" is the same resource count at these rates, the fastest any real kernel or collective has been measured
at. A step within the near-floor threshold of it is as fast as the best known kernels make it, so the verdict
is to stop tuning kernels. Callers (the decode/prefill floor, the training step, per-op floors from trace
shapes) ask `ceiling(gpu, resource, dtype, shape)` or `attainable_s(...)`; a resource without a measured
row keeps the physical peak and says so (`Ceiling.measured` is False).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import ConfigError
from .hardware import GpuSpec, get_gpu

#: what a ceiling can bound: compute (gemm, attention), memory (hbm) and links (scaleup, nvls, scaleout)
RESOURCES = ("gemm", "attention", "hbm", "scaleup", "nvls", "scaleout")
_COMPUTE = ("gemm", "attention")
_DTYPES = ("", "bf16", "fp8", "fp4")
CEILINGS_FILE = "data/ceilings.toml"


@dataclass(frozen=True)
class Ceiling:
    """One attainable rate. rate_per_s: FLOP/s for gemm/attention, bytes/s otherwise; peak_per_s: the physical
    peak it is measured against; measured: False where no measurement exists and the physical peak stands in."""

    gpu: str
    resource: str
    dtype: str
    shape: str
    rate_per_s: float
    peak_per_s: float
    source: str
    measured: bool

    @property
    def fraction_of_peak(self) -> float:
        return self.rate_per_s / self.peak_per_s

    def to_dict(self) -> dict[str, object]:
        return {"gpu": self.gpu, "resource": self.resource, "dtype": self.dtype, "shape": self.shape,
                "rate_per_s": self.rate_per_s, "fraction_of_peak": round(self.fraction_of_peak, 4),
                "source": self.source, "measured": self.measured}


def physical_peak(gpu: GpuSpec, resource: str, dtype: str = "bf16") -> float:
    """The catalog's physical peak for a resource (FP8/FP4 fall back as GpuSpec.peak_flops_per_s does)."""
    if resource in _COMPUTE:
        return gpu.peak_flops_per_s(dtype or "bf16")
    if resource == "hbm":
        return gpu.hbm_bytes_per_s
    if resource in ("scaleup", "nvls"):
        return gpu.scaleup_bytes_per_s
    if resource == "scaleout":
        return gpu.scaleout_bytes_per_s
    raise ConfigError(f"unknown ceiling resource '{resource}'; use one of: {', '.join(RESOURCES)}")


@cache
def _table() -> dict[str, list[Ceiling]]:
    return parse_ceilings((resources.files(__package__) / "data" / "ceilings.toml").read_text(encoding="utf-8"))


def parse_ceilings(text: str) -> dict[str, list[Ceiling]]:
    """Rows of a ceilings file by GPU key; a row without a source, of an unknown resource or dtype, or above
    its physical peak is a ConfigError naming the file and the row."""
    out: dict[str, list[Ceiling]] = {}
    for key, rows in tomllib.loads(text).items():
        gpu = get_gpu(key)
        for i, row in enumerate(rows):
            where = f"{CEILINGS_FILE}: [[{key}]] #{i + 1}"
            resource, dtype, shape = row.get("resource", ""), row.get("dtype", ""), row.get("shape", "")
            if resource not in RESOURCES:
                raise ConfigError(f"{where}: resource '{resource}' is not one of {', '.join(RESOURCES)}")
            if dtype not in _DTYPES or (resource in _COMPUTE) != bool(dtype):
                raise ConfigError(f"{where}: dtype '{dtype}' (compute rows need bf16, fp8 or fp4; others none)")
            if not row.get("source"):
                raise ConfigError(f"{where}: no source; every ceiling names its measurement")
            rate, peak = float(row["rate"]), physical_peak(gpu, resource, dtype)
            if not 0 < rate <= peak:
                raise ConfigError(f"{where}: rate {rate:g} is not in (0, the physical peak {peak:g}]")
            out.setdefault(key, []).append(Ceiling(key, resource, dtype, shape, rate, peak, row["source"], True))
    return out


def ceilings(gpu: GpuSpec | str) -> list[Ceiling]:
    """Every measured ceiling of one GPU, in file order."""
    key = gpu if isinstance(gpu, str) else gpu.key
    return list(_table().get(key.lower(), []))


def ceiling(gpu: GpuSpec | str, resource: str, dtype: str = "", shape: str = "") -> Ceiling:
    """The best measured rate of one resource on one GPU.

    Compute: the row of that dtype and shape class, else that dtype for any shape; attention falls back to
    the gemm ceiling of its dtype. Where nothing is measured, the physical peak, with measured False.
    """
    if resource not in RESOURCES:
        raise ConfigError(f"unknown ceiling resource '{resource}'; use one of: {', '.join(RESOURCES)}")
    return _ceiling(get_gpu(gpu) if isinstance(gpu, str) else gpu, resource, dtype, shape)


@cache
def _ceiling(spec: GpuSpec, resource: str, dtype: str, shape: str) -> Ceiling:
    """ceiling() for one (GPU, resource, dtype, shape): a floor looks up the same few dozen times per step, and
    a walls scan computes thousands of floors (the table and the spec are immutable, so the answer is too)."""
    dtype = _effective_dtype(spec, dtype) if resource in _COMPUTE else ""
    rows = [c for c in ceilings(spec) if c.resource == resource and c.dtype == dtype]
    for want in (shape, ""):
        match = [c for c in rows if c.shape == want]
        if match:
            return max(match, key=lambda c: c.rate_per_s)
    if resource == "attention":
        return _ceiling(spec, "gemm", dtype, shape)
    peak = physical_peak(spec, resource, dtype)
    return Ceiling(spec.key, resource, dtype, shape, peak, peak, "no measured ceiling: the physical peak", False)


def _effective_dtype(spec: GpuSpec, dtype: str) -> str:
    """The tensor-core dtype an operand dtype runs at: FP4 without FP4 units at FP8, FP8 without FP8 at BF16,
    anything else (fp16, bf16, "") at BF16, as GpuSpec.peak_flops_per_s times it."""
    if dtype == "fp4" and spec.fp4_flops_per_s <= 0:
        dtype = "fp8"
    if dtype == "fp8" and spec.fp8_flops_per_s <= 0:
        dtype = "bf16"
    return dtype if dtype in ("fp8", "fp4") else "bf16"


def attainable_s(gpu: GpuSpec, *, hbm_bytes: float = 0.0, flops: float = 0.0, flops_dtype: str = "bf16",
                 compute: str = "gemm", shape: str = "", scaleup_bytes: float = 0.0, nvls_bytes: float = 0.0,
                 scaleout_bytes: float = 0.0) -> tuple[float, float, float]:
    """(hbm, compute, network) seconds of one kernel or class at the attainable ceilings: the roofline's
    terms, each at the best measured rate instead of the physical peak."""
    hbm = hbm_bytes / ceiling(gpu, "hbm").rate_per_s if hbm_bytes else 0.0
    comp = flops / ceiling(gpu, compute, flops_dtype, shape).rate_per_s if flops else 0.0
    up = scaleup_bytes / ceiling(gpu, "scaleup").rate_per_s if scaleup_bytes else 0.0
    nv = nvls_bytes / ceiling(gpu, "nvls").rate_per_s if nvls_bytes else 0.0
    out = scaleout_bytes / ceiling(gpu, "scaleout").rate_per_s if scaleout_bytes else 0.0
    return hbm, comp, max(up + nv, out)


def compute_resource(class_name: str) -> str:
    """Which compute ceiling a kernel class runs against: attention kernels their own, the rest the GEMM's."""
    return "attention" if class_name == "attn_core" else "gemm"


def ceilings_used(gpu: GpuSpec, uses: list[tuple[str, str]]) -> list[dict[str, object]]:
    """The measured ceilings behind a set of (resource, dtype) lookups, each once, for the report."""
    seen: dict[tuple[str, str, str], dict[str, object]] = {}
    for resource, dtype in uses:
        c = ceiling(gpu, resource, dtype)
        if c.measured:
            seen.setdefault((c.resource, c.dtype, c.shape), c.to_dict())
    return list(seen.values())


def scale_to_ceilings(gpu: GpuSpec, class_name: str, hbm_ns: int, compute_ns: int, flops_dtype: str
                      ) -> tuple[int, int]:
    """(hbm, compute) ns of a class already timed at physical peaks, rescaled to the attainable ceilings
    (the training step, whose parts are built as times)."""
    hbm = ceiling(gpu, "hbm")
    comp = ceiling(gpu, compute_resource(class_name), flops_dtype)
    return round(hbm_ns / hbm.fraction_of_peak), round(compute_ns / comp.fraction_of_peak)
