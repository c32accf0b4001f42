"""Regenerate the Floor-First case study in docs/floor.md (the block between the case-study markers).

Run: ``.venv/bin/python bench/case_study.py [--doc docs/floor.md]``. It reproduces the paper's worked example
(arXiv 2607.05876, "Think Before You Grid-Search: Floor-First Triage for LLM Serving"): ridge points of H20
and H100 at FP8, the KV-capacity walls of TP16 and EP16 + DP-attention for DeepSeek-V3.2 on 16 H20 at 8K
context (BF16 latent + FP8 indexer keys, 10 GB reserve), and the batch-1 step of both layouts. Every number
in the block comes from tracekit.floor here; the paper's figures are quoted as the paper gives them.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tracekit.budgets.configs import load_config
from tracekit.files import write_atomically
from tracekit.floor import DeploymentConfig, FloorResult, compute_floor, get_gpu
from tracekit.floor.layout import cache_bytes_per_token_gpu

BEGIN, END = "<!-- case-study:begin (bench/case_study.py) -->", "<!-- case-study:end -->"
SETTINGS = {"batch": "1", "context_tokens": "8192", "kv_format": "bf16", "reserve_per_gpu_bytes": "10e9"}
PAPER = {"dsv32-tp16": 70, "dsv32-ep16": 644}  # the paper's KV-capacity walls (~)
PAPER_SPEEDUP = 2.4  # the paper: TP16 ~2.4x faster than EP16 + DP at batch 1


@dataclass(frozen=True)
class Side:
    """One layout of the case study."""

    name: str
    cfg: DeploymentConfig
    at_one: FloorResult

    @property
    def per_request_bytes(self) -> float:
        """KV cache of one 8K request on each GPU that holds it (latent + indexer keys, every layer)."""
        c = self.cfg
        return c.context_tokens * cache_bytes_per_token_gpu(c.model, c.kv_format, c.layout.attn_tp)

    def implied_weights(self, requests: int) -> float:
        """Weights per GPU a capacity of `requests` implies at the device's capacity and the same reserve."""
        groups = self.cfg.layout.attention_groups
        return (self.cfg.hardware.hbm_bytes - self.cfg.reserve_per_gpu_bytes
                - requests / groups * self.per_request_bytes)


def sides() -> list[Side]:
    out = []
    for name in PAPER:
        cfg = load_config(name, SETTINGS)
        out.append(Side(name, cfg, compute_floor(cfg)))
    return out


def _ridges() -> list[str]:
    rows = ["| GPU | FP8 dense peak | HBM bandwidth | ridge (FLOP/B) |", "|---|---:|---:|---:|"]
    for key in ("h20", "h100"):
        g = get_gpu(key)
        rows.append(f"| {g.name} | {g.peak_flops_per_s('fp8') / 1e12:g} TFLOP/s | {g.hbm_bytes_per_s / 1e12:g} TB/s | "
                    f"{g.ridge_fp8_flops_per_byte:.1f} |")
    return rows


def _capacity(ss: list[Side]) -> list[str]:
    hbm = ss[0].cfg.hardware.hbm_bytes
    rows = [f"| layout | weights / GPU | KV per 8K request / GPU | wall at {hbm / 2**20:,.0f} MiB (device) | "
            f"paper | weights / GPU the paper's wall implies |",
            "|---|---:|---:|---:|---:|---:|"]
    for s in ss:
        rows.append(f"| `{s.name}` | {s.cfg.weight_bytes_per_gpu / 1e9:.2f} GB | {s.per_request_bytes / 1e9:.3f} GB | "
                    f"{s.cfg.kv_capacity_requests} | ~{PAPER[s.name]} | "
                    f"{s.implied_weights(PAPER[s.name]) / 1e9:.2f} GB |")
    return rows


def _serial_ns(r: FloorResult) -> int:
    """The resource floor with the latency chain in series: how a batch-1 step reads when nothing overlaps a
    collective's latency (a reading, not a bound: a kernel may prefetch its weights across the dependency)."""
    return max(r.resource_ns.values()) + r.latency_chain_ns


def _latency(ss: list[Side]) -> list[str]:
    rows = ["| layout | t_opt | t_sum | binding | HBM | compute | network | latency chain | resources + chain | "
            "expected (calibrated) |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for s in ss:
        r = s.at_one
        rows.append(f"| `{s.name}` | {r.t_opt_ns / 1e6:.3f} ms | {r.t_sum_ns / 1e6:.3f} ms | {r.binding} | "
                    + " | ".join(f"{r.resource_ns[k] / 1e6:.3f} ms" for k in ("hbm", "compute", "network"))
                    + f" | {r.latency_chain_ns / 1e6:.3f} ms | {_serial_ns(r) / 1e6:.3f} ms"
                    + f" | {r.expected_ns / 1e6:.3f} ms |")
    return rows


def _para(*parts: str) -> list[str]:
    """One paragraph, wrapped at 110 characters."""
    return [*textwrap.wrap(" ".join(parts), 110, break_on_hyphens=False), ""]


def _capacity_text(tp: Side, ep: Side) -> list[str]:
    hbm = tp.cfg.hardware.hbm_bytes
    above = all(s.cfg.weight_bytes_per_gpu < s.implied_weights(PAPER[s.name]) for s in (tp, ep))
    return _para(
        f"The walls are at the capacity the device reports, {hbm / 2**20:,.0f} MiB ({hbm / 1e9:.1f} GB), not the",
        "96 GB the H20 is sold as. At that capacity and the same reserve the paper's walls (~70 and ~644) imply",
        f"{tp.implied_weights(PAPER[tp.name]) / 1e9:.1f} GB and {ep.implied_weights(PAPER[ep.name]) / 1e9:.1f} GB",
        f"of weights per GPU where the model counts {tp.cfg.weight_bytes_per_gpu / 1e9:.1f} GB and",
        f"{ep.cfg.weight_bytes_per_gpu / 1e9:.1f} GB (embedding, LM head and router in BF16; the MLA",
        "down-projections and the indexer replicated under TP, all of attention under DP-attention), so the",
        "model's walls are " + ("above the paper's: the paper leaves more memory per GPU to something the model "
                                "does not count" if above else "not uniformly above or below the paper's") + ".")


def _latency_text(tp: Side, ep: Side) -> list[str]:
    a, b = tp.at_one, ep.at_one
    msgs, ep_msgs = (sum(p.net_messages for p in r.parts) for r in (a, b))
    hw = tp.cfg.hardware
    bound = (f"Both sides are bound by {a.binding}" if a.binding == b.binding
             else f"TP16 is bound by {a.binding}, EP16 + DP by {b.binding}")
    return _para(
        f"**The bound: {b.t_opt_ns / a.t_opt_ns:.1f}x.** On t_opt TP16 is {b.t_opt_ns / a.t_opt_ns:.1f}x faster",
        f"and {b.t_sum_ns / a.t_sum_ns:.1f}x on t_sum (the paper: ~{PAPER_SPEEDUP}x). {bound}: at batch 1, EP16 + DP",
        "puts the request on one GPU, which reads all of attention (replicated under DP-attention) and its share",
        "of the touched experts, while TP16 splits every weight 16 ways. t_opt = max(resources, latency chain):",
        f"TP16's {msgs} collectives per step cross the NIC (the layout spans two nodes), one hop each at the",
        f"physical {hw.net_hop_ns / 1000:g} us, a chain of {a.latency_chain_ns / 1e6:.3f} ms, under its",
        f"{max(a.resource_ns.values()) / 1e6:.3f} ms of HBM time, so the bound stays where the resources put it.",
    ) + _para(
        f"**The latency chain in series: {_serial_ns(b) / _serial_ns(a):.1f}x.** At batch 1 no other work overlaps a",
        "collective's latency, so the step reads as the resource time plus the chain:",
        f"{_serial_ns(a) / 1e6:.3f} ms for TP16 and {_serial_ns(b) / 1e6:.3f} ms for EP16 + DP (its {ep_msgs}",
        "all-to-alls cross the NIC too). This is not a bound (a kernel can prefetch its weights across the",
        "dependency), which is why t_opt takes the max.",
    ) + _para(
        f"**The estimate: {b.expected_ns / a.expected_ns:.1f}x.** expected_ns adds the calibrated",
        f"{hw.net_latency_ns / 1000:g} us per collective (aiconfigurator `p2p_latency`, software included) on the",
        f"critical path to the calibrated resource time: {a.expected_ns / 1e6:.3f} ms against",
        f"{b.expected_ns / 1e6:.3f} ms. The paper's ~{PAPER_SPEEDUP}x sits below it: it needs about",
        f"{_paper_latency_us(a, b):.0f} us per collective on TP16 beside the same resource times.")


def _paper_latency_us(a: FloorResult, b: FloorResult) -> float:
    """Per-collective latency on TP16 that, added to the calibrated resource times (EP16's collectives at the
    calibrated latency), gives the paper's ratio."""
    lat = a.config.hardware.net_latency_ns
    a_res = a.expected_ns - sum(p.net_messages for p in a.parts) * lat
    target = b.expected_ns / PAPER_SPEEDUP
    return (target - a_res) / sum(p.net_messages for p in a.parts) / 1000


def block() -> str:
    """The case-study section, markers included."""
    tp, ep = sides()
    lines = [
        BEGIN,
        "## The Floor-First case study, reproduced",
        "",
        *_para("Generated by `bench/case_study.py`; do not edit by hand. DeepSeek-V3.2 on 16 H20 (two nodes), FP8",
               "weights, 8K context, BF16 MLA latent (1,152 B per token per layer) plus the FP8 DSA indexer key",
               "(132 B), 10 GB reserve per GPU: `--context 8192 --set kv_format=bf16 --set",
               "reserve_per_gpu_bytes=10e9` on the named configs `dsv32-tp16` and `dsv32-ep16`. All figures at",
               "physical peaks except `expected`, the calibrated estimate."),
        "**Ridge points** (FP8 dense peak / HBM bandwidth; the paper gives 74 on H20 and ~590 on H100):",
        "",
        *_ridges(),
        "",
        *_para("**KV-capacity walls.** Under TP16 the MLA latent and the indexer key are replicated on every rank, so",
               "the deployment holds what one GPU holds; under EP16 + DP-attention each GPU holds its own requests."),
        *_capacity([tp, ep]),
        "",
        *_capacity_text(tp, ep),
        "**Batch-1 step** (one request of 8K tokens):",
        "",
        *_latency([tp, ep]),
        "",
        *_latency_text(tp, ep),
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--doc", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "floor.md")
    args = parser.parse_args()
    text = args.doc.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    write_atomically(args.doc, text[:start] + block() + text[end:])
    print(args.doc)


if __name__ == "__main__":
    main()
