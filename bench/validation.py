"""Regenerate docs/validation.md: each published figure, tracekit's figure and the error, from the rows below.

Run: ``.venv/bin/python bench/validation.py [--out docs/validation.md]`` (a few seconds). tests/test_validation.py
asserts every tested row from the same `rows()`: within its tolerance, or, for a row with a stated gap, still
outside it (a strict xfail, so a gap that closes must be taken out of GAPS and the doc regenerated).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from tracekit.budgets.configs import load_config
from tracekit.files import write_atomically
from tracekit.floor import get_gpu
from tracekit.floor.collectives import collective_time, gpu_collective_s, gpu_topology
from tracekit.floor.flash import AttnShape, attention_cost
from tracekit.floor.training import predict_training

A100_SRAM = 192 * 1024
GIB = 2**30
TRAIN_TOLERANCE = 0.15  # issue 19: every measured training row within 15 %
#: issue 25: Megatron and Llama 3 8K rows within 10 %, Llama 3 128K within 15 %; the rest keep issue 19's 15 %
TIGHT_TOLERANCE = 0.10
FLASH_SPEEDUP_TOLERANCE = 0.08  # issue 25: GPT-2 FlashAttention speedups within 8 %


def train_tolerance(config: str) -> float:
    """The tolerance of one measured training row."""
    tight = config.startswith("megatron-gpt-") or config.startswith("llama3-405b-8k-")
    return TIGHT_TOLERANCE if tight else TRAIN_TOLERANCE


@dataclass(frozen=True)
class Row:
    """One comparison. error = tracekit / published - 1 of `compared` (step time for training rows)."""

    section: str
    figure: str
    source: str
    published: float
    tracekit: float
    tolerance: float | None  # None: shown, not tested
    error: float
    kind: str = "measured"
    gap: str = ""  # why a tested row misses its tolerance (stated, not tuned away)
    config: str = ""


@dataclass(frozen=True)
class Run:
    """A measured training run at its published layout (a named config) and its primary source."""

    config: str
    figure: str
    source: str
    published: float
    unit: str  # "TFLOP/s" (the paper's per-GPU model FLOP rate), "GPU-h/T" (GPU hours per trillion tokens) or
    # "s/step" (the published step time)


def megatron_flops(name: str) -> float:
    """Narayanan et al. 2021, equation 3: F = 96 B s l h^2 (1 + s / 6h + V / 16 l h), recomputation counted."""
    cfg = load_config(name)
    b, s, m, v = cfg.batch, cfg.context_tokens, cfg.model, 51200
    return 96 * b * s * m.n_layers * m.d_model ** 2 * (1 + s / (6 * m.d_model) + v / (16 * m.n_layers * m.d_model))


def palm_flops(name: str, params: float) -> float:
    """Model FLOPs per step for a BF16 MFU per Chowdhery et al. (PaLM, appendix B): (6N + 12 L H Q T) per token."""
    cfg = load_config(name)
    m, s = cfg.model, cfg.context_tokens
    return (6 * params + 12 * m.n_layers * m.d_model * s) * s * cfg.batch


def _megatron_runs() -> list[Run]:
    table = [("1.7b", 137), ("3.6b", 138), ("7.5b", 142), ("18b", 135), ("39b", 138), ("76b", 140), ("145b", 148),
             ("310b", 155), ("530b", 163), ("1t", 163)]
    runs = []
    for k, tf in table:
        cfg = load_config(f"megatron-gpt-{k}-a100")
        runs.append(Run(cfg.name, f"Megatron GPT {cfg.model.published_params_total / 1e9:g}B, {cfg.n_gpus}x A100",
                        "Narayanan et al. 2021, Table 1; layout: Megatron-LM examples/sc21/run_table_1.sh", tf,
                        "TFLOP/s"))
    return runs


RUNS = [
    *_megatron_runs(),
    Run("llama3-405b-8k-8192gpu-h100", "Llama 3 405B, 8K, 8192x H100", "Llama 3 paper, Table 4 and section 3.3.2",
        430, "TFLOP/s"),
    Run("llama3-405b-8k-16384gpu-h100", "Llama 3 405B, 8K, 16384x H100", "Llama 3 paper, Table 4 and section 3.3.2",
        400, "TFLOP/s"),
    Run("llama3-405b-128k-h100", "Llama 3 405B, 128K (CP 16), 16384x H100",
        "Llama 3 paper, Table 4 (DP 8: see the config) and section 3.3.2", 380, "TFLOP/s"),
    Run("nemotron4-340b-128gpu-h100", "Nemotron-4 340B, 128x H100, TP8 x PP8 x VP12, GBS 32",
        "NVIDIA DGX Cloud benchmarking recipe, Nemotron 4 340B training workload (NeMo 24.11, BF16), MFU example",
        4.77, "s/step"),
    Run("nemotron4-340b-6144gpu-h100", "Nemotron-4 340B, 6144x H100, TP8 x PP12 x DP64, GBS 2304",
        "Nemotron-4 340B technical report (arXiv 2406.11704), Table 2", 8.0, "s/step"),
    Run("dsv3-train-h800", "DeepSeek-V3, 2048x H800, DualPipe, FP8",
        "DeepSeek-V3 report, section 1 and Table 1 (cost), sections 3.2-3.3 and 4.2 (setup)", 180e3, "GPU-h/T"),
    Run("dsv2-train-h800", "DeepSeek-V2, H800 (1024 assumed), zero-bubble PP",
        "DeepSeek-V2 paper, sections 3.2.3 (cost), 3.1.2-3.1.3 (setup)", 172.8e3, "GPU-h/T"),
]

#: the shared reason of the training rows the estimate beats by more than 10 %
OPTIMISTIC = (
    "the estimate is faster than every Megatron run and both Llama 3 8K runs, none slower (see the table): a "
    "bias, not scatter, so one cost is missing rather than mis-sized. It is not identified, and nothing is fitted "
    "to these rows to hide it. Candidates the model does not have: the A100's clock under sustained training "
    "power (its matmul ceiling in data/ceilings.toml is a burst figure with no sustained pair measured, where the "
    "H200's sustained rate is a tenth below its burst), GEMMs at each run's own shapes below the best-shape "
    "ceiling, and the fp16 loss-scale and gradient-norm passes over every gradient")
_OPTIMISTIC_RUNS = ("megatron-gpt-1.7b-a100", "megatron-gpt-3.6b-a100", "megatron-gpt-76b-a100",
                    "megatron-gpt-145b-a100", "megatron-gpt-310b-a100", "megatron-gpt-530b-a100",
                    "llama3-405b-8k-8192gpu-h100", "llama3-405b-8k-16384gpu-h100")

#: Rows outside their tolerance, each with its reason. Tests hold them as strict xfails.
GAPS = {
    **dict.fromkeys(_OPTIMISTIC_RUNS, OPTIMISTIC),
    "llama3-405b-128k-h100": (
        "attention is 57 % of the 128K step's counted FLOPs; its cost rests on one utilisation figure "
        "(FlashAttention-2 at 35 % of the H100 peak, FA3 paper) for a kernel the paper does not name, at a "
        "sequence length that figure was not measured at, and on Llama 3's document masks, which the model does "
        "not see"),
    "dsv3-train-h800": (
        "the published figure is the whole pre-training's GPU hours over its tokens (section 1: 2,664K hours for "
        "14.8T), so it carries every restart, checkpoint, evaluation and the batch-size ramp, which no step model "
        "sees; DeepSeek's own FP8 kernels reach 591-1404 TFLOP/s on V3's GEMM shapes (deepseek-ai/DeepGEMM#73) "
        "against the single ceiling used here, DeepGEMM's best 1550 TFLOP/s (data/ceilings.toml) at the H100's "
        "sustained factor; the MLA attention kernel is not described"),
    "dsv2-train-h800": (
        "as DeepSeek-V3: total GPU hours over tokens, with every overhead of the run inside; in addition the GPU "
        "count, micro-batch and layer split are not published (assumed in the config) and the MLA kernel is "
        "described only as an improved FlashAttention-2"),
}


def _train_row(run: Run) -> Row:
    cfg = load_config(run.config)
    step_s = predict_training(cfg).step_ns * 1e-9
    if run.unit == "s/step":
        measured_s, mine = run.published, step_s
    elif run.unit == "TFLOP/s":
        flops = megatron_flops(run.config) if run.config.startswith("megatron") else palm_flops(run.config, 405e9)
        measured_s = flops / (run.published * 1e12 * cfg.n_gpus)
        mine = flops / (step_s * cfg.n_gpus) / 1e12
    else:
        tokens = cfg.batch * cfg.context_tokens
        measured_s = tokens * run.published * 3600 / (1e12 * cfg.n_gpus)
        mine = step_s * cfg.n_gpus / tokens * 1e12 / 3600
    return Row("training", f"{run.figure} ({run.unit})", run.source, run.published, mine,
               train_tolerance(run.config), step_s / measured_s - 1, gap=GAPS.get(run.config, ""), config=run.config)


def _step(name: str, **sets: object) -> int:
    return predict_training(load_config(name, {k: str(v) for k, v in sets.items()})).step_ns


def _attn_gb(kernel: str) -> float:
    shape = AttnShape(pairs=64 * 16, n_q=1024, n_k=1024, head_dim=64, causal=False)
    return sum(attention_cost(shape, kernel, d, A100_SRAM).hbm_bytes for d in ("fwd", "bwd")) / 1e9


def _flash_rows() -> list[Row]:
    """FlashAttention paper figures (shared/facts/floor-facts.md sections 5 and 6.1; (D) derived there)."""
    meg_s = _step("gpt2-small-dp8-a100", attention_kernel="standard", micro_batch=32)
    fa_s = _step("gpt2-small-dp8-a100")
    meg_m, fa_m = _step("gpt2-medium-dp8-a100-noflash"), _step("gpt2-medium-dp8-a100")
    fa2k = _step("gpt2-small-dp8-a100", context_tokens=2048, batch=256, micro_batch=32)
    fa4k = _step("gpt2-small-dp8-a100", context_tokens=4096, batch=128, micro_batch=16)
    items = [
        ("GPT-2 medium attention HBM, standard (GB)", "FA paper Fig. 2", 40.3, _attn_gb("standard"), 0.15),
        ("GPT-2 medium attention HBM, FlashAttention (GB)", "FA paper Fig. 2", 4.4, _attn_gb("fa1"), 0.15),
        ("GPT-2 small speedup FA / Megatron", "FA paper Table 2 (D)", 4.7 / 2.7, meg_s / fa_s, SPEEDUP_TOL),
        ("GPT-2 medium speedup FA / Megatron", "FA paper Table 2 (D)", 11.5 / 6.9, meg_m / fa_m, SPEEDUP_TOL),
        ("GPT-2 small FA-2K vs Megatron-1K", "FA paper Table 4 (D)", 4.7 / 3.0, meg_s / fa2k, SPEEDUP_TOL),
        ("GPT-2 small FA-4K vs Megatron-1K", "FA paper Table 4 (D)", 4.7 / 3.6, meg_s / fa4k, SPEEDUP_TOL),
        ("GPT-2 small FA ms/step", "FA paper Table 2 (D)", 583, fa_s / 1e6, None),
        ("GPT-2 small Megatron ms/step", "FA paper Table 2 (D)", 1015, meg_s / 1e6, None),
        ("GPT-2 medium FA ms/step", "FA paper Table 2 (D)", 1490, fa_m / 1e6, None),
        ("GPT-2 medium Megatron ms/step", "FA paper Table 2 (D)", 2484, meg_m / 1e6, None),
    ]
    gap = _flash_gap(meg_s, fa_s)
    return [Row("flash", fig, src, pub, mine, tol, mine / pub - 1, gap=gap if fig in FLASH_GAPS else "")
            for fig, src, pub, mine, tol in items]


SPEEDUP_TOL = FLASH_SPEEDUP_TOLERANCE
#: the FlashAttention rows outside 8 %, held as strict xfails with _flash_gap's reason
FLASH_GAPS = ("GPT-2 small speedup FA / Megatron", "GPT-2 small FA-2K vs Megatron-1K",
              "GPT-2 small FA-4K vs Megatron-1K")


def _flash_gap(meg_ns: int, fa_ns: int) -> str:
    """Why the GPT-2 small speedups miss 8 %, in the model's and the paper's own step times."""
    paper_meg, paper_fa = 4.7 / 400e3 * 86_400e3, 2.7 / 400e3 * 86_400e3  # ms per step (D, facts 6.1)
    need = 4.7 / 2.7 * fa_ns / 1e6
    return (f"the paper's Megatron step is {paper_meg - paper_fa:.0f} ms longer than its FlashAttention step, the "
            f"model's {(meg_ns - fa_ns) / 1e6:.0f} ms: the difference is attention (the other terms are the same "
            "work), "
            f"so the paper's 2022 standard attention cost {(paper_meg - paper_fa) / ((meg_ns - fa_ns) / 1e6):.1f}x "
            f"more over FlashAttention than the model counts (score matrices through HBM at the A100's spec "
            f"bandwidth, fused scale-mask-softmax). For 1.74 at the model's FlashAttention step the Megatron step "
            f"would need "
            f"{need:.0f} ms instead of {meg_ns / 1e6:.0f}: {need - meg_ns / 1e6:.0f} ms of attention the paper does "
            "not break down (its Fig. 2 gives one GPT-2 medium attention measurement, whose HBM bytes the rows "
            "above reproduce), so it is not added")


def _busbw(gpu: str, size: float, n: int = 8, ring: bool = False) -> float:
    """The product's busbw for one all-reduce: the catalog's achievable NVLink bandwidth and NVLS efficiency
    (collectives.gpu_collective_s, as the floor and training steps use them), or its ring path alone."""
    spec = get_gpu(gpu)
    if ring:
        t = collective_time("allreduce", size, gpu_topology(spec, n)).time_s + spec.net_latency_ns * 1e-9
    else:
        t = gpu_collective_s(spec, "allreduce", size, n)
    return size / t * 2 * (n - 1) / n / 1e9


def _nccl_rows() -> list[Row]:
    """Measured nccl-tests all_reduce_perf busbw (GB/s), each at its message size."""
    items = [
        ("8x H200 all-reduce busbw, NVLS, 4 GiB", "nccl-tests#272 (peak of a 64 KiB-4 GiB sweep)", 475,
         _busbw("h200", 4 * GIB)),
        ("8x Hopper HGX all-reduce busbw, ring (NVLS off), 16 GiB",
         "nccl-tests#309 (8 B-16 GB sweep; H100 or H200 not said: same NVLink4 entry)", 368.76,
         _busbw("h100", 16 * GIB, ring=True)),
        ("8x A100 all-reduce busbw, ring, 1 GiB", "nccl-tests#149 (reporter's run, 8 B-1 GiB; ~200)", 200,
         _busbw("a100", GIB)),
        ("2x A100 all-reduce busbw, NV12, 12 GiB", "nccl-tests#178 (8 B-12 GiB sweep)", 208,
         _busbw("a100", 12 * GIB, n=2)),
    ]
    return [Row("nccl", fig, src, pub, mine, 0.15, mine / pub - 1) for fig, src, pub, mine in items]


# Narayanan et al. 2021 section 5.1: GPT-3 175B, 300B tokens, 1024 A100s, batch 1536 of 2048 tokens, 140
# teraFLOP/s per GPU -> 34 days: an estimate from a throughput measured on other models, not a GPT-3 run.
GPT3_DERIVED_STEP_S = 34 * 86_400 / (300e9 / (1536 * 2048))


def rows() -> list[Row]:
    """Every row of docs/validation.md, in order."""
    gpt3 = predict_training(load_config("gpt3-175b-megatron-a100")).step_ns / 1e9
    derived = Row("derived", "GPT-3 175B s/step, 1024x A100, batch 1536", "Megatron-LM paper section 5.1 (D)",
                  GPT3_DERIVED_STEP_S, gpt3, None, gpt3 / GPT3_DERIVED_STEP_S - 1, kind="derived, not a measurement",
                  config="gpt3-175b-megatron-a100")
    return [*(_train_row(r) for r in RUNS), *_flash_rows(), *_nccl_rows(), derived]


def _status(r: Row) -> str:
    if r.tolerance is None:
        return "not tested"
    inside = abs(r.error) <= r.tolerance
    if r.gap:
        return "gap (stated below)" if not inside else "gap closed: update GAPS"
    return "pass" if inside else "FAIL"


def _table(rs: list[Row], unit_head: str) -> list[str]:
    out = [f"| figure | source | published | tracekit | {unit_head} | tolerance | test |",
           "|---|---|---|---|---|---|---|"]
    for r in rs:
        tol = "-" if r.tolerance is None else f"{r.tolerance:.0%}"
        name = f"{r.figure} [`{r.config}`]" if r.config else r.figure
        out.append(f"| {name} | {r.source} | {r.published:.4g} | {r.tracekit:.4g} | {r.error:+.1%} | {tol} | "
                   f"{_status(r)} |")
    return out


INTRO = """# Validation against published measurements

Generated by `bench/validation.py`; do not edit by hand. tests/test_validation.py asserts every tested row.
Training rows compare tracekit's **estimate** (`tracekit predict`'s `estimate_ns`, at the calibrated
`achievable` peaks the named configs set) with measured training throughput, each run at its own published
layout, micro-batch, sequence length and recompute setting (a named config, `tracekit configs`, whose
comments cite the source of every setting and mark what is assumed). The estimate is not a bound; the floor
beside it in `predict` (`floor_t_opt_ns`, physical peaks) is, and the line under the training table gives the
ratio of each estimate to that floor.

Error, for training rows: estimated step / measured step - 1, where the measured step is the paper's FLOPs per
step (its own formula: Megatron-LM equation 3, recomputation counted; Llama 3's BF16 MFU per Chowdhery et al.,
6N + 12LHQT per token with N = 405B) over its published TFLOP/s per GPU, or the tokens per step at the published
GPU hours per trillion tokens. A negative error is an estimate faster than the run. Tolerance: 10 % for the
Megatron and Llama 3 8K rows, 15 % for Llama 3 128K and the DeepSeek rows (issues 19 and 25); the GPT-2
FlashAttention speedups 8 %. A row outside its tolerance is a stated gap with its reason, never a fitted
factor. In throughput terms (the "tracekit" column against "published") the same
rows read 1 / (1 + error) - 1: a step 13.2 % short is a throughput 15.2 % high."""


def render() -> str:
    rs = rows()
    train = [r for r in rs if r.section == "training"]
    lines = [INTRO, "", "## Training throughput", ""]
    lines += _table(train, "step error")
    lines += ["", "Ratio of each estimate to the floor t_opt of the same step (physical peaks): "
              + ", ".join(f"`{r.config}` {_floor_ratio(r.config):.2f}" for r in train) + ".", ""]
    lines += ["## FlashAttention (8x A100, FA paper; (D) = derived in shared/facts/floor-facts.md)", ""]
    flash = [r for r in rs if r.section == "flash"]
    lines += _table(flash, "error")
    slow = [r.published / r.tracekit for r in flash if r.figure.endswith("ms/step")]
    lines += ["", f"The absolute GPT-2 steps are {min(slow):.1f}-{max(slow):.1f}x shorter than the paper's and are "
              "not tested: the model's kernels and collectives account for about half of each measured step, and the "
              "paper does not say where the 2022 stack spent the rest. The speedups share every non-attention term, "
              "so they are tested."]
    lines += ["", "## NCCL all-reduce bus bandwidth (measured busbw, each at its message size)", "",
              "tracekit's figure is the product's own: `collectives.gpu_collective_s` with the GPU catalog's "
              "achievable NVLink bandwidth, NVLS efficiency and 10 us latency (the ring path alone where NVLS was "
              "off). The maintainer's 370 and 480 GB/s in nccl-tests#212 are expected values, not measurements, "
              "and are no longer rows.", ""]
    lines += _table([r for r in rs if r.section == "nccl"], "error")
    lines += ["", "## Derived, not a measurement", ""]
    lines += _table([r for r in rs if r.section == "derived"], "error")
    lines += ["", "GPT-3 175B: the published step is derived from the Megatron-LM paper's 34-day estimate, which "
              "assumes the 140 TFLOP/s measured for other models; it is kept for reference, not tested. Its layout "
              "is Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh (TP 8, PP 16, micro-batch 1, batch "
              "1536).", "", "## Gaps, stated rather than tuned away", ""]
    for r in rs:
        if r.gap:
            lines.append(f"- {r.config or r.figure} ({r.error:+.1%}): {r.gap}.")
    lines += ["", "## How the estimate is calibrated", "", CALIBRATION, ""]
    return "\n".join(lines)


NEMOTRON_RUNS = ("nemotron4-340b-128gpu-h100", "nemotron4-340b-6144gpu-h100")


def memory_verdicts() -> dict[str, tuple[str, str]]:
    """Per Nemotron run: the memory model's verdict as configured (FP32 gradient buffers) and with BF16 ones."""
    out = {}
    for name in NEMOTRON_RUNS:
        fp32 = predict_training(load_config(name)).memory.verdict()
        bf16 = predict_training(load_config(name, {"grad_dtype": "bf16"})).memory.verdict()
        out[name] = (fp32, bf16)
    return out


def _memory_lines() -> list[str]:
    """Both Nemotron-4 340B runs trained, so the memory model must find both feasible."""
    lines = []
    for name, (fp32, bf16) in memory_verdicts().items():
        lines.append(f"- `{name}`: {fp32}; with BF16 gradient buffers: {bf16}.")
    lines += ["", "Both runs trained, so a `does not fit` above is a miss of the memory model, kept as a gap: the "
              "128-GPU recipe (DP 2, so the distributed optimizer shards its 12 bytes per parameter only two ways) "
              "fits only with 2-byte gradient buffers (Megatron-Core's `grad_reduce_in_fp32` off), and the recipe "
              "does not say which it ran; the config keeps Megatron's FP32 default rather than the setting that "
              "makes the row fit."]
    return lines


def _floor_ratio(name: str) -> float:
    from dataclasses import replace

    from tracekit.floor import compute_floor

    cfg = load_config(name)
    return predict_training(cfg).step_ns / compute_floor(replace(cfg, peaks="physical")).t_opt_ns


CALIBRATION = """Only kernel-level measurements enter the estimate, none of the runs above:
- GEMMs: Calculon's size-efficiency table (data/gpus.toml), capped at each GPU's measured matmul ceiling
  (data/ceilings.toml, the stop rule's ceilings too: the best-shape matmul, "MAMF", of stas00/ml-engineering, and
  DeepGEMM on H800), at the power-saturated clock where a sustained figure was measured (data/matmul.toml: H200
  BF16 755 of 989 TFLOP/s, applied to the same-die H100 and H800 (?));
- attention kernels: the utilisation their papers report (FlashAttention-2 abstract: FA1 25-40 %, FA2 50-73 % on
  A100; FlashAttention-3 abstract: FA2 35 %, FA3 75 % on H100), taken as the kernel's whole time;
- collectives at the catalog's achievable NVLink bandwidths, checked against measured busbw in the NCCL table
  above; expert all-to-alls that
  DualPipe hides still take 20 of the H800's 132 SMs from compute while they run (DeepSeek-V3 section 3.2.2);
- everything else (HBM x 0.8, 3 us per memory operation, 10 us per collective) as docs/floor.md describes."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "validation.md")
    args = parser.parse_args()
    write_atomically(args.out, render())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
