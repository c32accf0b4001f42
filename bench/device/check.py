"""The GPU device check: real captures, tracekit's analysis of them, and tracekit's nominated ncu command run.

For each operating point, qwen3_decode.py runs under the PyTorch profiler and ``tracekit analyze`` reads
the trace against the Qwen3-8B config on an H200. For the first report that nominates Nsight Compute
targets, the commands of its top targets with different function names are run exactly as printed, with
tracekit's application placeholder replaced by the same program with ``--no-profile``. The kernel ncu
profiled is then compared with the launch the trace shows at that ``--launch-skip`` (function, grid,
block). Everything goes to OUT/check.json; bench/device/summary.py turns the results into a document.

Usage: python bench/device/check.py OUT [--no-ncu] [POINT...]   (default: every point in POINTS)
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shlex
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = [sys.executable, str(HERE / "qwen3_decode.py")]
PLACEHOLDER = shlex.quote("<your application command>")
# Operating points, each BATCH,PROMPT[,graphs][,warm][,math]: eager decode is host-bound, CUDA graphs remove
# most launches (warm: each graph also replayed once during set-up, as serving engines do), and unfused
# decode attention (math) makes one kernel class slow.
POINTS = ["8,1024", "64,2048", "8,1024,graphs", "64,2048,graphs", "64,2048,graphs,math", "8,1024,warm",
          "64,2048,warm"]
STEPS = 8
NCU_TARGETS = 2
NCU_METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
               "sm__throughput.avg.pct_of_peak_sustained_elapsed")


def run(cmd: list[str] | str, log: Path, cwd: Path | None = None, shell: bool = False) -> tuple[int, float]:
    """Run ``cmd``, appending its output to ``log``; return (exit status, seconds)."""
    start = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {cmd if shell else shlex.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, cwd=cwd, shell=shell, stdout=f, stderr=subprocess.STDOUT,
                            executable="/bin/bash" if shell else None).returncode
    return rc, time.perf_counter() - start


def analyze(trace: Path, report: Path, batch: int, context: int, log: Path, fmt: str) -> tuple[int, float]:
    return run([sys.executable, "-m", "tracekit", "analyze", str(trace), "--config", "qwen3-8b-tp1-h100",
                "--set", "hardware=h200", "--batch", str(batch), "--context", str(context), "--skip-steps", "1",
                "--format", fmt, "--out", str(report), "--no-cache", "-q"], log)


def function_name(kernel: str) -> str:
    """``std::enable_if<...>::type ns::k<T>(int)`` -> ``k``: every bracket group removed innermost first, then
    the last word's last component (written here apart from tracekit's parser, to check it)."""
    text = kernel.replace("(anonymous namespace)", "anon").replace("{", "(").replace("}", ")")
    while (stripped := re.sub(r"<[^<>()]*>|\([^<>()]*\)", "", text)) != text:
        text = stripped
    return text.strip().rsplit(" ", 1)[-1].rsplit("::", 1)[-1] or kernel


@cache
def trace_events(trace: Path) -> list[dict[str, Any]]:
    """The trace's events, read once per trace."""
    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def trace_launch(trace: Path, function: str, skip: int) -> dict[str, Any] | None:
    """The (skip+1)-th launch of a kernel with this function name in the trace, in launch order."""
    events = trace_events(trace)
    launches = sorted((e for e in events if e.get("cat") == "kernel" and function_name(e.get("name", "")) == function),
                      key=lambda e: (e["args"].get("correlation", 0), e["ts"]))  # graph nodes share one
    if skip >= len(launches):
        return None
    args = launches[skip]["args"]
    return {"name": launches[skip]["name"], "grid": args.get("grid"), "block": args.get("block"),
            "dur_us": launches[skip].get("dur"), "launches_of_function": len(launches)}


def ncu_row(rep: Path, log: Path, base: str) -> dict[str, str] | None:
    """The raw-page row ncu recorded for the profiled kernel, its name printed with ``base``."""
    out = rep.with_name(f"{rep.stem}.{base}.csv")
    cmd = f"ncu --import {shlex.quote(str(rep))} --page raw --csv --print-kernel-base {base} " \
          f"--metrics {NCU_METRICS} > {shlex.quote(str(out))}"
    rc, _ = run(cmd, log, shell=True)
    if rc != 0 or not out.exists():
        return None
    rows = list(csv.DictReader(out.open()))
    return rows[-1] if len(rows) > 1 else None  # rows[0] holds the units


def dims(text: str | None) -> list[int] | None:
    return [int(x) for x in text.strip("()[] ").split(",")] if text else None


def ncu_check(target: dict[str, Any], app: list[str], trace: Path, ncu_dir: Path, log: Path) -> dict[str, Any]:
    """Run the target's ncu command as printed (the placeholder replaced by ``app --no-profile``) and compare
    the kernel it profiled with the launch the trace shows at that ``--launch-skip``."""
    ncu_dir.mkdir(exist_ok=True)
    command = target["command"].replace(PLACEHOLDER, shlex.join(app + ["--no-profile"]))
    check: dict[str, Any] = {k: target[k] for k in ("kernel", "function", "class", "launch_skip", "in_graph")}
    check["command"] = command
    check["rc"], secs = run(command, log, cwd=ncu_dir, shell=True)
    check["seconds"] = round(secs, 1)
    reps = sorted(ncu_dir.glob("*.ncu-rep"))
    row = ncu_row(reps[0], log, "demangled") if reps else None
    function_row = ncu_row(reps[0], log, "function") if reps else None
    expected = trace_launch(trace, target["function"], target["launch_skip"])
    check["trace_launch"] = expected
    check["trace_instance_is_target"] = bool(expected) and expected["name"] == target["kernel"]
    check["profiled"] = bool(row and function_row)
    if row and function_row:
        check["ncu"] = {k: row.get(k) for k in ("Kernel Name", "Grid Size", "Block Size", *NCU_METRICS.split(","))}
        check["function_matches"] = function_row.get("Kernel Name") == target["function"]
        if expected:
            check["grid_matches"] = dims(row.get("Grid Size")) == dims(str(expected["grid"]))
            check["block_matches"] = dims(row.get("Block Size")) == dims(str(expected["block"]))
    else:  # nothing profiled: log what ncu calls the first kernels whose names contain the function's
        run(f"ncu --kernel-name-base demangled --kernel-name regex:{shlex.quote(target['function'])} --launch-count 3 "
            f"--print-kernel-base function --metrics gpu__time_duration.sum -- {shlex.join(app + ['--no-profile'])}",
            log, cwd=ncu_dir, shell=True)
    return check


def graph_launch_us_p50(trace: Path) -> float | None:
    """Median host time of cudaGraphLaunch in the trace (None without graph launches)."""
    events = trace_events(trace)
    durations = sorted(e["dur"] for e in events if e.get("name") == "cudaGraphLaunch" and "dur" in e)
    return durations[len(durations) // 2] if durations else None


def main(out: Path, points: list[str], ncu: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "check.log"
    result: dict[str, Any] = {"points": []}
    target_point = None
    for spec in points:
        batch, prompt, *flags = spec.split(",")
        name = "_".join([f"b{batch}", f"p{prompt}", *flags])
        trace = out / f"qwen3_{name}.pt.trace.json.gz"
        app = APP + ["--batch", batch, "--prompt", prompt, "--steps", str(STEPS)] + \
            (["--graphs"] if "graphs" in flags else []) + (["--warm-graphs"] if "warm" in flags else []) + \
            (["--decode-attention", "math"] if "math" in flags else [])
        rc, secs = run(app + ["--trace", str(trace)], log)
        point: dict[str, Any] = {"name": name, "capture_rc": rc, "capture_s": round(secs, 1)}
        result["points"].append(point)
        if rc != 0:
            continue
        point["trace_bytes"] = trace.stat().st_size
        point["graph_launch_us_p50"] = graph_launch_us_p50(trace)
        report = out / f"report_{name}.json"
        context = int(prompt) + STEPS // 2  # the mean KV length over the decode steps
        point["analyze_rc"], secs = analyze(trace, report, int(batch), context, log, "json")
        point["analyze_s"] = round(secs, 1)
        analyze(trace, out / f"report_{name}.md", int(batch), context, log, "markdown")
        if point["analyze_rc"] not in (0, 10, 11, 12) or not report.exists():
            continue
        doc = json.loads(report.read_text())
        point["verdict"] = doc.get("verdict")
        point["residual_ratio"] = (doc.get("floor") or {}).get("residual_ratio")
        point["ncu_targets"] = len(doc.get("ncu_targets") or [])
        if doc.get("ncu_targets") and target_point is None:  # the top targets of two different functions
            firsts = {t["function"]: t for t in reversed(doc["ncu_targets"])}
            target_point = (sorted(firsts.values(), key=lambda t: -t["excess_ns"])[:NCU_TARGETS], app, trace)
        json.dump(result, (out / "check.json").open("w"), indent=1)
    if target_point and ncu:
        targets, app, trace = target_point
        result["ncu_checks"] = [ncu_check(t, app, trace, out / f"ncu{i}", log) for i, t in enumerate(targets)]
    json.dump(result, (out / "check.json").open("w"), indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    args = sys.argv[2:]
    main(Path(sys.argv[1]), [a for a in args if a != "--no-ncu"] or POINTS, "--no-ncu" not in args)
