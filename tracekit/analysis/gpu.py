"""One GPU identity: which catalog GPU ran the capture, found one way for every analysis that needs it.

The trace's devices (their name, vendor, SM/CU count, memory, compute capability; whatever the format) are
matched against ``floor.gpu_identities()`` (``floor/data/gpu_identity.toml``, one entry per catalog GPU): by
name where the trace gives one, else by properties (ROCm traces leave the name blank). The fit check, the
network table and the op budgets all take ``identify``'s answer, with a config's hardware taking precedence
where one is given (``gpu_spec``). How to add a GPU: docs/adding-a-gpu.md.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

import duckdb

from tracekit import floor
from tracekit.floor import gpu_identities

MEMORY_TOLERANCE = 0.05  # reported memory within 5% of the identity's counts as the same GPU
NVIDIA_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "rtx", "gtx"})
AMD_WORDS = frozenset({"amd", "instinct", "radeon"})


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


@dataclass(frozen=True)
class TraceGpu:
    """What the trace says about the GPUs that ran its kernels, and the catalog GPU that is (None: unknown)."""

    names: tuple[str, ...]
    vendor: str | None
    sm_count: int | None
    memory_bytes: int | None
    compute: str | None
    key: str | None
    evidence: str  # 'name', 'properties' or '' (not identified)
    contradictions: tuple[str, ...] = ()

    def describe(self) -> str:
        props = [f"{self.sm_count} {'CUs' if self.vendor == 'amd' else 'SMs'}" if self.sm_count else "",
                 f"{self.memory_bytes / 2**30:.0f} GiB" if self.memory_bytes else "",
                 f"compute {self.compute}" if self.compute else ""]
        head = ", ".join(self.names) or (f"an unnamed {self.vendor.upper()} GPU" if self.vendor else "an unnamed GPU")
        return f"{head} ({', '.join(p for p in props if p)})" if any(props) else head


def identify(con: duckdb.DuckDBPyConnection) -> TraceGpu:
    """The GPU of the capture: properties of the devices that ran kernels (else of every listed device)."""
    rows = con.execute("""
        WITH props AS (SELECT * FROM used_devices WHERE sm_count IS NOT NULL OR nullif(trim(name), '') IS NOT NULL)
        SELECT nullif(trim(name), ''), vendor, sm_count, memory_bytes, compute_major, compute_minor FROM props
        UNION ALL
        SELECT nullif(trim(name), ''), vendor, sm_count, memory_bytes, compute_major, compute_minor FROM devices
        WHERE NOT EXISTS (SELECT 1 FROM props) AND (sm_count IS NOT NULL OR nullif(trim(name), '') IS NOT NULL)
    """).fetchall()
    vendors = {str(r[0]).lower() for r in con.execute("SELECT DISTINCT vendor FROM devices WHERE vendor IS NOT NULL")
               .fetchall()}
    names = tuple(sorted({r[0] for r in rows if r[0]}))
    vendor = next(iter(vendors)) if len(vendors) == 1 else None

    def common(i: int) -> Any:
        values = [r[i] for r in rows if r[i] is not None]
        return statistics.mode(values) if values else None

    major, minor = common(4), common(5)
    compute = f"{major}.{minor}" if major is not None and minor is not None else None
    sm_count, memory = common(2), common(3)
    key, evidence = _identify(names, vendor, sm_count, memory, compute)
    contradictions = _contradictions(names, vendor, key if evidence == "name" else None, sm_count)
    return TraceGpu(names, vendor, sm_count, memory, compute, key, evidence, tuple(contradictions))


def _identify(names: tuple[str, ...], vendor: str | None, sm_count: int | None, memory: int | None,
              compute: str | None) -> tuple[str | None, str]:
    """(catalog key, evidence): by name when the trace names one model, else by matching properties."""
    ids = gpu_identities()
    if names:
        keys = {k for n in names for k, i in ids.items() if _tokens(n) & set(i["names"])}
        return (keys.pop(), "name") if len(keys) == 1 and len(names) == 1 else (None, "")
    if sm_count is None:
        return None, ""
    fits = [k for k, i in ids.items() if i.get("sm_count") == sm_count
            and (vendor is None or i["vendor"] == vendor)
            and (compute is None or i.get("compute") in (None, compute))
            and (memory is None or "memory_gib" not in i
                 or abs(memory / 2**30 - i["memory_gib"]) <= MEMORY_TOLERANCE * i["memory_gib"])]
    return (fits[0], "properties") if len(fits) == 1 else (None, "")


def _contradictions(names: tuple[str, ...], vendor: str | None, named_key: str | None,
                    sm_count: int | None) -> list[str]:
    """Device information that disagrees with itself: a brand in the name against the vendor of the trace's
    runtime, or an SM/CU count the named GPU does not have."""
    out = []
    for n in names:
        brand = ("nvidia" if _tokens(n) & NVIDIA_WORDS else "amd" if _tokens(n) & AMD_WORDS else None)
        if brand and vendor and brand != vendor:
            out.append(f"the device name '{n}' is an {brand.upper()} GPU but the trace was recorded by the "
                       f"{vendor.upper()} runtime: its device information contradicts itself, so the hardware "
                       "check trusts neither")
    expected = gpu_identities().get(named_key or "", {}).get("sm_count")
    if expected and sm_count and expected != sm_count:
        out.append(f"the device is named {named_key} but reports {sm_count} SMs/CUs ({named_key} has {expected}): "
                   "a partitioned or misreported device")
    return out


def gpu_spec(hardware_key: str | None, gpu: TraceGpu) -> floor.GpuSpec | None:
    """The catalog GPU to price the capture at: the config's hardware when given, else the identified one."""
    key = hardware_key or gpu.key
    return floor.get_gpu(key) if key else None
