"""Is the network slow, or is someone late? Matched collectives' transfer against the floor's network budget.

For every consistent instance whose message size the trace records (PyTorch's ``In/Out msg nelems`` and
``dtype``), the transfer (last arrival to the end, the median over members) is what the wire took. Its bus
bandwidth follows nccl-tests: ``busbw = size / transfer x bus_factor(op, n)``. The catalog's achievable bus
bandwidth for the GPU (scale-up inside a node, the NIC beyond) and the floor's time for that collective
(``floor.collectives.gpu_collective_s``) say what the network could do. The GPU is the config's hardware,
else the one ``tracekit.analysis.gpu`` identifies; without one, bandwidth is reported alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np

from tracekit import floor
from tracekit.analysis.commlog import CollectiveLog
from tracekit.analysis.stragglers import Waits
from tracekit.floor.collectives import OPS, bus_factor, gpu_collective_s


def _group_size(log: CollectiveLog, rec: int, members: int) -> int:
    text = log.group_ranks[rec]
    named = re.findall(r"\d+", text) if text else []
    return len(named) if named else members


def network_rows(logs: list[CollectiveLog], w: Waits, gpu: floor.GpuSpec | None) -> list[dict[str, Any]]:
    """Per (collective, group size): instances with a known size, medians of size, transfer, bus bandwidth,
    and the catalog's bus bandwidth and the floor's time for the median size."""
    sizes = np.diff(np.append(w.heads, w.part.size))
    found: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for i, (h, n) in enumerate(zip(w.heads.tolist(), sizes.tolist(), strict=True)):
        k = int(w.last_member[i])
        log, rec = logs[int(w.part[k])], int(w.rec[k])
        size = int(max(logs[int(w.part[j])].size_bytes[int(w.rec[j])] for j in range(h, h + n)))
        transfer = int(np.median(w.transfer_ns[h:h + n]))
        if size > 0 and transfer > 0 and log.name[rec] in OPS:
            found[(str(log.name[rec]), _group_size(log, rec, n))].append((size, transfer))
    rows = []
    for (op, n), items in sorted(found.items()):
        size = int(np.median([s for s, _ in items]))
        transfer = int(np.median([t for _, t in items]))
        busbw = float(np.median([s / (t / 1e9) * bus_factor(op, n) for s, t in items]))
        row: dict[str, Any] = {"collective": op, "ranks": n, "instances": len(items), "size_bytes": size,
                               "transfer_ns": transfer, "busbw_bytes_per_s": busbw,
                               "catalog_busbw_bytes_per_s": None, "budget_ns": None, "transfer_over_budget": None}
        if gpu is not None:
            catalog = gpu.scaleup_achievable_bytes_per_s if n <= gpu.gpus_per_node else gpu.scaleout_bytes_per_s
            budget = int(round(gpu_collective_s(gpu, op, size, n) * 1e9))
            row |= {"catalog_busbw_bytes_per_s": catalog, "budget_ns": budget,
                    "transfer_over_budget": transfer / budget if budget else None}
        rows.append(row)
    return rows
