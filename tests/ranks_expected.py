"""Cross-rank figures of a folder of PyTorch profiler traces, computed from the raw JSON alone.

Independent of tracekit (standard library only): the expected values of ``test_ranks_real.py``. The
definitions are those of docs/report-schema.md (``ranks``):
- an NCCL kernel belongs to the ``ProfilerStep#N`` host range holding its launch call (same correlation id);
- communicators pair by each rank's order of first use of its NCCL streams; instance = (communicator, step,
  n-th kernel of the step on it); a match needs every rank and one collective name (from the kernel name);
- each rank's clock offset: ``delta = end_r - end_0`` over the matched instances; the offset is the median
  of the deltas whose ``delta ± max(50 us, 2 % of the shorter kernel)`` covers the point most such intervals
  cover (needs 3); residual = median |delta - offset|; medians of two middles round half to even;
- an instance is kept when its aligned ends spread at most max(50 us, 2 % of its shortest kernel);
- wait = last aligned arrival - own arrival (at most the kernel), transfer = the rest of the kernel.

An Nsight Systems export holding several GPUs on one clock (``expected_nsys``): each (process, GPU) is a
participant, its NCCL kernels in start order on its NCCL stream (the export has no step markers, so the n-th
kernel of each is the n-th instance), no offsets.

Run it to print the figures: ``python tests/ranks_expected.py ../shared/traces/torch/dlrm8_v100``.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import sys
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path


def _median(values: list[int]) -> int:
    v = sorted(values)
    n = len(v)
    if n % 2:
        return v[n // 2]
    q, r = divmod(v[n // 2 - 1] + v[n // 2], 2)
    return q + (1 if r and q % 2 else 0)


def _ns(us: Decimal | int) -> int:
    """Microseconds as read exactly (JSON numbers as Decimal) to ns, half away from zero."""
    return int((Decimal(us) * 1000).to_integral_value(ROUND_HALF_UP))


def _rank_kernels(path: Path) -> tuple[int, list[dict]]:
    """(rank, NCCL kernels with their step, stream, name, start and end in ns) of one trace file."""
    if path.suffix == ".gz":
        with gzip.open(path) as f:
            text = f.read()
    else:
        text = path.read_bytes()
    doc = json.loads(text, parse_float=Decimal)
    events = doc["traceEvents"]
    steps = [(_ns(e["ts"]), _ns(e["ts"] + e["dur"]), e["name"]) for e in events
             if e.get("ph") == "X" and re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))
             and e.get("cat") in ("user_annotation", "cpu_op")]
    launches = {e["args"]["correlation"]: _ns(e["ts"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = []
    for e in events:
        if e.get("cat") != "kernel" or not re.search(r"nccl", e["name"], re.I):
            continue
        at = launches.get(e["args"].get("correlation"))
        holding = [s for s in steps if at is not None and s[0] <= at <= s[1]]
        if not holding:
            continue
        step = max(holding)[2]  # the latest-starting range holding the launch
        op = re.search(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", e["name"]).group(1).lower()
        kernels.append({"step": step, "stream": e["args"]["stream"], "name": op,
                        "start": _ns(e["ts"]), "end": _ns(e["ts"] + e["dur"])})
    kernels.sort(key=lambda k: (k["start"], k["end"]))
    return doc["distributedInfo"]["rank"], kernels


def _consensus(deltas: list[int], tols: list[int]) -> tuple[int | None, int | None, int]:
    pairs = list(zip(deltas, tols, strict=True))
    best_point, best = None, 0
    for point in sorted({d - t for d, t in pairs} | {d + t for d, t in pairs}):  # first point most cover
        covered = sum(1 for d, t in pairs if d - t <= point <= d + t)
        if covered > best:
            best_point, best = point, covered
    inliers = [d for d, t in pairs if d - t <= best_point <= d + t] if best_point is not None else []
    if len(inliers) < 3:
        return None, None, len(inliers)
    offset = _median(inliers)
    return offset, _median([abs(d - offset) for d in inliers]), len(inliers)


def expected(folder: Path) -> dict:
    """Matched instances, per-rank offsets and residuals, and wait and transfer per rank."""
    ranks = dict(_rank_kernels(p) for p in sorted(folder.iterdir()))
    instances: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for rank, kernels in ranks.items():
        stream_order: dict[int, int] = {}
        count: dict[tuple, int] = defaultdict(int)
        for k in kernels:
            comm = stream_order.setdefault(k["stream"], len(stream_order))
            n = count[(comm, k["step"])]
            count[(comm, k["step"])] += 1
            instances[(comm, k["step"], n)][rank] = k
    matched = {key: m for key, m in instances.items()
               if len(m) == len(ranks) and len({k["name"] for k in m.values()}) == 1}
    ref = min(ranks)
    offsets, residuals = {ref: 0}, {ref: None}
    for rank in sorted(ranks):
        if rank == ref:
            continue
        pairs = [(m[rank], m[ref]) for m in matched.values()]
        deltas = [a["end"] - b["end"] for a, b in pairs]
        tols = [max(50_000, round(0.02 * min(a["end"] - a["start"], b["end"] - b["start"]))) for a, b in pairs]
        offset, residual, _ = _consensus(deltas, tols)
        offsets[rank], residuals[rank] = (offset or 0), residual
    kept = {}
    for key, m in matched.items():
        ends = [k["end"] - offsets[r] for r, k in m.items()]
        shortest = min(k["end"] - k["start"] for k in m.values())
        if max(ends) - min(ends) <= max(50_000, round(0.02 * shortest)):
            kept[key] = m
    return {"matched": len(kept), "inconsistent": len(matched) - len(kept), "offsets": offsets,
            "residuals": residuals, **_waits(kept, offsets)}


def _waits(kept: dict[tuple, dict], offsets: dict) -> dict:
    """Wait and transfer per participant, and how long the others waited for each (as the last arrival)."""
    wait, transfer, waited_for = defaultdict(int), defaultdict(int), defaultdict(int)
    for m in kept.values():
        arrivals = {r: k["start"] - offsets[r] for r, k in m.items()}
        last = max(arrivals.values())
        latest = min(r for r, a in arrivals.items() if a == last)
        for r, k in m.items():
            dur = k["end"] - k["start"]
            w = min(max(last - arrivals[r], 0), dur)
            wait[r] += w
            transfer[r] += dur - w
            if r != latest:
                waited_for[latest] += w
    return {"wait": dict(wait), "transfer": dict(transfer), "waited_for": dict(waited_for)}


def expected_nsys(path: Path) -> dict:
    """The same figures for the GPUs of one Nsight Systems export (one clock)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("""
        SELECT (k.globalPid >> 24) & 16777215, k.deviceId, k.start, k."end" FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE '%nccl%' ORDER BY k.start, k."end"
    """).fetchall()
    by_gpu: dict[tuple, list[dict]] = defaultdict(list)
    for pid, device, start, end in rows:
        by_gpu[(pid, device)].append({"start": start, "end": end})
    (launched,) = db.execute("""
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
        WHERE s.value LIKE '%nccl%' AND EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r
            WHERE r.correlationId = k.correlationId AND (r.globalTid >> 24) << 24 = k.globalPid)
    """).fetchone()  # NCCL kernels whose launch call is in the capture (so inside an NCCL NVTX range)
    n = min(len(v) for v in by_gpu.values())
    kept = {}
    for i in range(n):
        m = {gpu: ks[i] for gpu, ks in by_gpu.items()}
        ends = [k["end"] for k in m.values()]
        if max(ends) - min(ends) <= max(50_000, round(0.02 * min(k["end"] - k["start"] for k in m.values()))):
            kept[i] = m
    return {"matched": len(kept), "launched_in_capture": launched, **_waits(kept, dict.fromkeys(by_gpu, 0))}


if __name__ == "__main__":
    print(json.dumps(expected(Path(sys.argv[1])), indent=1))
