"""Copy bandwidth by working-set size on the GPU (results/copy_bandwidth.json, from an H200).

A device-to-device copy of S bytes moves 2S (read + write). The 2 GB copy measures achievable HBM
bandwidth. The L2-resident sizes were meant to measure L2 bandwidth, but eager copies that small are
bound by launch overhead (on the H200 they ran below the HBM rate), so they give no L2 figure. Each
figure is the best of 5 timed runs of ``iters`` back-to-back copies between CUDA events, after warm-up.
Prints JSON.
"""

from __future__ import annotations

import json

import torch

SIZES_BYTES = [2 << 20, 4 << 20, 8 << 20, 16 << 20, 2 << 30]


def copy_bytes_per_s(size: int, iters: int) -> float:
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(10):
        dst.copy_(src)
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return 2 * size * iters / best


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    rows = [{"size_bytes": s, "bytes_per_s": copy_bytes_per_s(s, 2000 if s < (1 << 30) else 20)}
            for s in SIZES_BYTES]
    print(json.dumps({"device": props.name, "l2_bytes": getattr(props, "L2_cache_size", None),
                      "torch": torch.__version__, "copies": rows}, indent=1))


if __name__ == "__main__":
    main()
