"""`tracekit doctor`: the health of a capture before any number, each finding with the exact flags or engine
options that fix it for the engine that wrote the trace.

The findings are the capture caveats (``tracekit.analysis.caveats.capture_caveats``: what `analyze` lists as
caveats) plus the clock domains of several files; this module adds who wrote the trace (vLLM, SGLang,
TRT-LLM, PyTorch or Nsight Systems), how bad each finding is, and the fix. Options are the engines'
documented ones: vLLM's ``--profiler-config`` (``capture_torch_profiler`` is in vLLM 0.26.0 and later),
SGLang's server arguments and ``SGLANG_*`` variables, TRT-LLM's ``TLLM_*`` variables, torch.profiler's
arguments and ``nsys profile`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from tracekit.analysis.caveats import BLOCKING_CAVEATS, ENGINE_PROCESS_REGEX, Caveat, capture_caveats, caveat_texts
from tracekit.analysis.crossrank import RankMeta
from tracekit.analysis.steps import ENGINE_STEP_PATTERNS
from tracekit.parsers.schema import NO_GPU_ACTIVITY

ENGINES = ("vllm", "sglang", "trtllm", "pytorch", "nsys", "rocprof", "xla")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TRT-LLM", "pytorch": "PyTorch profiler",
                "nsys": "Nsight Systems", "rocprof": "rocprofv3", "xla": "an XLA profiler"}
#: The profiler behind each reader (the caller names the readers: the analysis itself never asks the format).
PROFILER_OF_READER = {"nsys": "nsys", "kineto": "pytorch", "rocpd": "rocprof", "rocprof": "rocprof",
                      "xplane": "xla"}
#: Finding kinds that stop the analysis (exit 2) or leave nothing to judge (the verdict is inconclusive).
UNSUPPORTED = frozenset({"unsupported_device", NO_GPU_ACTIVITY})
BLOCKING = BLOCKING_CAVEATS | {"graph_whole", "no_step_markers", "no_ranges"}
INFORMATIONAL = frozenset({"graph_nodes", "clock_domains"})
NSYS = "nsys profile -t cuda,nvtx,osrt --cuda-graph-trace=node"

# Per finding kind, per engine: the fix (commands and options to copy). 'any' applies to every engine.
FIXES: dict[str, dict[str, list[str]]] = {
    "unsupported_device": {"any": [
        "profile the same model on an NVIDIA (CUDA) or AMD (HIP) GPU: tracekit reads CUDA and HIP kernels, "
        "copies and sets only"]},
    NO_GPU_ACTIVITY: {
        "pytorch": ["torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], ...)"],
        "nsys": [f"{NSYS} -o run -- '<your application command>'"],
        "any": ["profile with GPU activity on (torch.profiler ProfilerActivity.CUDA, or nsys -t cuda)"]},
    "graph_whole": {
        "nsys": [f"{NSYS} ...: --cuda-graph-trace=node traces each kernel of a graph replay"],
        "vllm": ["--enforce-eager (profile without CUDA graphs), or under nsys: --cuda-graph-trace=node"],
        "sglang": ["--disable-cuda-graph (profile without CUDA graphs), or under nsys: --cuda-graph-trace=node"],
        "trtllm": ["under nsys: --cuda-graph-trace=node (TRT-LLM's own template sets it)"],
        "any": ["nsys profile --cuda-graph-trace=node"]},
    "graph_replay_no_capture": {
        "vllm": ["vllm serve ... --profiler-config.profiler torch --profiler-config.torch_profiler_dir DIR "
                 "--profiler-config.capture_torch_profiler True   (vLLM >= 0.26.0: also writes "
                 "DIR/capture_traces/graph_capture_rank_N.*.pt.trace.json.gz while the graphs are captured)",
                 "--profiler-config.detailed_trace_annotation True   (step annotations with token counts)",
                 "keep the capture trace beside the replay trace (TraceLens pairs them by batch size and mode)"],
        "sglang": ["SGLANG_TORCH_PROFILER_DIR=DIR python -m sglang.launch_server ... --enable-profile-cuda-graph   "
                   "(traces the CUDA-graph capture at startup, one trace per batch size)",
                   "keep the capture trace (e.g. capture_traces/bs_32_rank0.json.gz) beside the replay trace of the "
                   "same batch size: the pair ties graph kernels to the ops that captured them"],
        "trtllm": ["no capture-trace option: profile with CUDA graphs off (cuda_graph_config: null in "
                   "--extra_llm_api_options) to see each op's kernels"],
        "pytorch": ["wrap the torch.cuda.graph(...) capture in its own torch.profiler.profile(record_shapes=True, "
                    "with_stack=True) and keep that trace beside the replay trace"],
        "any": ["keep the graph-capture trace beside the replay trace"]},
    "graph_capture_only": {
        "vllm": ["profile the serving loop, not startup: --profiler-config.profiler torch "
                 "--profiler-config.torch_profiler_dir DIR --profiler-config.delay_iterations 10 "
                 "--profiler-config.max_iterations 5, then POST /start_profile and /stop_profile"],
        "sglang": ["profile the serving loop: SGLANG_TORCH_PROFILER_DIR=DIR, then POST /start_profile "
                   "'{\"num_steps\": 5}' while requests run (or bench_serving --profile)"],
        "trtllm": ["TLLM_PROFILE_START_STOP=100-105 TLLM_TORCH_PROFILE_TRACE=trace.json trtllm-serve ..."],
        "any": ["profile the graph replays (the serving or training loop); give the capture trace only beside them"]},
    "late_start": {
        "nsys": ["for exact launch indices capture from process start: drop --capture-range/--delay "
                 f"({NSYS} -o run -- '<your application command>')"],
        "pytorch": ["torch.profiler.profile(schedule=torch.profiler.schedule(wait=0, warmup=0, active=N)) "
                    "started before the first CUDA call"],
        "any": ["an engine's profiler starts after startup by design: for exact ncu launch indices profile the "
                f"same run under nsys from process start ({NSYS} -o run -- '<your server command>')"]},
    "outside_wait": {
        "vllm": ["--profiler-config.max_iterations 5 (several steps): the wait is left out of the step already"],
        "sglang": ["POST /start_profile '{\"num_steps\": 5}' (several steps): the wait is left out already"],
        "any": ["profile from process start, or several steps: the wait is left out of the step already"]},
    "no_ranges": {
        "nsys": [f"{NSYS} --pytorch=autograd-nvtx ... (and an NVTX range per step: torch.cuda.nvtx.range_push)"],
        "trtllm": ["TLLM_LLMAPI_ENABLE_NVTX=1 under nsys -t cuda,nvtx (TRT-LLM's _forward_step range marks steps)"],
        "pytorch": ["call prof.step() once per iteration under a torch.profiler.schedule (ProfilerStep#N)"],
        "any": ["mark each step with an NVTX range or torch.profiler.record_function, then --step REGEX"]},
    "no_step_markers": {
        "pytorch": ["call prof.step() once per iteration under a torch.profiler.schedule (ProfilerStep#N)"],
        "nsys": ["an NVTX range per step (torch.cuda.nvtx.range_push/pop) under nsys -t cuda,nvtx, "
                 "or tracekit analyze --step REGEX over a range that repeats (tracekit info lists them)"],
        "trtllm": ["TLLM_LLMAPI_ENABLE_NVTX=1 under nsys -t cuda,nvtx (TRT-LLM's _forward_step range)"],
        "any": ["tracekit analyze --step REGEX over a range that repeats once per step (tracekit info lists them)"]},
    "unmatched_launch": {
        "nsys": ["nsys profile -t cuda,... (API tracing on), capture range starting before the kernels launch"],
        "any": ["start the profiler between steps (torch.profiler schedule), not inside one"]},
    "dropped_events": {
        "nsys": ["let the process stop the capture cleanly (--capture-range-end=stop) and flush: "
                 "--cuda-flush-interval=100"],
        "vllm": ["POST /stop_profile and wait for the trace to be written before stopping the server"],
        "sglang": ["POST /stop_profile (or let num_steps end the capture) before stopping the server"],
        "pytorch": ["torch.cuda.synchronize() before the profiler stops (prof.stop() / leaving the with block)"],
        "any": ["synchronise the GPU before the profiler stops"]},
    "missing_shapes": {
        "vllm": ["--profiler-config.torch_profiler_record_shapes True"],
        "sglang": ["SGLANG_PROFILE_RECORD_SHAPES=1 (before launching the server)"],
        "trtllm": ["no option: TLLM_TORCH_PROFILE_TRACE's profiler is built in py_executor.py (record_shapes)"],
        "nsys": ["nsys profile --pytorch=autograd-shapes-nvtx"],
        "pytorch": ["torch.profiler.profile(record_shapes=True, ...)"],
        "any": ["record_shapes=True"]},
    "missing_stacks": {
        "vllm": ["--profiler-config.torch_profiler_with_stack True"],
        "sglang": ["SGLANG_PROFILE_WITH_STACK=1 (before launching the server)"],
        "trtllm": ["no option: TLLM_TORCH_PROFILE_TRACE's profiler is built in py_executor.py (with_stack)"],
        "nsys": ["nsys profile --python-backtrace=cuda"],
        "pytorch": ["torch.profiler.profile(with_stack=True, ...)"],
        "any": ["with_stack=True"]},
    "clock_domain": {"any": [
        "nothing to re-capture: tracekit aligns files on their matched collectives (analyze, ranks.clocks); "
        "capture every rank in one run so that enough collectives match"]},
    "clock_domains": {"any": []},
    "graph_nodes": {"any": []},
}


@dataclass
class Finding:
    """One property of the capture: how bad, on which ranks, what it says and how to fix it."""

    kind: str
    severity: str  # 'unsupported' | 'blocking' | 'warning' | 'info'
    text: str
    fix: list[str] = field(default_factory=list)


@dataclass
class Health:
    """The doctor's result: who wrote the trace, what was found, and whether tracekit can read it at all."""

    engine: str
    writer: str  # the engine named for people
    findings: list[Finding]

    @property
    def unsupported(self) -> bool:
        return any(f.severity == "unsupported" for f in self.findings)

    def section(self) -> dict[str, Any]:
        return {"engine": self.engine, "writer": self.writer, "unsupported": self.unsupported,
                "findings": [{"kind": f.kind, "severity": f.severity, "text": f.text, "fix": f.fix}
                             for f in self.findings]}


def engine_of(con: duckdb.DuckDBPyConnection, profilers: set[str]) -> str:
    """Which engine wrote the capture: its process names or step annotations (vLLM, SGLang, TRT-LLM), else
    the profiler that recorded it (``profilers``: from the readers, e.g. ``pytorch``, ``nsys``)."""
    procs = [r[0] for r in con.execute("SELECT DISTINCT name FROM processes WHERE regexp_matches(name, $p)",
                                       {"p": ENGINE_PROCESS_REGEX}).fetchall()]
    for name in procs:
        if name.startswith("VLLM::"):
            return "vllm"
        if name.startswith("sglang::"):
            return "sglang"
        return "trtllm"
    # SGLang first: TraceLens's SGLang traces also carry vLLM-style execute_* annotations.
    for key, engine in (("SGLang", "sglang"), ("TRT-LLM", "trtllm"), ("vLLM", "vllm")):
        if con.execute("SELECT count(*) FROM user_ranges WHERE regexp_matches(name, $p)",
                       {"p": ENGINE_STEP_PATTERNS[key]}).fetchone()[0]:
            return engine
    return min(profilers) if len(profilers) == 1 else "pytorch"


def _severity(kind: str) -> str:
    if kind in UNSUPPORTED:
        return "unsupported"
    if kind in BLOCKING:
        return "blocking"
    return "info" if kind in INFORMATIONAL else "warning"


def fixes(kind: str, engine: str, nsys_capture: bool) -> list[str]:
    """The fix of a finding for ``engine`` (and the nsys flags too when the trace is an Nsight export)."""
    table = FIXES.get(kind, {})
    out = list(table.get(engine) or table.get("any") or [])
    if nsys_capture and engine != "nsys":
        out += [f"(nsys) {f}" for f in table.get("nsys", []) if f"(nsys) {f}" not in out]
    return out


def diagnose(con: duckdb.DuckDBPyConnection, readers: set[str], caveats: list[Caveat] | None = None) -> Health:
    """The capture's findings (its caveats, ranks sharing one joined) with severities and fixes, most severe
    first; plus the clock domains when several files are given. ``readers``: the formats the files were read
    as (the store's files know them), which name the profiler whose flags a fix gives."""
    profilers = {PROFILER_OF_READER.get(r, r) for r in readers}
    engine = engine_of(con, profilers)
    nsys_capture = "nsys" in profilers
    caveats = capture_caveats(con) if caveats is None else caveats
    by_kind: dict[str, list[Caveat]] = {}
    for c in caveats:
        by_kind.setdefault(c.kind, []).append(c)
    unsupported = {c.rank for c in by_kind.get("unsupported_device", [])}
    by_kind = {k: kept for k, group in by_kind.items()  # an unsupported accelerator's rank: only that finding
               if (kept := [c for c in group if k == "unsupported_device" or c.rank not in unsupported])}
    findings = [Finding(kind, _severity(kind), text, fixes(kind, engine, nsys_capture))
                for kind, group in by_kind.items() for text in caveat_texts(group)]
    meta = RankMeta.load(con)
    n_files = len(set(meta.file_of.values()))
    if n_files > 1:
        findings.append(Finding("clock_domains", "info", f"{n_files} input files: {n_files} clock domains; "
                                f"{len(meta.wall_base_ns)} of {len(meta.file_of)} ranks record a wall-clock base; "
                                "analyze aligns them on matched collectives", []))
    order = {"unsupported": 0, "blocking": 1, "warning": 2, "info": 3}
    findings.sort(key=lambda f: order[f.severity])
    return Health(engine, ENGINE_NAMES.get(engine, engine), findings)
