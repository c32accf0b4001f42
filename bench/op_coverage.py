"""Op floor coverage on every shared trace that records shapes: how much of the GPU time has an op floor.

For each trace (and each replay trace given with its graph-capture trace) it runs ``tracekit analyze`` without a
config and prints, from the report's ``op_floor`` section (over the analysed complete steps, communication
left out):

- ``gpu ms``: the GPU time per step (every class);
- ``covered``: the share of the non-communication GPU time whose op unit has a floor (``covered_fraction``);
- ``with an op``: the share of it that has a launching op in the capture (``unattributed_ns`` is the rest:
  kernels queued before the profiler started, or replayed from a graph whose capture is not given, have none);
- ``of those``: covered over the time with a launching op (``covered_launched_fraction``);
- ``tight``: the share under floors that bound their op's main operands (``tight_fraction``: not the bytes
  bounds of ops whose expert weights or cached context are not among their inputs);
- ``min ratio``: the smallest measured / t_opt of any op instance (below 1: an op beat its floor);
- the op without a floor that has most GPU time.

    python bench/op_coverage.py [--shared ../shared/traces] [--cache-dir DIR] [--write-doc]

``--write-doc`` also writes the table into docs/op-floor.md (between its ``coverage`` markers).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "op-floor.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
#: the shared traces that record op shapes, each a list of paths analysed together (a replay with its capture)
SHAPED = (
    ("torch/tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",),
    ("torch/tracelens__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",),
    ("torch/tracelens__h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz",),
    ("torch/tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",),
    ("torch/tracelens__b200__eager_trace.json.gz",),
    ("torch/tracelens__xdit_flux1_aiter_sage__profile_trace_rank_0.json.gz",),
    ("torch/tracelens__sglang_prefilldecode__sglang_Qwen3-8B_prefilldecode.json.gz",),
    ("torch/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
     "torch/tracelens__sglang_decode_capture/bs_32_rank0.json.gz"),
    ("torch/tracelens__vllm_prefilldecode_piecewise",),
    ("torch/tracelens__inference__vllm_decode_full__graph_execution.json.gz",),
)


def coverage(paths: list[Path], cache_dir: Path) -> dict:
    """The coverage figures of one analysis (no config)."""
    import tracekit

    result = tracekit.analyze(paths, cache_dir=cache_dir, detail=False)
    op = result.report["op_floor"]
    if op is None:
        return {"op_floor": None}
    gpu_ns = sum(c["measured_ns"] for c in op["classes"].values())
    covered, of_launched = op["covered_fraction"], op["covered_launched_fraction"]
    with_op = covered / of_launched if of_launched else None  # time with a launching op / non-communication time
    unmodelled = op["unmodelled"][0] if op["unmodelled"] else None
    return {"op_floor": True, "steps": op["steps"], "gpu_ms": gpu_ns / 1e6, "covered": covered,
            "launched": with_op, "of_launched": of_launched, "tight": op["tight_fraction"],
            "min_ratio": (op["min_instance_ratio"] or {}).get("ratio"),
            "top_unmodelled": f"{unmodelled['op']} {unmodelled['measured_ns'] / 1e6:.3f} ms" if unmodelled else "-"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="tracekit-coverage-"))
    lines = ["| trace | steps | gpu ms | covered | with an op | of those | tight | min ratio "
             "| largest without a floor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines))
    for group in SHAPED:
        paths = [args.shared / p for p in group]
        name = " + ".join(Path(p).name for p in group)
        if not all(p.exists() for p in paths):
            lines.append(f"| {name} | missing |")
            print(lines[-1])
            continue
        c = coverage(paths, cache)
        if c["op_floor"] is None:
            lines.append(f"| {name} | no op floor |")
            print(lines[-1])
            continue
        launched = f"{c['launched']:.1%}" if c["launched"] is not None else "-"
        ratio = f"{c['min_ratio']:.3f}" if c["min_ratio"] is not None else "-"
        lines.append(f"| {name} | {c['steps']} | {c['gpu_ms']:.3f} | {c['covered']:.1%} | {launched} | "
                     f"{c['of_launched']:.1%} | {c['tight']:.1%} | {ratio} | {c['top_unmodelled']} |")
        print(lines[-1], flush=True)
    if args.write_doc:
        text = DOC.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + rest.split(END, 1)[1], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
