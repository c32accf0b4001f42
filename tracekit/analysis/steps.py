"""Step windows on one device's GPU timeline.

Sources, in order: a user regex over range names (``--step``), ``ProfilerStep#N`` annotations, CUDA/HIP
graph launches, else the whole capture as one window. A host-side step range is projected onto the
GPU through the launch calls it contains: step i starts where its first GPU operation starts and
lasts until step i+1's first operation starts (the last step ends with its last operation), so the
idle time between steps is charged to the step before it, as a time-per-output-token measurement
would charge it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np

from tracekit.analysis.ops import DeviceOps
from tracekit.errors import InputError

PROFILER_STEP_REGEX = r"^ProfilerStep#\d+$"


@dataclass(frozen=True)
class StepWindow:
    """One step on one device: [start_ns, end_ns)."""

    index: int
    label: str
    start_ns: int
    end_ns: int

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class StepSource:
    """How steps were found: 'regex', 'profiler_step', 'graph_launch' or 'whole_capture'."""

    kind: str
    detail: str


def step_ranges(con: duckdb.DuckDBPyConnection, rank: int, regex: str) -> list[tuple[int, int, int, str]]:
    """Host ranges of ``rank`` whose name matches ``regex``: (pid, start_ns, end_ns, name), by start."""
    return [tuple(r) for r in con.execute("""
        SELECT pid, start_ns, coalesce(end_ns, start_ns), name FROM ranges
        WHERE rank = ? AND source IN ('nvtx', 'user_annotation') AND regexp_matches(name, ?)
        ORDER BY start_ns
    """, [rank, regex]).fetchall()]


def _tile(starts: np.ndarray, last_end: int, labels: list[str]) -> list[StepWindow]:
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    labels = [labels[i] for i in order]
    ends = np.append(s[1:], last_end)
    return [StepWindow(i, labels[i], int(a), int(b)) for i, (a, b) in enumerate(zip(s, ends, strict=True))
            if b > a]


def _project(ops: DeviceOps, ranges: list[tuple[int, int, int, str]]) -> list[StepWindow]:
    """Project host ranges onto the device through the launches each contains."""
    if not ranges:
        return []
    r_pid = np.array([r[0] for r in ranges], dtype=np.int64)
    r_start = np.array([r[1] for r in ranges], dtype=np.int64)
    r_end = np.array([r[2] for r in ranges], dtype=np.int64)
    has_launch = ops.launch_start_ns >= 0
    idx = np.searchsorted(r_start, ops.launch_start_ns, side="right") - 1
    valid = has_launch & (idx >= 0)
    safe = np.maximum(idx, 0)
    valid &= (ops.launch_start_ns <= r_end[safe]) & (ops.pid == r_pid[safe])
    if not valid.any():
        return []
    return _windows_from_groups(idx[valid], ops.start_ns[valid], ops.end_ns[valid],
                                lambda g: ranges[g][3])


def _windows_from_groups(group: np.ndarray, start: np.ndarray, end: np.ndarray,
                         label: Callable[[int], str]) -> list[StepWindow]:
    """Tile windows from the first start of each group of operations; the last group ends at its last end."""
    keys, inverse = np.unique(group, return_inverse=True)
    first = np.full(keys.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, start)
    last_end = int(end[inverse == keys.size - 1].max())
    return _tile(first, last_end, [label(int(k)) for k in keys])


def _graph_steps(ops: DeviceOps) -> list[StepWindow]:
    """One step per graph launch (the kernels that share one launch call)."""
    graph = ops.in_graph & (ops.launch_start_ns >= 0)
    if not graph.any():
        return []
    launch = ops.launch_start_ns[graph]
    order = {int(v): i for i, v in enumerate(np.unique(launch))}
    return _windows_from_groups(launch, ops.start_ns[graph], ops.end_ns[graph],
                                lambda k: f"graph launch {order[k]}")


def find_steps(con: duckdb.DuckDBPyConnection, ops: DeviceOps, step_regex: str | None) -> tuple[
        list[StepWindow], StepSource]:
    """The step windows of one device, and how they were found."""
    if len(ops) == 0:
        return [], StepSource("whole_capture", "no GPU operations")
    if step_regex:
        windows = _project(ops, step_ranges(con, ops.rank, step_regex))
        if not windows:
            raise InputError(f"--step {step_regex!r}: no range on rank {ops.rank} matches it and contains "
                             "a kernel launch")
        return windows, StepSource("regex", step_regex)
    windows = _project(ops, step_ranges(con, ops.rank, PROFILER_STEP_REGEX))
    if windows:
        return windows, StepSource("profiler_step", "ProfilerStep#N annotations")
    windows = _graph_steps(ops)
    if windows:
        return windows, StepSource("graph_launch", "one step per CUDA/HIP graph launch")
    whole = StepWindow(0, "whole capture", int(ops.start_ns.min()), int(ops.end_ns.max()))
    return [whole], StepSource("whole_capture", "no step markers: the whole capture is one window")
