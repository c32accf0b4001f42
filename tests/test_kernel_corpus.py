"""The labelled kernel corpus (tests/kernel_classes.tsv) against the class rules and the shared traces.

The corpus labels every distinct kernel name of ../shared/traces by hand, from reading the name, not from
the rules; `python bench/kernel_names.py --missing tests/kernel_classes.tsv` lists names still to label.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.kernel_names import corpus_names, distinct_names
from tracekit.budgets.classify import OTHER, load_rules
from tracekit.cli import main

CORPUS = Path(__file__).with_name("kernel_classes.tsv")

# Traces of LLM or transformer workloads (per ../shared/traces/SOURCES.md), each with why; the others are a
# DLRM recommender, CNNs (cuDNN convolutions), CUDA example programs, a toy MLP, a mock and CPU-only files.
TRANSFORMER_TRACES = {
    "nsys/nsys-ai__h100_2gpu_1s.sqlite": "FastVideo Wan-T2V inference: a diffusion transformer",
    "nsys/nsys-ai__mfu_2gpu_before.sqlite": "FastVideo training of the same transformer (FlashAttention, LayerNorm)",
    "torch/tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": "Qwen1.5-0.5B-Chat: an LLM",
    "torch/tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz": "BERT-small: a transformer encoder",
    "torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz": "SGLang Qwen3-8B decode",
    "torch/tracelens__inference__vllm_decode_full__graph_execution.json.gz": "vLLM full-graph MoE LLM decode",
    "torch/tracelens__b200__eager_trace.json.gz": "vLLM eager MoE LLM inference, TP8",
    "torch/tracelens__vllm_prefilldecode_piecewise/graph_execution.json.gz": "vLLM piecewise-graph prefill+decode",
    "torch/tracelens__vllm_prefilldecode_piecewise/"
    "capture_traces__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz":
        "graph-capture phase of the same vLLM run",
    "torch/tracelens__sglang_decode_capture/bs_32_rank0.json.gz": "SGLang Qwen3-8B decode graph capture",
}
MAX_OTHER_PCT = 5.0


def _corpus() -> list[dict[str, str]]:
    with CORPUS.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_rules_agree_with_every_labelled_name() -> None:
    rules = load_rules()
    wrong = [f"{r['class']} != rules' {rules.classify(r['name'])}: {r['name'][:160]}"
             for r in _corpus() if rules.classify(r["name"]) != r["class"]]
    assert not wrong, "\n".join(wrong)


def test_corpus_rows_are_distinct_names_with_a_known_class_and_a_note() -> None:
    rows = _corpus()
    rules = load_rules()
    classes = {r.cls for r in rules.rules} | {OTHER}
    assert len({r["name"] for r in rows}) == len(rows)
    assert all(r["class"] in classes and r["note"].strip() for r in rows)
    assert {r["class"] for r in rows} >= {"gemm", "moe_experts", "attn_core", "moe_routing", "conv", OTHER}


def test_corpus_holds_exactly_the_kernel_names_of_the_shared_traces(shared_traces: Path) -> None:
    in_traces, labelled = set(distinct_names(shared_traces)), corpus_names(CORPUS)
    assert not in_traces - labelled, "unlabelled (bench/kernel_names.py --missing): " + repr(in_traces - labelled)
    assert not labelled - in_traces, "in the corpus but in no trace: " + repr(labelled - in_traces)


def _kernels_json(path: Path, by: str, cache: Path) -> dict:
    result = CliRunner().invoke(main, ["kernels", str(path), "--by", by, "--format", "json", "-q",
                                       "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("trace", sorted(TRANSFORMER_TRACES))
def test_transformer_traces_keep_at_most_5_percent_of_gpu_time_in_other(
        trace: str, shared_traces: Path, tmp_path: Path) -> None:
    """`kernels --by class` states the share in `other`; the corpus covers every name tracekit stores."""
    body = _kernels_json(shared_traces / trace, "class", tmp_path)
    rows = body["kernels by class"]
    total = sum(r["total_ns"] for r in rows if r["class"] not in ("memcpy", "memset"))  # over kernel time
    other_pct = 100.0 * sum(r["total_ns"] for r in rows if r["class"] == OTHER) / total
    assert other_pct <= MAX_OTHER_PCT, (trace, TRANSFORMER_TRACES[trace], rows)
    assert f"other: {other_pct:.1f} % of kernel time (memory copies and sets left out) matches no class rule" \
        in " ".join(body["notes"])
    stored = {r["name"] for r in _kernels_json(shared_traces / trace, "name", tmp_path)["kernels by name"]}
    assert stored <= corpus_names(CORPUS)
