"""tracekit.floor: the two-sided analytical floor of an LLM serving step (standard library only).

Build the floor first: a step is a per-GPU resource vector (HBM bytes, FLOPs, network bytes and messages,
KV capacity) summed over kernel classes; t_opt = max of the resource times, t_sum = their sum.
"""

from .config import DeploymentConfig, list_configs, load_config
from .decode import CLASS_NAMES
from .errors import ConfigError
from .hardware import GpuSpec, get_gpu, gpu_names
from .models import ModelSpec, get_model, model_names
from .moe import expected_distinct_experts
from .roofline import ClassPart, FloorResult, Placement, compute_floor, place_measured
from .units import format_ns, parse_duration_ns
from .walls import Crossover, SloResult, Wall, WallsResult, compute_walls, crossover, frontier, slo_reach

__all__ = [
    "CLASS_NAMES",
    "ClassPart",
    "ConfigError",
    "Crossover",
    "DeploymentConfig",
    "FloorResult",
    "GpuSpec",
    "ModelSpec",
    "Placement",
    "SloResult",
    "Wall",
    "WallsResult",
    "compute_floor",
    "compute_walls",
    "crossover",
    "expected_distinct_experts",
    "format_ns",
    "frontier",
    "get_gpu",
    "get_model",
    "gpu_names",
    "list_configs",
    "load_config",
    "model_names",
    "parse_duration_ns",
    "place_measured",
    "slo_reach",
]
