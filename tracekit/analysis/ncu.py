"""Deep-dive targets: the kernels of over-budget classes, each with a ready-to-run command for the trace's
vendor: ``ncu`` for NVIDIA kernels, ``rocprofv3`` for AMD (HIP) ones (``tracekit.analysis.rocprof``); never an
ncu command for a HIP kernel. docs/deep-dive.md says how each selects one launch.

The kernel is selected by its function name (``--kernel-name-base function``, an anchored and escaped
``regex:``) and ``--launch-skip`` is the number of earlier launches of kernels with that function name in
its process, so ncu profiles the very instance the trace shows in the median step (when the capture began
with the process; a ``late_start`` caveat says when it did not). The full demangled
name cannot be used: ncu's demangler spells templates and lambdas differently from CUPTI's (seen on an
H200 with ncu 2025.3: ``elementwise_kernel<128, 2, ...{lambda()#3}...>`` in the trace is
``elementwise_kernel<(int)128, (int)2, ...[lambda() (instance 3)]...>`` to ncu), so a demangled-name
filter matched nothing. Every argument is shell-quoted: kernel names are untrusted text.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import duckdb

from tracekit.analysis.rocprof import rocprof_command
from tracekit.files import is_display_control

APP_PLACEHOLDER = "<your application command>"
INTERPRETER_REGEX = r"^(python|pypy|ruby|node|perl|bash|sh)[0-9.]*$"


def capture_command(con: duckdb.DuckDBPyConnection) -> str | None:
    """The profiled application's command line when the capture recorded it, re-quoted token by token
    (the recorded text is untrusted: it is never pasted into a shell as it stands)."""
    rows = con.execute("""
        SELECT capture_command FROM trace_info WHERE capture_command IS NOT NULL AND capture_command <> ''
        ORDER BY rank LIMIT 1
    """).fetchall()
    if not rows:
        return None
    try:
        tokens = shlex.split(rows[0][0])
    except ValueError:
        return None
    if not tokens or (len(tokens) == 1 and re.match(INTERPRETER_REGEX, tokens[0].rsplit("/", 1)[-1])):
        return None  # a bare interpreter (the process name, not its script): ncu would run an interactive shell
    return shlex.join(tokens)


MAX_NAME_CHARS = 8192  # longer names are matched by head and tail: one shell argument must stay < 128 KiB


def _escape(text: str) -> str:
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 32 or 127 <= ord(ch) < 160
                   else f"\\u{ord(ch):04x}" if is_display_control(ch) else re.escape(ch) for ch in text)


def _name_regex(kernel: str) -> str:
    """Anchored regex matching exactly the name ``kernel``; control characters as \\xHH so the line stays
    printable.

    A name over MAX_NAME_CHARS is matched by its first and last MAX_NAME_CHARS/2 characters with anything
    between: execve refuses a single argument over 128 KiB, so the full regex could not run at all."""
    if len(kernel) <= MAX_NAME_CHARS:
        return f"regex:^{_escape(kernel)}$"
    half = MAX_NAME_CHARS // 2
    return f"regex:^{_escape(kernel[:half])}[\\s\\S]*{_escape(kernel[-half:])}$"


def ncu_command(function: str, launch_skip: int, out_name: str, in_graph: bool, app: str | None) -> str:
    """One safely quoted ncu command line profiling launch ``launch_skip`` of kernels named ``function``."""
    args = ["ncu", "--kernel-name-base", "function", "--kernel-name", _name_regex(function),
            "--launch-skip", str(launch_skip), "--launch-count", "1", "--set", "full"]
    if in_graph:
        args += ["--graph-profiling", "node"]
    args += ["-o", out_name, "--"]
    line = shlex.join(args)
    return f"{line} {app}" if app else f"{line} {shlex.quote(APP_PLACEHOLDER)}"  # quoted: parses, runs nothing


def _safe_file_stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:48].strip("_") or "kernel"


def amd_ranks(con: duckdb.DuckDBPyConnection) -> set[int]:
    """Ranks whose kernels ran on AMD GPUs: an AMD device, or HIP calls launching them."""
    return {int(r[0]) for r in con.execute("""
        SELECT DISTINCT rank FROM devices WHERE lower(vendor) = 'amd'
        UNION SELECT DISTINCT rank FROM api_calls WHERE starts_with(name, 'hip')
    """).fetchall()}


def ncu_targets(con: duckdb.DuckDBPyConnection, results: list[Any], classes: list[dict[str, Any]],
                limit: int) -> list[dict[str, Any]]:
    """Kernels of over-budget classes ranked by their share of the class's excess time, each with the command
    of its vendor's profiler (``tool``: 'ncu' or 'rocprofv3')."""
    over = {c["name"]: c for c in classes if c["over_budget"]}
    if not over:
        return []
    app = capture_command(con)
    amd_ranks_ = amd_ranks(con)
    # Per kernel name: total time in analysed steps, and one representative launch (the first device's
    # median step's, each device's reduced in tracekit.analysis.device).
    time_by_kernel: dict[tuple[str, str], int] = {}
    instance: dict[tuple[str, str], tuple[int, tuple[int, int, bool]]] = {}
    for res in results:
        for key, ns in res.kernel_ns.items():
            if key[0] in over:
                time_by_kernel[key] = time_by_kernel.get(key, 0) + ns
        for key, launch in res.median_launches.items():
            if key[0] in over:
                instance.setdefault(key, (res.rank, launch))
    class_total: dict[str, int] = {}
    for (cls, _), t in time_by_kernel.items():
        class_total[cls] = class_total.get(cls, 0) + t
    targets = []
    for (cls, name), t in time_by_kernel.items():
        if (cls, name) not in instance:
            continue
        excess = int(over[cls]["excess_ns"] * t / class_total[cls]) if class_total[cls] else 0
        rank, (fn_skip, name_skip, in_graph) = instance[(cls, name)]
        amd = rank in amd_ranks_
        targets.append({"kernel": name, "class": cls, "excess_ns": excess, "tool": "rocprofv3" if amd else "ncu",
                        "launch_skip": name_skip if amd else fn_skip, "in_graph": in_graph})
    targets.sort(key=lambda t: -t["excess_ns"])
    targets = targets[:limit]
    function_of = dict(con.execute("SELECT name, fn FROM op_names WHERE NOT is_memop AND NOT via_op "
                                   "AND name IN (SELECT unnest($n))",
                                   {"n": [t["kernel"] for t in targets]}).fetchall())
    for i, t in enumerate(targets):
        out_name = f"tracekit_{i + 1}_{_safe_file_stem(t['class'])}"
        t["function"] = function_of[t["kernel"]]
        if t["tool"] == "ncu":
            t["command"] = ncu_command(t["function"], t["launch_skip"], out_name, t["in_graph"], app)
        else:
            t["command"] = rocprof_command(t["kernel"], t["launch_skip"], out_name,
                                           app or shlex.quote(APP_PLACEHOLDER))
    return targets
