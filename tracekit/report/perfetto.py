"""An annotated timeline for Perfetto and chrome://tracing: the original GPU operations plus the findings.

The file is a Chrome-trace JSON shaped like a PyTorch profiler (Kineto) trace, so tracekit's own Kineto
reader reads it back: per (rank, device) one process whose threads are the streams, holding every kernel
(``cat: "kernel"``) and memory operation (``gpu_memcpy``/``gpu_memset``) with ``args.device``,
``args.stream`` and a ``args.correlation`` unique in the file. Beside it, one process of analysis tracks,
``cat: "tracekit"`` (a category the reader counts as skipped): step windows, host gaps named by cause,
exposed communication, the kernels of over-budget classes, and, across ranks, each matched collective split
into its wait for the last rank and its transfer. The host: per device one process whose threads are the
launching host threads, holding each launch call (``cat: "tracekit"``, named by the kernel it launched) with
a flow arrow (``cat: "ac2g"``, as Kineto's) from the call to its kernel, so a gap before a kernel shows the
host thread that was late to launch it. Times are exact: ``ts``/``dur`` are microseconds with three
decimals from ``baseTimeNanoseconds``, each device on its own file's clock; the analysis process names the
clock offset to subtract to align it with the reference rank (the report's ``ranks.clocks``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tracekit.analysis.analyze import Analysis
from tracekit.files import write_atomically
from tracekit.report.timeline import gap_marks, is_memop, typed_of

TRACKS = ("step windows", "host gaps (by cause)", "exposed communication", "over-budget kernels", "collective wait",
          "collective transfer")
CATEGORY = "tracekit"
FLOW_CATEGORY = "ac2g"  # Kineto's launch -> kernel flow category (the reader skips it)
HOST_PID_BASE = 1_000_000  # host processes' pids: past every device and analysis process of the file


def _us(ns: int) -> str:
    """Non-negative ns as exact microsecond JSON number text."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _event(cat: str, name: str, pid: int, tid: int, start_ns: int, end_ns: int, args: dict[str, Any]) -> str:
    return (f'{{"ph":"X","cat":"{cat}","name":{json.dumps(name)},"pid":{pid},"tid":{tid},'
            f'"ts":{_us(start_ns)},"dur":{_us(end_ns - start_ns)},"args":{json.dumps(args)}}}')


def _meta(kind: str, pid: int, tid: int | None, **args: Any) -> str:
    tid_part = f',"tid":{tid}' if tid is not None else ""
    return f'{{"ph":"M","name":"{kind}","pid":{pid}{tid_part},"args":{json.dumps(args)}}}'


def _device_events(analysis: Analysis, i: int, base: int, correlation: int) -> tuple[list[str], int]:
    """One device's operations and analysis tracks; returns the events and the next free correlation id."""
    dev = analysis.device_detail(analysis.devices[i])
    ops, report = dev.ops, typed_of(analysis)
    gpu_pid, ann_pid = 2 * i + 1, 2 * i + 2
    cross = analysis.cross
    clock = f" (clock offset {cross.offset_ns[i] / 1e6:+.3f} ms)" if cross is not None and cross.offset_ns[i] else ""
    out = [_meta("process_name", gpu_pid, None, name=f"rank {ops.rank} GPU {ops.device_id}"),
           _meta("process_sort_index", gpu_pid, None, sort_index=2 * i + 1),
           _meta("process_name", ann_pid, None,
                 name=f"rank {ops.rank} GPU {ops.device_id}: tracekit analysis{clock}"),
           _meta("process_sort_index", ann_pid, None, sort_index=2 * i)]
    for s in np.unique(ops.stream_id).tolist():
        out.append(_meta("thread_name", gpu_pid, s, name=f"stream {s}"))
    for t, name in enumerate(TRACKS, start=1):
        out += [_meta("thread_name", ann_pid, t, name=name), _meta("thread_sort_index", ann_pid, t, sort_index=t)]
    cls_text = ops.cls.astype(str)
    memop = is_memop(cls_text, ops.name)
    for j in range(len(ops)):
        s, e, stream = int(ops.start_ns[j]), int(ops.end_ns[j]), int(ops.stream_id[j])
        args = {"device": ops.device_id, "stream": stream, "correlation": correlation + j, "rank": ops.rank,
                "class": cls_text[j]}
        if memop[j]:
            out.append(_event(f"gpu_{cls_text[j]}", cls_text[j].capitalize(), gpu_pid, stream, s - base, e - base,
                              args))
        else:
            out.append(_event("kernel", str(ops.name[j]), gpu_pid, stream, s - base, e - base, args))
    out += _host_events(ops, i, gpu_pid, base, correlation)
    over = {c.name: c for c in report.classes if c.over_budget}
    flagged: set[int] = set()
    for acc in dev.accounts:
        w = acc.window
        out.append(_event(CATEGORY, w.label, ann_pid, 1, w.start_ns - base, w.end_ns - base, {
            "step": w.index, "dur_ns": w.dur_ns, "host_gap_ns": acc.gap_ns, "exposed_comm_ns": acc.exposed_ns}))
        for g in gap_marks(dev, acc.gaps):
            out.append(_event(CATEGORY, f"host gap: {g.cause}", ann_pid, 2, g.start_ns - base, g.end_ns - base,
                              {"step": w.label, "by_cause_ns": g.by_cause}))
        for s, e in zip(acc.exposed.starts.tolist(), acc.exposed.ends.tolist(), strict=True):
            out.append(_event(CATEGORY, "exposed communication", ann_pid, 3, s - base, e - base, {"step": w.label}))
        flagged.update(int(j) for j in acc.ops_in_window if cls_text[j] in over)
    for j in sorted(flagged):
        c = over[cls_text[j]]
        out.append(_event(CATEGORY, str(ops.name[j]), ann_pid, 4, int(ops.start_ns[j]) - base,
                          int(ops.end_ns[j]) - base, {"class": c.name, "class_ratio": round(c.ratio, 3),
                                                      "class_budget_ns": c.budget_ns,
                                                      "class_excess_ns": c.excess_ns}))
    if cross is not None:
        out += _collective_events(analysis, i, ann_pid, base)
    return out, correlation + len(ops)


def _host_events(ops: Any, i: int, gpu_pid: int, base: int, correlation: int) -> list[str]:
    """The launch calls of device ``i``'s operations on their host threads, and a flow arrow from each call
    to the operation it launched (ids are the operations' correlation ids in this file)."""
    pid = HOST_PID_BASE + i
    known = np.flatnonzero((ops.launch_tid >= 0) & (ops.launch_end_ns >= ops.launch_start_ns)
                           & (ops.launch_start_ns >= base))  # a launch before the file's base is left out
    if not known.size:
        return []
    out = [_meta("process_name", pid, None, name=f"rank {ops.rank} GPU {ops.device_id}: host launch calls"),
           _meta("process_sort_index", pid, None, sort_index=HOST_PID_BASE + i)]
    for t in np.unique(ops.launch_tid[known]).tolist():
        out.append(_meta("thread_name", pid, int(t), name=f"host thread {t}"))
    for j in known.tolist():
        tid, s, e = int(ops.launch_tid[j]), int(ops.launch_start_ns[j]), int(ops.launch_end_ns[j])
        out.append(_event(CATEGORY, f"launch: {ops.name[j]}", pid, tid, s - base, e - base,
                          {"correlation": correlation + j, "graph": bool(ops.in_graph[j])}))
        flow = correlation + j
        out.append(f'{{"ph":"s","cat":"{FLOW_CATEGORY}","name":"{FLOW_CATEGORY}","id":{flow},"pid":{pid},'
                   f'"tid":{tid},"ts":{_us(s - base)}}}')
        out.append(f'{{"ph":"f","cat":"{FLOW_CATEGORY}","name":"{FLOW_CATEGORY}","id":{flow},"pid":{gpu_pid},'
                   f'"tid":{int(ops.stream_id[j])},"ts":{_us(int(ops.start_ns[j]) - base)},"bp":"e"}}')
    return out


def _collective_events(analysis: Analysis, i: int, pid: int, base: int) -> list[str]:
    """Each matched collective of device ``i`` as its wait (for the last rank) and its transfer."""
    cross, log = analysis.cross, analysis.devices[i].collectives
    out = []
    for r in np.flatnonzero(cross.record_wait_ns[i] >= 0).tolist():
        s, e = int(log.start_ns[r]), int(log.end_ns[r])
        w, last = int(cross.record_wait_ns[i][r]), cross.participants[int(cross.record_last[i][r])]
        args = {"collective": log.name[r], "step": log.step_label[int(log.step[r])], "wait_ns": w,
                "transfer_ns": e - s - w, "last_rank": last[0], "last_device": last[1],
                "clock_offset_ns": cross.offset_ns[i]}
        if w:
            out.append(_event(CATEGORY, f"wait for rank {last[0]}: {log.name[r]}", pid, 5, s - base, s + w - base,
                              args))
        if e - s - w:
            out.append(_event(CATEGORY, f"transfer: {log.name[r]}", pid, 6, s + w - base, e - base, args))
    return out


def perfetto_json(analysis: Analysis) -> str:
    """The annotated timeline as Chrome-trace JSON text."""
    starts = [d.first_start_ns for d in analysis.devices if d.n_ops]
    starts += [a.window.start_ns for d in analysis.devices for a in d.accounts]
    first_launch = analysis.store.con.execute("SELECT min(start_ns) FROM launches WHERE start_ns >= 0").fetchone()[0]
    if first_launch is not None and starts:
        starts.append(int(first_launch))  # the host tracks start with the first launch call
    base = min(starts, default=0)
    events: list[str] = []
    correlation = 1
    for i in range(len(analysis.devices)):
        device_events, correlation = _device_events(analysis, i, base, correlation)
        events += device_events
    ranks = sorted({d.rank for d in analysis.devices})
    top: dict[str, Any] = {"schemaVersion": 1, "baseTimeNanoseconds": base, "displayTimeUnit": "ns",
                           "traceName": f"tracekit analyze: {typed_of(analysis).verdict}"}
    if len(ranks) == 1:
        top["distributedInfo"] = {"rank": ranks[0]}
    head = json.dumps(top)[1:-1]
    return "{" + head + ',\n"traceEvents": [\n' + ",\n".join(events) + "\n]}\n"


def write_perfetto(analysis: Analysis, out_path: Path) -> None:
    """Write the annotated timeline of ``analysis`` to ``out_path`` (replaced atomically)."""
    write_atomically(Path(out_path), perfetto_json(analysis), option="--perfetto")
