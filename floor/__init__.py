"""tracekit.floor: the two-sided analytical floor of an LLM serving step (standard library only).

Build the floor first: a step is a per-GPU resource vector (HBM bytes, FLOPs, network bytes and messages,
KV capacity) summed over kernel classes; t_opt = max of the resource times, t_sum = their sum, both at
physical peaks, so t_opt is a lower bound no real step beats. Configs load from TOML paths.
"""

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
