"""tracekit.floor: the two-sided analytical floor of an LLM serving step (standard library only).

Build the floor first: a step is a per-GPU resource vector (HBM bytes, FLOPs, network bytes and messages,
KV capacity) summed over kernel classes; t_opt = max of the resource times, t_sum = their sum, both at
physical peaks, so t_opt is a lower bound no real step beats. Configs load from TOML paths.

Names load with the module that defines them, when first asked for (PEP 562): a caller that needs one
constant, such as the CLI's near-floor threshold, does not load the whole model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ceilings import Ceiling, attainable_s, ceiling, ceilings
    from .config import Resolver, config_names, load_config, parse_sets
    from .deployment import DeploymentConfig
    from .errors import ConfigError
    from .hardware import GpuSpec, get_gpu, gpu_identities, gpu_names
    from .models import ModelSpec, get_model, model_names
    from .moe import expected_distinct_experts
    from .placement import (
        BEATS_CEILING,
        BELOW_FLOOR_TOLERANCE,
        NEAR_FLOOR_THRESHOLD,
        Placement,
        place_bound,
        place_kernel,
        place_measured,
    )
    from .result import CLASS_NAMES, FLOOR_PEAK_KIND, ClassPart, FloorResult
    from .roofline import compute_floor
    from .units import format_ns, parse_duration_ns
    from .walls import Crossover, SloResult, Wall, WallsResult, compute_walls, crossover, frontier, slo_reach

# A function named like its module is bound now: importing the module later would shadow a lazy name.
from .ceilings import ceilings  # noqa: E402

# Each public name and the module of this package that defines it.
_MODULE_OF = {
    "Ceiling": "ceilings",
    "attainable_s": "ceilings",
    "ceiling": "ceilings",
    "Resolver": "config",
    "config_names": "config",
    "load_config": "config",
    "parse_sets": "config",
    "DeploymentConfig": "deployment",
    "ConfigError": "errors",
    "GpuSpec": "hardware",
    "get_gpu": "hardware",
    "gpu_identities": "hardware",
    "gpu_names": "hardware",
    "ModelSpec": "models",
    "get_model": "models",
    "model_names": "models",
    "expected_distinct_experts": "moe",
    "BEATS_CEILING": "placement",
    "BELOW_FLOOR_TOLERANCE": "placement",
    "NEAR_FLOOR_THRESHOLD": "placement",
    "Placement": "placement",
    "place_bound": "placement",
    "place_kernel": "placement",
    "place_measured": "placement",
    "CLASS_NAMES": "result",
    "ClassPart": "result",
    "FLOOR_PEAK_KIND": "result",
    "FloorResult": "result",
    "compute_floor": "roofline",
    "format_ns": "units",
    "parse_duration_ns": "units",
    "Crossover": "walls",
    "SloResult": "walls",
    "Wall": "walls",
    "WallsResult": "walls",
    "compute_walls": "walls",
    "crossover": "walls",
    "frontier": "walls",
    "slo_reach": "walls",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__all__ = [
    "BEATS_CEILING",
    "BELOW_FLOOR_TOLERANCE",
    "Ceiling",
    "CLASS_NAMES",
    "ClassPart",
    "ConfigError",
    "Crossover",
    "DeploymentConfig",
    "FLOOR_PEAK_KIND",
    "FloorResult",
    "GpuSpec",
    "ModelSpec",
    "NEAR_FLOOR_THRESHOLD",
    "Placement",
    "Resolver",
    "SloResult",
    "Wall",
    "WallsResult",
    "attainable_s",
    "ceiling",
    "ceilings",
    "compute_floor",
    "compute_walls",
    "config_names",
    "crossover",
    "expected_distinct_experts",
    "format_ns",
    "frontier",
    "get_gpu",
    "get_model",
    "gpu_identities",
    "gpu_names",
    "load_config",
    "model_names",
    "parse_duration_ns",
    "parse_sets",
    "place_bound",
    "place_kernel",
    "place_measured",
    "slo_reach",
]
