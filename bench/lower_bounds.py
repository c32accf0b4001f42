"""Regenerate docs/lower-bounds.md: the floor against published measurements, each at its own operating point.

Run: ``.venv/bin/python bench/lower_bounds.py [--out docs/lower-bounds.md]`` (a few seconds). Every row is one
published (or, where marked, this project's own) measurement: a serving step or throughput, a class of
kernels, or one kernel. The floor's t_opt (or the class budget) must not be above it; tests/test_lower_bounds.py
asserts that for every row. Figures come from shared/facts/floor-facts.md and the sources named per row;
"secondary" marks a figure not from its primary source, "(D)" a time derived from a published rate.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.files import write_atomically
from tracekit.floor import ClassPart, compute_floor, get_gpu, get_model
from tracekit.floor.decode import FP8_DISPATCH_BYTES, RawPart, route_collective
from tracekit.floor.efficiency import KernelWork, kernel_time
from tracekit.floor.roofline import class_times
from tracekit.floor.walls import frontier

MS, US = 1e6, 1e3


@dataclass(frozen=True)
class Bound:
    """The floor at a measurement's operating point: t_opt (or the class budget) and t_sum, in ns."""

    t_opt_ns: float
    t_sum_ns: float


@dataclass(frozen=True)
class Measurement:
    """One published measurement and how the floor is evaluated at its operating point."""

    key: str
    what: str
    level: str  # step | throughput | class | kernel
    model: str
    gpu: str
    layout: str
    batch: str
    context: str
    tokens_per_step: str
    source: str
    measured_ns: float
    measured_note: str
    floor: Callable[[], Bound]
    secondary: bool = False


def _step(name: str, **sets: object) -> Bound:
    r = compute_floor(load_config(name, {k: str(v) for k, v in sets.items()}))
    return Bound(r.t_opt_ns, r.t_sum_ns)


def _per_token(name: str, **sets: object) -> Bound:
    """GPU-time per token of one step: step time x GPUs / tokens per step (prefill, training)."""
    r = compute_floor(load_config(name, {k: str(v) for k, v in sets.items()}))
    k = r.config.n_gpus / r.tokens_per_step
    return Bound(r.t_opt_ns * k, r.t_sum_ns * k)


def _best_per_token(name: str, **sets: object) -> Bound:
    """GPU-time per output token at the floor's best throughput over every batch that fits (a throughput
    figure gives no batch: the floor's most favourable one is taken)."""
    cfg = load_config(name, {k: str(v) for k, v in {"batch": 1, **sets}.items()})
    best = max(frontier(cfg, points=48), key=lambda p: p.tokens_per_s_per_gpu)
    k = 1e9 / best.tokens_per_s_per_gpu / best.t_opt_ns
    return Bound(best.t_opt_ns * k, best.t_sum_ns * k)


def _part(p: ClassPart) -> Bound:
    return Bound(p.floor_ns, p.hbm_ns + p.compute_ns + p.net_ns)


def _one_layer_attn(model: str, gpu: str, batch: int, context: int, kv: str, tokens_per_step: int = 1,
                    phase: str = "decode", **dims: int) -> Bound:
    """The attn_core class budget of one layer (the model cut to one dense layer)."""
    m = replace(get_model(model), n_layers=1, n_dense_layers=0, n_routed_experts=0, **dims)
    base = load_config("qwen3-8b-tp1-h100", {"hardware": gpu, "batch": "1", "context_tokens": "1"})
    cfg = replace(base, model=m, batch=batch, context_tokens=context, kv_format=kv, tokens_per_step=tokens_per_step,
                  phase=phase, weight_dtype="bf16", reserve_per_gpu_bytes=0)
    return _part(next(p for p in compute_floor(cfg).parts if p.name == "attn_core"))


def _gemm_fp8(gpu: str, m: int, n: int, k: int) -> Bound:
    """One FP8 GEMM: 2mnk FLOPs at the FP8 peak; A and B read once in FP8, D written in BF16."""
    t = kernel_time(get_gpu(gpu), KernelWork(2.0 * m * n * k, m * k + n * k + 2.0 * m * n, dtype="fp8"), False)
    return Bound(t.time_s * 1e9, (t.compute_s + t.hbm_s) * 1e9)


def _collective(gpu: str, kind: str, size: float, n: int, top_k: int = 1, groups: tuple[int, int] = (0, 0)) -> Bound:
    """One collective among n GPUs at line rate (NVLS where the GPU has it and it is faster), as the floor's
    class parts count it; groups: (n_group, topk_group) of group-limited routing."""
    cfg = replace(load_config("qwen3-8b-tp1-h100", {"batch": "1", "context_tokens": "1"}), hardware=get_gpu(gpu))
    nvls = 1.0 if cfg.hardware.nvls_efficiency else 0.0
    intra, nvls, inter = route_collective(kind, size, n, cfg.hardware.gpus_per_node, nvls, top_k, groups)
    raw = RawPart(kind, net_intra_bytes=intra, net_nvls_bytes=nvls, net_inter_bytes=inter, net_messages=1)
    net_s = class_times(raw, cfg, achievable=False)[2]
    return Bound(net_s * 1e9, net_s * 1e9)


def _device_class(cls: str) -> Bound:
    """A class budget at the operating point of this project's H200 capture (bench/device/results)."""
    r = compute_floor(load_config("qwen3-8b-tp1-h100", {"hardware": "h200", "batch": "64", "context_tokens": "2052"}))
    rules = load_rules()
    t_sum = sum(p.hbm_ns + p.compute_ns + p.net_ns for p in r.parts if p.name in rules.floor_parts[cls])
    return Bound(class_budgets(r.parts, rules)[cls], t_sum)


DS_DAY6 = ("deepseek-ai/open-infra-index 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_"
           "overview.md, statistics section")
LMSYS_96 = "LMSYS blog 2025-05-05 \"large-scale EP\" (SGLang on 96 H100), results section"
LMSYS_ANT = "LMSYS blog 2025-09-26 \"SGLang x Ant Group\" (DeepSeek-R1 on H20-96G), introduction"
TRTLLM = ("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @00f3768, Llama 3.3 70B table "
          "(ISL/OSL 1000/1000)")
FLASHMLA = "deepseek-ai/FlashMLA README (H800 SXM5, CUDA 12.8)"
DEEPGEMM = "deepseek-ai/DeepGEMM README (2025-02), Performance: Normal GEMMs for dense models (H800, NVCC 12.8)"
DEEPEP = ("deepseek-ai/DeepEP README, Performance: Low-latency kernels with pure RDMA (H800, CX7 400 Gb/s; 128 "
          "tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine)")
DEEPEP_NORMAL = ("deepseek-ai/DeepEP README, Performance: Normal kernels with NVLink and RDMA forwarding (H800, "
                 "CX7 400 Gb/s; 4096 tokens, hidden 7168, top-4 groups, top-8, FP8 dispatch); bytes as "
                 "tests/test_internode.py counts them")
LMSYS_GB200 = ("LMSYS blog 2025-09 \"Deploying DeepSeek on GB200 NVL72 with PD and large scale EP (Part II)\", "
               "FP8 attention + NVFP4 MoE, 2000-token inputs")
DEVICE = "this project: bench/device/results/report_b64_p2048.json (H200, docs/device-check.md)"


def _deepseek_decode_batch(tok_per_s_per_user: float) -> int:
    """open-infra-index day 6: ~14.8k output tok/s per node at that speed per user -> requests in flight per
    GPU by Little's law (1850 tok/s/GPU x TPOT), x 144 GPUs."""
    return round(14_800 / 8 / tok_per_s_per_user) * 144


SERVING = [
    Measurement("dsv3-h800-decode", "DeepSeek-V3/R1 production decode step (TPOT at 22 tok/s per user)", "step",
                "deepseek-v3", "h800", "EP144 + DP-attention 144", f"{_deepseek_decode_batch(22)}", "4989", "1 (?)",
                DS_DAY6, 1e9 / 22, "TPOT = 1 / 22 tok/s (D)",
                lambda: _step("dsv3-ep144-h800", batch=_deepseek_decode_batch(22), context_tokens=4989)),
    Measurement("dsv3-h800-prefill", "DeepSeek-V3/R1 production prefill, computed prompt tokens", "throughput",
                "deepseek-v3", "h800", "EP32 + DP-attention 32", "32", "4989", "-", DS_DAY6,
                1e9 * 8 / (73_700 * (1 - 0.563)), "GPU-time per token: 73.7k tok/s/node less 56.3 % cache hits (D)",
                lambda: _per_token("dsv3-ep144-h800", n_gpus=32, tp=32, dp_attention=32, ep=32, phase="prefill",
                                   batch=32, context_tokens=4989)),
    Measurement("ant-h20-decode", "DeepSeek-R1 decode on 16 H20 (5.7k output tok/s per node)", "throughput",
                "deepseek-v3", "h20", "EP16 + DP-attention 16", "floor's best", "4096", "1 (?)", LMSYS_ANT,
                1e9 * 8 / 5_700, "GPU-time per output token (D)",
                lambda: _best_per_token("dsv32-ep16", model="deepseek-v3", context_tokens=4096)),
    Measurement("ant-h20-prefill", "DeepSeek-R1 prefill on one H20 node (16.5k input tok/s)", "throughput",
                "deepseek-v3", "h20", "TP8", "1", "4096", "-", LMSYS_ANT, 1e9 * 8 / 16_500,
                "GPU-time per prompt token (D)",
                lambda: _per_token("dsv32-tp16", model="deepseek-v3", n_gpus=8, tp=8, phase="prefill", batch=1,
                                   context_tokens=4096)),
    Measurement("sglang-h100-decode", "DeepSeek-V3 decode, SGLang on H100 (22.3k output tok/s per node)",
                "throughput", "deepseek-v3", "h100", "EP72 + DP-attention 72 (decode GPUs assumed)", "floor's best",
                "2000", "1 (?)", LMSYS_96, 1e9 * 8 / 22_300, "GPU-time per output token (D)",
                lambda: _best_per_token("dsv3-ep144-h800", hardware="h100", n_gpus=72, tp=72, dp_attention=72,
                                        ep=72, context_tokens=2000)),
    Measurement("sglang-gb200-decode", "DeepSeek-V3 decode, SGLang on GB200 NVL72 (13,386 output tok/s per GPU)",
                "throughput", "deepseek-v3", "gb200", "EP48 + DP-attention 48 (decode GPUs of part I assumed)",
                "floor's best", "2000", "1 (?)", LMSYS_GB200, 1e9 / 13_386, "GPU-time per output token (D)",
                lambda: _best_per_token("dsv3-ep48-gb200")),
    Measurement("sglang-h100-prefill", "DeepSeek-V3 prefill, SGLang on 4 H100 nodes (50,302 tok/s per node)",
                "throughput", "deepseek-v3", "h100", "EP32 + DP-attention 32", "32", "4096", "-", LMSYS_96,
                1e9 * 8 / 50_302, "GPU-time per prompt token (D)",
                lambda: _per_token("dsv3-ep144-h800", hardware="h100", n_gpus=32, tp=32, dp_attention=32, ep=32,
                                   phase="prefill", batch=32, context_tokens=4096)),
    Measurement("sglang-h100-prefill-2k", "DeepSeek-V3 prefill, SGLang on H100 (52.3k input tok/s per node)",
                "throughput", "deepseek-v3", "h100", "EP32 + DP-attention 32", "32", "2000", "-", LMSYS_96,
                1e9 * 8 / 52_300, "GPU-time per prompt token (D)",
                lambda: _per_token("dsv3-ep144-h800", hardware="h100", n_gpus=32, tp=32, dp_attention=32, ep=32,
                                   phase="prefill", batch=32, context_tokens=2000)),
    Measurement("llama70b-h100-tp2", "Llama 3.3 70B FP8, TensorRT-LLM offline throughput (4,205 tok/s)",
                "throughput", "llama3-70b", "h100", "TP2", "floor's best", "1500", "1", TRTLLM, 1e9 * 2 / 4_205,
                "GPU-time per output token; prefill included in the measurement (D)",
                lambda: _best_per_token("llama3-70b-tp8-h100", n_gpus=2, tp=2, weight_dtype="fp8", kv_format="fp8",
                                        context_tokens=1500)),
    Measurement("llama70b-h200-tp1", "Llama 3.3 70B FP8, TensorRT-LLM offline throughput (2,909 tok/s)",
                "throughput", "llama3-70b", "h200", "TP1", "floor's best", "1500", "1", TRTLLM, 1e9 / 2_909,
                "GPU-time per output token; prefill included in the measurement (D)",
                lambda: _best_per_token("llama3-70b-tp8-h100", hardware="h200", n_gpus=1, tp=1, weight_dtype="fp8",
                                        kv_format="fp8", context_tokens=1500)),
    Measurement("r1-h200-tp8", "DeepSeek-R1 FP8, SGLang TP8, concurrency 4, 1k/8k: mean TPOT 10.9 ms", "step",
                "deepseek-v3", "h200", "TP8", "4", "5120", "1 (?)",
                "SemiAnalysisAI/InferenceX#870 (a CI bot's report; floor-facts.md section 6.4)", 10.9 * MS,
                "mean TPOT",
                lambda: _step("dsv32-tp16", model="deepseek-v3", hardware="h200", n_gpus=8, tp=8, kv_format="bf16",
                              batch=4, context_tokens=5120), secondary=True),
    Measurement("gpt2s-a100-train", "GPT-2 small training step, FlashAttention, 8x A100", "step", "gpt2-small",
                "a100", "DP8", "512 x 1024", "1024", "-", "FlashAttention paper (arXiv 2205.14135) Table 2",
                583 * MS, "2.7 days / 400k steps (D, floor-facts.md 6.1)", lambda: _step("gpt2-small-dp8-a100")),
    Measurement("gpt2m-a100-train", "GPT-2 medium training step, FlashAttention, 8x A100", "step", "gpt2-medium",
                "a100", "DP8", "512 x 1024", "1024", "-", "FlashAttention paper (arXiv 2205.14135) Table 2",
                1490 * MS, "6.9 days / 400k steps (D, floor-facts.md 6.1)", lambda: _step("gpt2-medium-dp8-a100")),
]

_MLA_DENSE_BYTES = 64 * 8192 * 576 * 2  # 64 requests x 8192 tokens of BF16 latent (512 + 64) read once
_MLA_SPARSE_FLOPS = 128 * 2 * 2048 * 2 * 128 * (2 * 512 + 64)  # bs 128, s_q 2, top-k 2048, 128 heads, MQA mode
_FA3_FLOPS = 4 * 16384**2 * 128 * 16 / 2  # 16k tokens, 16 heads of 128, causal: 4 s^2 d h / 2
_DISPATCH = 128 * 8 * 7168 * FP8_DISPATCH_BYTES  # all one rank sends: 128 tokens x top-8 x hidden, FP8 + scales
_COMBINE = 128 * 8 * 7168 * 2.0  # the same in BF16
_NVLS_H800 = 8 * 2**30  # the comment gives no size; busbw is flat at large sizes and the floor has no latency
_NODES_TOUCHED = 4 * (1 - (3 / 4) ** 8)  # distinct nodes among top-8 experts in 4 of 8 node groups (D)
_H200_COPY = 2 * 2**31  # a 2 GiB device-to-device copy reads and writes 2 GiB

KERNELS = [
    Measurement("flashmla-dense", "FlashMLA dense decode, memory-bound (3000 GB/s), one layer", "class",
                "deepseek-v3", "h800", "1 GPU", "64", "8192", "1", FLASHMLA, _MLA_DENSE_BYTES / 3000e9 * 1e9,
                "BF16 latent bytes / 3000 GB/s (D)",
                lambda: _one_layer_attn("deepseek-v3", "h800", 64, 8192, "bf16")),
    Measurement("flashmla-sparse-fp8", "FlashMLA FP8 sparse decode (410 TFLOP/s), one layer, s_q 2", "class",
                "deepseek-v3.2", "h800", "1 GPU", "128", "8192", "2", FLASHMLA + ", FP8 sparse decoding",
                _MLA_SPARSE_FLOPS / 410e12 * 1e9, "MQA-mode FLOPs / 410 TFLOP/s (D)",
                lambda: _one_layer_attn("deepseek-v3.2", "h800", 128, 8192, "fp8_ds_mla", tokens_per_step=2)),
    Measurement("fa3-h100", "FlashAttention-3 forward, FP16 (740 TFLOP/s), one layer, causal", "class", "qwen3-8b",
                "h100", "1 GPU", "1", "16384", "-", "FlashAttention-3 paper (arXiv 2407.08608) section 4.1",
                _FA3_FLOPS / 740e12 * 1e9, "FLOPs / 740 TFLOP/s (D)",
                lambda: _one_layer_attn("qwen3-8b", "h100", 1, 16384, "bf16", phase="prefill", d_model=2048,
                                        n_heads=16, n_kv_heads=16, head_dim=128)),
    Measurement("deepgemm-m64", "DeepGEMM FP8 GEMM M=64 N=7168 K=16384 (336 TFLOP/s)", "kernel", "-", "h800",
                "1 GPU", "M=64", "-", "-", DEEPGEMM, 2 * 64 * 7168 * 16384 / 336e12 * 1e9, "2MNK / 336 TFLOP/s (D)",
                lambda: _gemm_fp8("h800", 64, 7168, 16384)),
    Measurement("deepgemm-m4096", "DeepGEMM FP8 GEMM M=4096 N=7168 K=16384 (1358 TFLOP/s)", "kernel", "-", "h800",
                "1 GPU", "M=4096", "-", "-", DEEPGEMM, 2 * 4096 * 7168 * 16384 / 1358e12 * 1e9,
                "2MNK / 1358 TFLOP/s (D)", lambda: _gemm_fp8("h800", 4096, 7168, 16384)),
    Measurement("nccl-h200-allreduce", "NCCL all-reduce, 8x H200, 4 GiB, busbw 475 GB/s", "kernel", "-", "h200",
                "8 GPUs, NVSwitch", "-", "-", "-", "NVIDIA/nccl-tests#272 (all_reduce_perf, 64 KiB to 4 GiB)",
                2**32 * 2 * 7 / 8 / 475e9 * 1e9, "S x 2(n-1)/n / busbw (D)",
                lambda: _collective("h200", "allreduce", 2**32, 8)),
    Measurement("deepep-dispatch-ep8", "DeepEP low-latency dispatch, EP8 (77 us)", "kernel", "deepseek-v3", "h800",
                "EP8, 1 node", "128 tokens/rank", "-", "-", DEEPEP, 77 * US, "published latency",
                lambda: _collective("h800", "a2a", _DISPATCH, 8, 8)),
    Measurement("deepep-combine-ep8", "DeepEP low-latency combine, EP8 (114 us)", "kernel", "deepseek-v3", "h800",
                "EP8, 1 node", "128 tokens/rank", "-", "-", DEEPEP, 114 * US, "published latency",
                lambda: _collective("h800", "a2a", _COMBINE, 8, 8)),
    Measurement("deepep-dispatch-ep16", "DeepEP low-latency dispatch, EP16 (118 us)", "kernel", "deepseek-v3",
                "h800", "EP16, 2 nodes", "128 tokens/rank", "-", "-", DEEPEP, 118 * US, "published latency",
                lambda: _collective("h800", "a2a", _DISPATCH, 16, 8)),
    Measurement("deepep-combine-ep16", "DeepEP low-latency combine, EP16 (195 us)", "kernel", "deepseek-v3", "h800",
                "EP16, 2 nodes", "128 tokens/rank", "-", "-", DEEPEP, 195 * US, "published latency",
                lambda: _collective("h800", "a2a", _COMBINE, 16, 8)),
    Measurement("nccl-h800-nvls", "NCCL NVLS all-reduce, 8x H800, busbw 215 GB/s", "kernel", "-", "h800",
                "8 GPUs, NVSwitch", "-", "-", "-", "NVIDIA/nccl#1374 (comment of 2024-07-24: 8x H800, NVLS)",
                _NVLS_H800 * 2 * 7 / 8 / 215e9 * 1e9, "S x 2(n-1)/n / busbw at S = 8 GiB (D; the ratio holds at any S)",
                lambda: _collective("h800", "allreduce", _NVLS_H800, 8)),
    Measurement("deepep-normal-dispatch-ep64", "DeepEP normal dispatch, EP64 (51 GB/s RDMA)", "kernel", "deepseek-v3",
                "h800", "EP64, 8 nodes", "4096 tokens/rank", "-", "-", DEEPEP_NORMAL,
                4096 * _NODES_TOUCHED * 7168 * FP8_DISPATCH_BYTES / 51e9 * 1e9,
                "tokens x nodes touched (4 (1 - (3/4)^8) = 3.60, local node included, as the test counts) x "
                "7168 x (1 + 4/128) B / 51 GB/s (D)",
                lambda: _collective("h800", "a2a", 4096 * 8 * 7168 * FP8_DISPATCH_BYTES, 64, 8, (8, 4))),
    Measurement("h200-attn-core", "cuDNN SDPA decode attention, Qwen3-8B shape, per step", "class", "qwen3-8b",
                "h200", "1 GPU", "64", "2052", "1", DEVICE, 4_716_348, "attn_core measured_ns",
                lambda: _device_class("attn_core")),
    Measurement("h200-gemm", "cuBLAS GEMMs, Qwen3-8B shape, per step", "class", "qwen3-8b", "h200", "1 GPU", "64",
                "2052", "1", DEVICE, 4_324_702, "gemm measured_ns", lambda: _device_class("gemm")),
    Measurement("h200-copy", "2 GiB device-to-device copy (4.25 TB/s read + write)", "kernel", "-", "h200", "1 GPU",
                "-", "-", "-", "this project: bench/device/results/copy_bandwidth.json",
                _H200_COPY / 4_253_264_795_948.8545 * 1e9, "bytes read + written / measured rate (D)",
                lambda: Bound(_H200_COPY / get_gpu("h200").hbm_bytes_per_s * 1e9,
                              _H200_COPY / get_gpu("h200").hbm_bytes_per_s * 1e9)),
]
MEASUREMENTS = SERVING + KERNELS


def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def rows() -> list[tuple[Measurement, Bound]]:
    """Every measurement with the floor at its operating point."""
    return [(m, m.floor()) for m in MEASUREMENTS]


def document(evaluated: list[tuple[Measurement, Bound]]) -> str:
    """docs/lower-bounds.md."""
    worst = max(b.t_opt_ns / m.measured_ns for m, b in evaluated)
    lines = [
        "# The floor against published measurements",
        "",
        "Generated by `bench/lower_bounds.py`; do not edit by hand. Each row is one measurement at its own",
        "operating point, and the floor evaluated there at physical peaks (spec-sheet HBM bandwidth, dense",
        "tensor FLOP/s at the operand dtype, link line rate, one physical link hop per collective; no",
        "efficiency factors).",
        "`t_opt` must not be above the measurement (for a class or kernel row, `t_opt` is the class budget",
        "or the kernel's roofline floor); `tests/test_lower_bounds.py` asserts it for every row.",
        "",
        "- level `step`: a measured step (or TPOT) against the floor's step at that batch and context;",
        "- level `throughput`: a published throughput as GPU-time per token (GPUs / tokens per second) against",
        "  the floor's at the same context; where no batch is published, the floor's best batch is taken;",
        "- level `class` / `kernel`: one kernel class or one kernel, its time derived from the published rate;",
        "- `(D)`: a time derived here from a published figure; `(?)`: a setting the source does not state;",
        "  `secondary`: not the primary source, kept out of `shared/facts` as a fact.",
        "",
        f"Rows: {len(evaluated)}. Largest t_opt / measured: {worst:.2f} (it must stay at or under 1).",
        "",
        "| measurement | level | model | GPU | layout | batch | context | tokens/step | source | measured |"
        " t_opt | t_sum | t_opt / measured | t_sum / measured |",
        "|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for m, b in evaluated:
        src = m.source + (" (secondary)" if m.secondary else "")
        lines.append(
            f"| {m.what} | {m.level} | {m.model} | {m.gpu} | {m.layout} | {m.batch} | {m.context} | "
            f"{m.tokens_per_step} | {src} | {_fmt_ns(m.measured_ns)} ({m.measured_note}) | {_fmt_ns(b.t_opt_ns)} | "
            f"{_fmt_ns(b.t_sum_ns)} | {b.t_opt_ns / m.measured_ns:.2f} | {b.t_sum_ns / m.measured_ns:.2f} |")
    lines += [
        "",
        "Reading the ratios: `t_opt / measured` is the fraction of the hardware's physical limit the measured",
        "system reaches on its binding resource (kernel rows: 0.8-0.9 for tuned memory-bound kernels,",
        "0.4-0.7 for compute-bound ones). A `t_sum / measured` above 1 means the measurement overlapped",
        "resources that the no-overlap bound adds. Throughput rows with the floor's best batch are the",
        "loosest comparisons: the measurement ran at a batch the source does not give.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "lower-bounds.md")
    args = parser.parse_args()
    write_atomically(args.out, document(rows()))
    print(args.out)


if __name__ == "__main__":
    main()
