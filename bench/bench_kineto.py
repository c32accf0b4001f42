"""Benchmark: Kineto (PyTorch profiler) JSON ingest time and peak memory, tracekit vs HTA.

Generates a synthetic Kineto trace with a realistic event mix (cpu_op, python_function, cuda_runtime,
cuda_driver, kernel, memcpy/memset, ac2g flows, [memory] instants, ProfilerStep annotations) in a temp
dir, then loads it in a fresh subprocess per tool and reports wall time and peak RSS
(the child's ``ru_maxrss``) beside the JSON size. HTA runs only when ``hta`` is
importable; it is never a dependency of tracekit.

    python bench/bench_kineto.py                 # ~1 GB trace (takes minutes, needs ~4 GB RAM)
    python bench/bench_kineto.py --events 200000 # quick run
    python bench/bench_kineto.py --repeat 2 --profile  # fastest of 2 runs, then where the time goes
    python bench/bench_kineto.py --trace FILE    # a given (real) trace instead of a generated one

HTA reads a folder: a given trace is linked alone into a temporary one for it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

KERNEL_NAMES = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
    "false, false, false, false, true, true, false>(Flash_fwd_params)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "triton_poi_fused_add_mul_rsqrt_0",
)
CPU_OPS = ("aten::add", "aten::mm", "aten::_softmax", "aten::copy_", "aten::empty", "aten::linear")
BYTES_PER_EVENT_ESTIMATE = 227


def write_trace(out: TextIO, n_events: int, seed: int = 0) -> int:
    """Write a Kineto trace of about ``n_events`` events to ``out``; return the number written.

    One launch group is a python_function, a cpu_op, a [memory] instant, a runtime (or driver)
    launch, its ac2g flow pair and the kernel/memcpy/memset it launches (about 230 bytes an event,
    as in real traces); every 500 groups form a ProfilerStep with a CPU annotation and its
    gpu_user_annotation mirror.
    """
    rng = random.Random(seed)
    pid, tid, base_ns = 4242, 4242, 1_700_000_000_000_000_000
    head = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9,
             "computeMinor": 0, "numSms": 132, "regsPerBlock": 65536, "sharedMemPerBlock": 49152}
        ],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "cuda_runtime_version": 12040,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
    }
    out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
    out.write(json.dumps({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                          "args": {"name": "python3"}}))
    written, cpu_ts, gpu_ts, corr, ext, step = 1, 1_000_000.0, 1_000_050.0, 1, 1, 0
    step_cpu_ts, step_gpu_ts = cpu_ts, gpu_ts
    group_events, step_groups = 7, 500
    while written + group_events + 2 <= n_events:
        if corr % step_groups == 0:
            out.write(
                f',\n{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": {pid}, '
                f'"tid": {tid}, "ts": {step_cpu_ts:.3f}, "dur": {cpu_ts - step_cpu_ts:.3f}, '
                f'"args": {{"External id": {ext}}}}}'
                f',\n{{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#{step}", "pid": 0, '
                f'"tid": 7, "ts": {step_gpu_ts:.3f}, "dur": {gpu_ts - step_gpu_ts:.3f}, '
                f'"args": {{"External id": {ext}}}}}'
            )
            step, ext, written = step + 1, ext + 1, written + 2
            step_cpu_ts, step_gpu_ts = cpu_ts, gpu_ts
        op = rng.choice(CPU_OPS)
        op_dur = rng.uniform(5, 60)
        launch_ts = cpu_ts + op_dur * 0.5
        kind = rng.random()
        gpu_dur = rng.uniform(1, 80)
        gpu_ts = max(gpu_ts, launch_ts + 5) + rng.uniform(0, 3)
        out.write(
            f',\n{{"ph": "X", "cat": "python_function", "name": "model.py({100 + corr % 50}): forward", '
            f'"pid": {pid}, "tid": {tid}, "ts": {cpu_ts - 1:.3f}, "dur": {op_dur + 2:.3f}, '
            f'"args": {{"Python parent id": {corr}, "Python id": {corr + 1}, "Ev Idx": {ext}}}}}'
            f',\n{{"ph": "X", "cat": "cpu_op", "name": "{op}", "pid": {pid}, "tid": {tid}, '
            f'"ts": {cpu_ts:.3f}, "dur": {op_dur:.3f}, "args": {{"External id": {ext}, '
            f'"Record function id": 0, "Input Dims": [[4096, 4096], [4096, 4096]], '
            f'"Input type": ["c10::BFloat16", "c10::BFloat16"], "Ev Idx": {ext}}}}}'
            f',\n{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {pid}, '
            f'"tid": {tid}, "ts": {cpu_ts + 1:.3f}, "args": {{"Total Reserved": 2629828608, '
            f'"Total Allocated": 1003059712, "Bytes": 18317312, "Device Id": 0, "Device Type": 1}}}}'
        )
        if kind < 0.85:
            cat, name, api_cat, api = "kernel", rng.choice(KERNEL_NAMES), "cuda_runtime", "cudaLaunchKernel"
            if kind < 0.2:
                api_cat, api = "cuda_driver", "cuLaunchKernelEx"
            extra = (
                f'"registers per thread": 32, "shared memory": 0, "blocks per SM": 1.5, '
                f'"warps per SM": 6.0, "grid": [{rng.randint(1, 4096)}, 1, 1], "block": [128, 1, 1], '
                f'"est. achieved occupancy %": 9'
            )
        elif kind < 0.95:
            cat, name, api_cat, api = "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", "cuda_runtime", \
                "cudaMemcpyAsync"
            extra = f'"bytes": {rng.randint(4, 1 << 24)}, "memory bandwidth (GB/s)": 20.5'
        else:
            cat, name, api_cat, api = "gpu_memset", "Memset (Device)", "cuda_runtime", "cudaMemsetAsync"
            extra = f'"bytes": {rng.randint(4, 1 << 20)}, "memory bandwidth (GB/s)": 100.25'
        out.write(
            f',\n{{"ph": "X", "cat": "{api_cat}", "name": "{api}", "pid": {pid}, "tid": {tid}, '
            f'"ts": {launch_ts:.3f}, "dur": 4.125, "args": {{"External id": {ext}, "cbid": 211, '
            f'"correlation": {corr}}}}}'
            f',\n{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {launch_ts:.3f}, '
            f'"cat": "ac2g", "name": "ac2g"}}'
            f',\n{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {gpu_ts:.3f}, "cat": "ac2g", '
            f'"name": "ac2g", "bp": "e"}}'
            f',\n{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": 7, "ts": {gpu_ts:.3f}, '
            f'"dur": {gpu_dur:.3f}, "args": {{"External id": {ext}, "queued": 0, "device": 0, '
            f'"context": 1, "stream": 7, "correlation": {corr}, {extra}}}}}'
        )
        written += group_events
        gpu_ts += gpu_dur
        cpu_ts += op_dur + rng.uniform(1, 10)
        corr, ext = corr + 1, ext + 1
    out.write("\n]}\n")
    return written


def generate(path: Path, n_events: int) -> int:
    """Write the synthetic trace to ``path`` (gzip when it ends in .gz); return its event count."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as out:
        return write_trace(out, n_events)


TRACEKIT_CHILD = """
import cProfile, pstats, sys, time, duckdb
from pathlib import Path
from tracekit.parsers import schema
from tracekit.parsers.kineto import read_kineto
con = duckdb.connect(sys.argv[2])  # a database file, as the store's cache uses
schema.create_tables(con)
profile = cProfile.Profile() if sys.argv[3:] == ["profile"] else None
t0 = time.perf_counter()
if profile:
    profile.enable()
read_kineto(Path(sys.argv[1]), con)
if profile:
    profile.disable()
elapsed_s = time.perf_counter() - t0
rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in schema.EVENT_TABLES)
print(f"{elapsed_s:.3f} {rows}")
if profile:  # the functions with the most time of their own: where the reader spends it
    stats = pstats.Stats(profile).sort_stats("tottime")
    for (path, line, name), (_, _, own_s, _, _) in sorted(stats.stats.items(), key=lambda i: -i[1][2])[:8]:
        where = "/".join(Path(path).parts[-2:]) if path != "~" else "builtin"
        print(f"{own_s:.2f} s  {where}:{line}({name})", file=sys.stderr)
"""

HTA_CHILD = """
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
print(f"{time.perf_counter() - t0:.3f} -")
"""


def measure(code: str, *args: str, python: str = sys.executable) -> tuple[float, str, int, str]:
    """Run ``code`` in a fresh interpreter; return (its reported seconds, detail, peak RSS in bytes, stderr).

    The peak is that child's own ``ru_maxrss`` (``os.wait4``): ``getrusage(RUSAGE_CHILDREN)`` would
    report the maximum over every child waited for so far, hiding a smaller second measurement.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, "-c", code, *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"child failed: {err.read().strip().splitlines()[-1:]}")
        seconds, detail = out.read().strip().splitlines()[-1].split()  # the last line: what a reader prints goes first
        return float(seconds), detail, usage.ru_maxrss * 1024, err.read()  # Linux reports KiB


def measure_tracekit(path: Path, tmp: Path, repeat: int) -> tuple[list[float], str, int]:
    """Ingest ``path`` ``repeat`` times, each into a new store file; (seconds per run, rows, largest peak)."""
    runs: list[float] = []
    peak, rows = 0, ""
    for i in range(repeat):
        seconds, rows, run_peak, _ = measure(TRACEKIT_CHILD, str(path), str(tmp / f"store{i}.duckdb"))
        runs.append(seconds)
        peak = max(peak, run_peak)
    return runs, rows, peak


def main(argv: list[str] | None = None) -> None:
    """Generate the trace, then report tracekit's (and HTA's, if installed) ingest time and peak RSS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000_000 // BYTES_PER_EVENT_ESTIMATE,
                        help="number of trace events (default: about 1 GB of JSON)")
    parser.add_argument("--gzip", action="store_true", help="write the trace as .json.gz")
    parser.add_argument("--keep", type=Path, help="write the trace into this folder and keep it")
    parser.add_argument("--trace", type=Path, help="measure this trace file instead of generating one")
    parser.add_argument("--repeat", type=int, default=1, help="tracekit runs (fastest reported, with the spread)")
    parser.add_argument("--profile", action="store_true",
                        help="one more tracekit run under cProfile: the functions with the most own time")
    parser.add_argument("--hta-python", default=sys.executable,
                        help="interpreter of an environment with HTA installed (default: this one)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        if args.trace:
            path = folder / args.trace.name
            path.symlink_to(args.trace.resolve())
            n = None
        else:
            path = folder / ("synthetic.pt.trace.json" + (".gz" if args.gzip else ""))
            n = generate(path, args.events)
        json_bytes = path.stat().st_size
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as g:
                json_bytes = sum(len(chunk) for chunk in iter(lambda: g.read(1 << 24), b""))
        made = f"{args.trace}" if n is None else f"generated {n:,} events in {time.perf_counter() - t0:.1f} s"
        print(f"{made}: {json_bytes / 1e6:,.1f} MB of JSON ({path.stat().st_size / 1e6:,.1f} MB on disk)")

        runs, rows, peak = measure_tracekit(path, Path(tmp), max(1, args.repeat))
        spread = f" (fastest of {len(runs)}: {', '.join(f'{r:.2f}' for r in runs)} s)" if len(runs) > 1 else ""
        print(f"tracekit: {min(runs):.2f} s{spread}, peak RSS {peak / 1e6:,.0f} MB = {peak / json_bytes:.2f}x JSON, "
              f"{int(rows):,} rows")
        if args.profile:
            seconds, _, _, top = measure(TRACEKIT_CHILD, str(path), str(Path(tmp) / "profiled.duckdb"), "profile")
            print(f"tracekit under cProfile: {seconds:.2f} s; most own time:\n{top.rstrip()}")
        has_hta = subprocess.run([args.hta_python, "-c", "import hta"], capture_output=True, check=False)
        if has_hta.returncode != 0:
            print("hta: not importable, skipped (pip install HolisticTraceAnalysis elsewhere; --hta-python)")
            return
        seconds, _, hta_peak, _ = measure(HTA_CHILD, str(folder), python=args.hta_python)
        print(f"hta: {seconds:.2f} s, peak RSS {hta_peak / 1e6:,.0f} MB = {hta_peak / json_bytes:.2f}x JSON")
        print(f"tracekit vs hta: {seconds / min(runs):.1f}x faster, {peak / hta_peak:.2f} of its peak memory")


if __name__ == "__main__":
    main()
