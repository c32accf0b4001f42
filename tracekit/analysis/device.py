"""The per-device part of `tracekit analyze`, in bounded memory: steps read from the store a batch at a time.

Step windows come from the database (``steps.find_steps``); the operations and the host activity are then
read for a few consecutive steps at a time (at most ``AnalyzeOptions.batch_rows`` operations starting in
the batch, plus those that overlap it from before), each step is accounted and its gaps attributed, and only
small per-step summaries are kept. What the report needs beyond the summaries is reduced here too: kernel
time per name, this device's costliest gap findings (re-read around each gap), and the ncu launch of
each kernel in the device's median step. Memory grows with one batch, not with the trace.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.accounting import Piece, StepAccount, account_piece, merge
from tracekit.analysis.commlog import CollectiveCollector, CollectiveLog, load_metadata
from tracekit.analysis.gaps import CAUSES, HostActivity, attribute_gaps, gap_causes, gap_context, gap_contexts
from tracekit.analysis.ops import DeviceOps, Vocabulary, launch_skips, load_ops, prepare, reuse_reads
from tracekit.analysis.steps import (
    STEP_MARKER_REGEX,
    Batch,
    DeviceExtent,
    StepSource,
    StepWindow,
    batches,
    device_extent,
    find_steps,
)
from tracekit.errors import InputError
from tracekit.store.views import create_views

if TYPE_CHECKING:
    from tracekit.analysis.options import AnalyzeOptions
    from tracekit.budgets.classify import ClassRules


@dataclass
class DeviceAnalysis:
    """One device: how its steps were found, each analysed step's summary, and the reductions the report
    needs. It holds no per-operation data (``Analysis.step_detail`` re-reads a step's operations)."""

    rank: int
    device_id: int
    extent: DeviceExtent
    classes: tuple[str, ...]  # classes of all the device's operations
    source: StepSource
    accounts: list[StepAccount]  # summaries, in step order
    causes: list[dict[str, int]]  # gap ns by cause, per step
    kernel_ns: dict[tuple[str, str], int]  # (class, name): time of its ops in the analysed steps
    kernel_launches: dict[tuple[str, str], int]  # (class, name): its ops in the analysed steps
    # (class, name): (ncu launch skip, earlier launches of that very name (rocprofv3), in graph)
    median_launches: dict[tuple[str, str], tuple[int, int, bool]]
    top_gaps: list[dict[str, Any]]  # this device's costliest gap findings, costliest first
    collectives: CollectiveLog | None = None  # its collectives, for the cross-rank analysis
    heads: list[dict[str, int]] = field(default_factory=list)  # per step: GPU idle before its first op, by cause
    head_context: dict[str, Any] | None = None  # the longest such idle: where, and what the host was doing

    @property
    def n_ops(self) -> int:
        return self.extent.n_ops

    @property
    def first_start_ns(self) -> int:
        return self.extent.start_ns


def step_marker(opts: AnalyzeOptions) -> str:
    """The regex of the ranges that mark steps (they do not count as busy host time)."""
    return opts.step_regex or STEP_MARKER_REGEX


def _device_classes(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> tuple[str, ...]:
    rows = con.execute("""
        SELECT DISTINCT n.class FROM gpu_ops o JOIN op_names n ON n.name = o.name AND n.is_memop = o.is_memop
        WHERE o.rank = $rank AND o.device_id = $device
    """, {"rank": rank, "device": device_id}).fetchall()
    return tuple(sorted(str(r[0]) for r in rows))


class _KernelTime:
    """Time per op name over the analysed steps (an op overlapping two steps counts in both), and the order
    in which names first appear (it orders the findings built from it)."""

    def __init__(self, n_names: int) -> None:
        self.ns = np.zeros(n_names, dtype=np.int64)
        self.launches = np.zeros(n_names, dtype=np.int64)
        self.first_seen = np.full(n_names, np.iinfo(np.int64).max, dtype=np.int64)
        self.seen = 0

    def add(self, code: np.ndarray, dur_ns: np.ndarray) -> None:
        self.ns += np.bincount(code, weights=dur_ns, minlength=self.ns.size).astype(np.int64)
        self.launches += np.bincount(code, minlength=self.ns.size)
        np.minimum.at(self.first_seen, code, self.seen + np.arange(code.size, dtype=np.int64))
        self.seen += code.size

    def codes_in_order(self) -> list[int]:
        seen = np.flatnonzero(self.first_seen != np.iinfo(np.int64).max)
        return seen[np.argsort(self.first_seen[seen], kind="stable")].tolist()


class _GapGroups:
    """Gaps before the same kernel collapsed into one finding: occurrences, total and the longest instance."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Any]] = {}

    def add(self, gaps: iv.Intervals, window: StepWindow, ops: DeviceOps, next_op: np.ndarray) -> None:
        for g0, g1, j in zip(gaps.starts.tolist(), gaps.ends.tolist(), next_op.tolist(), strict=True):
            g = self.groups.setdefault(str(ops.name[j]) if j >= 0 else "",
                                       {"occurrences": 0, "total_ns": 0, "longest": (0, 0, 0, "", 0)})
            g["occurrences"] += 1
            g["total_ns"] += g1 - g0
            if g1 - g0 > g["longest"][0]:
                g["longest"] = (g1 - g0, g0, g1, window.label, window.start_ns)

    def top(self, con: duckdb.DuckDBPyConnection, vocab: Vocabulary, rank: int, device_id: int, marker: str,
            limit: int) -> list[dict[str, Any]]:
        """The ``limit`` costliest findings, each shown by its longest gap with its causes (re-read around
        that gap) and what the launching host thread was doing during it."""
        out, asked, launching = [], [], []  # entries; for those with a launching thread: their index, the gap
        for name, g in sorted(self.groups.items(), key=lambda kv: -kv[1]["total_ns"])[:limit]:
            length, g0, g1, label, step_start = g["longest"]
            ops = load_ops(con, vocab, rank, device_id, g0, g1)
            host = HostActivity.load(con, rank, marker, g0, g1)
            by_cause, nxt = attribute_gaps(iv.Intervals(np.array([g0]), np.array([g1])), ops, host)
            j = int(nxt[0])
            entry: dict[str, Any] = {
                "rank": rank, "device": device_id, "next_kernel": name or None, "occurrences": g["occurrences"],
                "total_ns": g["total_ns"], "step": label, "start_ns": g0, "step_offset_ns": g0 - step_start,
                "dur_ns": length, "by_cause": by_cause,
                "cause": max(by_cause, key=lambda c: by_cause[c]),
            }
            if j >= 0 and ops.launch_tid[j] >= 0:
                asked.append(len(out))
                launching.append((int(ops.pid[j]), int(ops.launch_tid[j]), g0, g1))
            out.append(entry)
        for i, context in zip(asked, gap_contexts(con, rank, launching), strict=True):
            out[i]["host"] = context
        return out


class _MedianLaunches:
    """Per (class, kernel name) in the device's median step: its first launch there, as ncu's launch skip
    (earlier launches of that function name in the process), the earlier launches of that very name
    (rocprofv3's count) and whether it ran in a graph. The median step is known from the windows (a step's
    duration is its window's), so its first launches are picked while its batch is read."""

    def __init__(self, windows: list[StepWindow]) -> None:
        self.index = sorted(range(len(windows)), key=lambda i: windows[i].dur_ns)[len(windows) // 2] if windows else -1
        self.keys: dict[tuple[str, str], int] = {}  # key -> position among the picked
        self.picked: list[DeviceOps] = []

    def add(self, step_index: int, ops: DeviceOps, owned: np.ndarray) -> None:
        """The ops of the median step's piece (``owned``, in order) whose (class, name) is new."""
        if step_index != self.index or owned.size == 0:
            return
        code = ops.name_code[owned]
        first = np.full(len(ops.names), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, code, np.arange(code.size, dtype=np.int64))
        take = []
        for i in owned[np.sort(first[first != np.iinfo(np.int64).max])].tolist():  # by first appearance
            key = (str(ops.cls[i]), str(ops.name[i]))
            if key not in self.keys:
                self.keys[key] = len(self.keys)
                take.append(i)
        if take:
            self.picked.append(_take(ops, np.array(take, dtype=np.int64)))

    def finish(self, con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], tuple[int, int, bool]]:
        if not self.picked:
            return {}
        ops = self.picked[0] if len(self.picked) == 1 else _concat(self.picked)
        by_fn, by_name = launch_skips(con, ops, np.arange(len(ops), dtype=np.int64))
        return {(str(ops.cls[i]), str(ops.name[i])): (int(f), int(n), bool(ops.in_graph[i]))
                for i, f, n in zip(range(len(ops)), by_fn.tolist(), by_name.tolist(), strict=True)}


_COLUMNS = ("start_ns", "end_ns", "stream_id", "cls", "name", "pid", "launch_tid", "launch_start_ns", "launch_end_ns",
            "in_graph", "cls_code", "name_code")


def _take(ops: DeviceOps, idx: np.ndarray) -> DeviceOps:
    """The ops at ``idx`` (in that order), as their own ``DeviceOps``."""
    return DeviceOps(rank=ops.rank, device_id=ops.device_id, class_names=ops.class_names, names=ops.names,
                     **{c: getattr(ops, c)[idx] for c in _COLUMNS})


def _concat(parts: list[DeviceOps]) -> DeviceOps:
    p = parts[0]
    return DeviceOps(rank=p.rank, device_id=p.device_id, class_names=p.class_names, names=p.names,
                     **{c: np.concatenate([getattr(x, c) for x in parts]) for c in _COLUMNS})


def analyze_all(con: duckdb.DuckDBPyConnection, vocab: Vocabulary, pairs: list[tuple[int, int]],
                opts: AnalyzeOptions, rules: ClassRules, jobs: int) -> list[DeviceAnalysis]:
    """Every (rank, device) of ``pairs``, in that order, ``jobs`` at a time in threads (DuckDB runs each
    thread's queries on its own cursor, without the GIL). A cursor sees the store's tables but not the
    temporary views and tables of ``con``, so each thread makes its own (the same names, codes and classes:
    ``prepare`` numbers names in one sorted order), and the results equal a run in one thread."""
    def device(c: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> DeviceAnalysis:
        with reuse_reads(opts.batch_rows):  # a one-batch device is read once, not again per costly gap
            return analyze_device(c, vocab, rank, device_id, opts, rules.communication)

    if jobs <= 1 or len(pairs) <= 1:
        return [device(con, rank, device_id) for rank, device_id in pairs]
    local = threading.local()
    cursors: list[duckdb.DuckDBPyConnection] = []
    lock = threading.Lock()

    def one(pair: tuple[int, int]) -> DeviceAnalysis:
        if not hasattr(local, "con"):
            cur = con.cursor()
            with lock:
                cursors.append(cur)
            create_views(cur)
            prepare(cur, rules)
            local.con = cur
        return device(local.con, pair[0], pair[1])

    try:
        with ThreadPoolExecutor(max_workers=min(jobs, len(pairs))) as pool:
            return list(pool.map(one, pairs))
    finally:
        for cur in cursors:
            cur.close()


@dataclass
class _Reduction:
    """What the analysis of one device keeps as it reads its batches: per-step summaries and the reductions."""

    kernels: _KernelTime
    gap_groups: _GapGroups
    collectives: CollectiveCollector
    median: _MedianLaunches
    accounts: list[StepAccount] = field(default_factory=list)
    causes: list[dict[str, int]] = field(default_factory=list)  # gap ns by cause, per step
    heads: list[dict[str, int]] = field(default_factory=list)  # per step: GPU idle before its first op


def analyze_device(con: duckdb.DuckDBPyConnection, vocab: Vocabulary, rank: int, device_id: int,
                   opts: AnalyzeOptions, communication: frozenset[str]) -> DeviceAnalysis:
    """Steps of one device, each accounted a batch of steps at a time (a long step in time pieces), reduced to
    summaries."""
    extent = device_extent(con, rank, device_id)
    windows, source = find_steps(con, rank, device_id, extent, opts.step_regex, opts.batch_rows)
    if opts.skip_steps:
        if opts.skip_steps >= len(windows):
            raise InputError(f"--skip-steps {opts.skip_steps}: rank {rank} device {device_id} has only "
                             f"{len(windows)} steps")
        windows = windows[opts.skip_steps:]
    marker = step_marker(opts)
    red = _Reduction(_KernelTime(len(vocab.names)), _GapGroups(),
                     CollectiveCollector(rank, device_id, communication,
                                         steps_comparable=source.kind in ("regex", "profiler_step")),
                     _MedianLaunches(windows))
    for batch in batches(con, rank, device_id, extent, windows, opts.batch_rows):
        _analyze_batch(con, vocab, rank, device_id, batch, marker, communication, red)
    kernels = red.kernels
    kernel_ns = {(str(vocab.class_names[vocab.cls_of_code[c]]), str(vocab.names[c])): int(kernels.ns[c])
                 for c in kernels.codes_in_order()}
    kernel_launches = {(str(vocab.class_names[vocab.cls_of_code[c]]), str(vocab.names[c])): int(kernels.launches[c])
                       for c in kernels.codes_in_order()}
    return DeviceAnalysis(
        rank=rank, device_id=device_id, extent=extent, classes=_device_classes(con, rank, device_id),
        source=source, accounts=red.accounts, causes=red.causes, kernel_ns=kernel_ns,
        kernel_launches=kernel_launches, median_launches=red.median.finish(con),
        top_gaps=red.gap_groups.top(con, vocab, rank, device_id, marker, opts.top_gaps),
        collectives=red.collectives.finish(), heads=red.heads,
        head_context=_head_context(con, vocab, rank, device_id, red.accounts, red.heads, marker),
    )


def _head_context(con: duckdb.DuckDBPyConnection, vocab: Vocabulary, rank: int, device_id: int,
                  accounts: list[StepAccount], heads: list[dict[str, int]], marker: str) -> dict[str, Any] | None:
    """The longest GPU idle before a step's first operation: its step, length and what the launching host
    thread was doing then (the range and the API call covering most of it)."""
    if not heads or max(h["total_ns"] for h in heads) <= 0:
        return None
    k = max(range(len(heads)), key=lambda i: heads[i]["total_ns"])
    w, length = accounts[k].window, heads[k]["total_ns"]
    out: dict[str, Any] = {"step": w.label, "dur_ns": length}
    ops = load_ops(con, vocab, rank, device_id, w.start_ns, w.start_ns + length)
    j = int(np.searchsorted(ops.start_ns, w.start_ns + length, side="left"))
    if j < len(ops) and ops.launch_tid[j] >= 0:
        out["host"] = gap_context(con, rank, int(ops.pid[j]), int(ops.launch_tid[j]), w.start_ns,
                                  w.start_ns + length)
    return out


def _analyze_batch(con: duckdb.DuckDBPyConnection, vocab: Vocabulary, rank: int, device_id: int, batch: Batch,
                   marker: str, communication: frozenset[str], red: _Reduction) -> None:
    """Account a batch of consecutive steps on their operations, host activity and collective metadata, read
    for the batch alone (a long step: for one time piece at a time), into ``red``."""
    if batch.edges:  # one long step (a whole capture), read a piece at a time
        step = _Step(batch.windows[0], len(red.accounts), communication, red)
        for a, b in batch.pieces():
            ops = load_ops(con, vocab, rank, device_id, a, b)
            host = HostActivity.load(con, rank, marker, a, b)
            red.collectives.meta = load_metadata(con, rank, device_id, communication, a, b)
            step.add(ops, host, a, b)
            del ops, host
        step.finish()
        return
    lo, hi = batch.windows[0].start_ns, batch.windows[-1].end_ns
    ops = load_ops(con, vocab, rank, device_id, lo, hi)
    host = HostActivity.load(con, rank, marker, lo, hi)
    red.collectives.meta = load_metadata(con, rank, device_id, communication, lo, hi)
    for w in batch.windows:
        step = _Step(w, len(red.accounts), communication, red)
        step.add(ops, host, w.start_ns, w.end_ns)
        step.finish()


class _Step:
    """One step accounted piece by piece (one piece unless it is long), its reductions fed as it goes."""

    def __init__(self, window: StepWindow, index: int, communication: frozenset[str], red: _Reduction) -> None:
        self.window, self.index, self.communication, self.red = window, index, communication, red
        self.pieces: list[Piece] = []
        self.by_cause = np.zeros(len(CAUSES), dtype=np.int64)
        self.head = np.zeros(len(CAUSES), dtype=np.int64)
        self.ops: DeviceOps | None = None
        red.collectives.begin_step(window)

    def add(self, ops: DeviceOps, host: HostActivity, a: int, b: int) -> None:
        w, red = self.window, self.red
        piece = account_piece(ops, w, self.communication, a, b)
        per_gap, next_op = gap_causes(piece.gaps, ops, host)
        self.by_cause += per_gap.sum(axis=0)
        if a == w.start_ns and len(piece.gaps) and int(piece.gaps.starts[0]) == w.start_ns:
            self.head = per_gap[0].copy()  # idle from the step's start
        red.collectives.add_piece(ops, piece, per_gap)
        red.kernels.add(ops.name_code[piece.owned], ops.end_ns[piece.owned] - ops.start_ns[piece.owned])
        red.gap_groups.add(piece.gaps, w, ops, next_op)
        red.median.add(self.index, ops, piece.owned)
        self.pieces.append(piece.slim())
        self.ops = ops

    def finish(self) -> None:
        red = self.red
        red.collectives.end_step()
        assert self.ops is not None
        red.accounts.append(merge(self.ops, self.window, self.pieces, self.communication, detail=False))
        red.causes.append(dict(zip(CAUSES, (int(v) for v in self.by_cause), strict=True)))
        head = dict(zip(CAUSES, (int(v) for v in self.head), strict=True))
        red.heads.append({**head, "total_ns": sum(head.values())})
