"""GPU catalog: physical peaks and achievable (calibrated) values, loaded from data/gpus.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import ConfigError


@dataclass(frozen=True)
class GpuSpec:
    """One GPU. Physical peaks are spec-sheet numbers; the achievable ones are empirical derates."""

    key: str
    name: str
    bf16_flops_per_s: float
    fp8_flops_per_s: float
    hbm_bytes: float
    hbm_bytes_per_s: float
    scaleup_bytes_per_s: float
    scaleup_achievable_bytes_per_s: float
    scaleout_bytes_per_s: float
    gpus_per_node: int
    hbm_efficiency: float
    net_latency_ns: float
    compute_efficiency_gflop: tuple[tuple[float, float], ...]
    nvlink_hop_ns: float = 0.0  # physical one-hop latency inside the NVLink domain (the latency chain)
    net_hop_ns: float = 0.0  # physical one-hop latency across nodes
    fp4_flops_per_s: float = 0.0  # dense FP4 (NVFP4/MXFP4 operands); 0 where there are no FP4 tensor cores
    nvls_efficiency: float = 0.0  # NVLink SHARP in-switch all-reduce; 0 where the node has none
    compute_memory_overlap: bool = True  # False: a kernel's achievable compute and memory times add (Calculon)

    def peak_flops_per_s(self, dtype: str) -> float:
        """Physical dense tensor peak for a GEMM dtype; FP4 falls back to FP8 and FP8 to BF16 where there is no
        such unit (the operands then run at the next wider rate)."""
        if dtype == "fp4" and self.fp4_flops_per_s > 0:
            return self.fp4_flops_per_s
        if dtype in ("fp8", "fp4") and self.fp8_flops_per_s > 0:
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s

    def compute_efficiency(self, kernel_flops: float) -> float:
        """Achievable fraction of peak for one kernel of this size (Calculon-style step table)."""
        gflop = kernel_flops / 1e9
        for threshold, eff in self.compute_efficiency_gflop:
            if gflop >= threshold:
                return eff
        return self.compute_efficiency_gflop[-1][1]

    @property
    def ridge_bf16_flops_per_byte(self) -> float:
        """Ridge point I_ridge = BF16 dense peak / HBM bandwidth."""
        return self.bf16_flops_per_s / self.hbm_bytes_per_s

    @property
    def ridge_fp8_flops_per_byte(self) -> float:
        """Ridge point at the FP8 peak (BF16 peak where there is no FP8)."""
        return self.peak_flops_per_s("fp8") / self.hbm_bytes_per_s


_FIELDS = {
    "name": str,
    "bf16_flops_per_s": float,
    "fp8_flops_per_s": float,
    "hbm_bytes": float,
    "hbm_bytes_per_s": float,
    "scaleup_bytes_per_s": float,
    "scaleup_achievable_bytes_per_s": float,
    "scaleout_bytes_per_s": float,
    "gpus_per_node": int,
}


@cache
def _catalog() -> dict[str, GpuSpec]:
    text = (resources.files(__package__) / "data" / "gpus.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    derates = raw.pop("derates")
    out: dict[str, GpuSpec] = {}
    for key, row in raw.items():
        merged = {**derates, **row}
        kwargs = {}
        for field, typ in _FIELDS.items():
            if field not in merged:
                raise ConfigError(f"data/gpus.toml: [{key}] lacks '{field}'; add it with its source")
            kwargs[field] = typ(merged[field])
        table = tuple(
            sorted(((float(t), float(e)) for t, e in merged["compute_efficiency_gflop"]), reverse=True)
        )
        out[key] = GpuSpec(
            key=key,
            hbm_efficiency=float(merged["hbm_efficiency"]),
            net_latency_ns=float(merged["net_latency_ns"]),
            compute_efficiency_gflop=table,
            nvls_efficiency=float(merged.get("nvls_efficiency", 0.0)),
            fp4_flops_per_s=float(merged.get("fp4_flops_per_s", 0.0)),
            nvlink_hop_ns=float(merged["nvlink_hop_ns"]),
            net_hop_ns=float(merged["net_hop_ns"]),
            compute_memory_overlap=bool(merged.get("compute_memory_overlap", True)),
            **kwargs,
        )
    return out


@cache
def gpu_identities() -> dict[str, dict[str, object]]:
    """Catalog key -> how that GPU shows itself to a profiler (data/gpu_identity.toml, the same keys as
    data/gpus.toml): vendor, whole-word tokens of its device name, and the properties a runtime reports."""
    return tomllib.loads((resources.files(__package__) / "data" / "gpu_identity.toml").read_text(encoding="utf-8"))


def gpu_names() -> list[str]:
    """Catalog keys, sorted."""
    return sorted(_catalog())


def get_gpu(key: str) -> GpuSpec:
    """Look up a GPU by catalog key (e.g. 'h100')."""
    try:
        return _catalog()[key.lower()]
    except KeyError:
        raise ConfigError(f"unknown hardware '{key}'; use one of: {', '.join(gpu_names())}") from None
