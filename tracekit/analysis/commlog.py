"""The collectives of one device, recorded in the per-rank part of the analysis for the cross-rank part.

The per-rank part (run with each device's analysis, possibly on a Dask worker) records every communication
kernel that starts in an analysed step: when it ran, what PyTorch or NCCL says it is (collective name,
process group, sequence number, message size), the exposed communication around it, and what this device
did in the window before it (host gaps by cause and busy time by kernel class since its previous collective
or its step's start). That is a few numbers per collective: what crosses ranks stays small. Matching across
ranks is ``tracekit.analysis.collectives``.

Names: ``Collective name`` (PyTorch, on the kernel or on the ``record_param_comms`` op that launched it), else
the NCCL call (NVTX) that enqueued the kernel, else the kernel's class.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import duckdb
import numpy as np

from tracekit import intervals as iv
from tracekit.analysis.accounting import Piece
from tracekit.analysis.gaps import CAUSES
from tracekit.analysis.ops import DeviceOps, distinct
from tracekit.analysis.steps import StepWindow

_DTYPE_BYTES = {"double": 8, "float64": 8, "long": 8, "int64": 8, "float": 4, "float32": 4, "int": 4, "int32": 4,
                "half": 2, "float16": 2, "bfloat16": 2, "short": 2, "int16": 2, "byte": 1, "char": 1, "uint8": 1,
                "int8": 1, "bool": 1}
_NCCL_CALL = ("^nccl(AllReduce|AllGather|ReduceScatter|Reduce|Broadcast|Bcast|Send|Recv|AlltoAll|AllToAll|Gather"
              "|Scatter)")


@lru_cache(maxsize=4096)  # a trace repeats a few names over its collectives
def op_name(text: str | None) -> str | None:
    """A collective's name in one vocabulary: PyTorch's ('all_gather', '_allgather_base'), NCCL's
    ('ncclAllReduce', 'ncclSend') and the kernel classes ('allreduce', 'sendrecv') alike."""
    if not text:
        return None
    t = re.sub(r"[^a-z]", "", text.lower()).removeprefix("nccl")
    for prefix, name in (("allreduce", "allreduce"), ("allgather", "allgather"), ("reducescatter", "reducescatter"),
                         ("alltoall", "alltoall"), ("sendrecv", "sendrecv"), ("send", "sendrecv"),
                         ("recv", "sendrecv"), ("broadcast", "broadcast"), ("bcast", "broadcast"),
                         ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter")):
        if t.startswith(prefix):
            return name
    return t or None


def message_bytes(op: str | None, in_nelems: int | None, out_nelems: int | None, dtype: str | None) -> int:
    """The collective's size as nccl-tests counts it (the all-reduce buffer, the whole gathered buffer, all a
    rank sends in an all-to-all), or -1 when the trace does not say."""
    size = _dtype_bytes(dtype)
    if size is None or op is None:
        return -1
    nelems = out_nelems if op == "allgather" else in_nelems
    return int(nelems) * size if nelems is not None and nelems > 0 else -1


@lru_cache(maxsize=256)
def _dtype_bytes(dtype: str | None) -> int | None:
    return _DTYPE_BYTES.get(re.sub(r"[^a-z0-9]", "", (dtype or "").lower()).removeprefix("torch"))


@dataclass
class CollectiveLog:
    """One device's collectives in its analysed steps (parallel arrays, in start order), its exposed
    communication as intervals, and per step the host gaps at the step's tail (after its last collective),
    which delay the next step's start. Local times: the device's own clock."""

    rank: int
    device_id: int
    stream: np.ndarray  # int64
    start_ns: np.ndarray
    end_ns: np.ndarray
    step: np.ndarray  # int32: index into the device's analysed steps
    name: list[str | None]  # collective (op_name vocabulary)
    name_source: list[str]  # where the name came from: 'pytorch', 'nvtx' or 'class'
    group: list[str | None]  # process group name where recorded
    group_ranks: list[str | None]
    seq: np.ndarray  # int64, -1 where not recorded
    size_bytes: np.ndarray  # int64, -1 where not known
    window_start_ns: np.ndarray  # the window before it: since the previous collective's end or the step start
    window_gap_ns: np.ndarray  # (n, len(CAUSES)) host gap ns in the window, by cause
    window_class_ns: dict[str, np.ndarray]  # busy ns of each kernel class in the window
    step_start_ns: np.ndarray  # per analysed step
    step_label: list[str]
    step_tail_gap_ns: np.ndarray  # (steps, len(CAUSES))
    exposed_start_ns: np.ndarray  # exposed communication intervals (disjoint, sorted)
    exposed_end_ns: np.ndarray
    exposed_step: np.ndarray
    steps_comparable: bool = False  # step labels name the same iteration on every rank (ProfilerStep#N, --step)

    def __len__(self) -> int:
        return int(self.start_ns.size)


def _metadata_sql(comm: list[str]) -> str:
    """Per communication kernel of a device: PyTorch's metadata on the kernel, else on the ``record_param_comms``
    op that launched it, and the NCCL call (NVTX) that enqueued it: the call containing the launch, or the last
    call of the group (``ncclGroupStart`` ... ``ncclGroupEnd``) whose end launched it."""
    classes = ", ".join("'" + c.replace("'", "''") + "'" for c in comm) or "''"
    return f"""
        WITH ck AS (
            SELECT k.start_ns, k.end_ns, coalesce(k.stream_id, -1) AS stream_id, coalesce(k.pid, -1) AS pid,
                   k.correlation_id, n.class
            FROM kernels k JOIN op_names n ON n.name = k.name AND NOT n.is_memop AND NOT n.via_op
            WHERE k.rank = $rank AND k.device_id = $device AND n.class IN ({classes})
              AND k.start_ns >= $lo AND k.start_ns < $hi),
        l AS (SELECT pid, correlation_id, arg_min({{'tid': tid, 'start_ns': start_ns}}, start_ns) AS c
              FROM launches WHERE rank = $rank
                AND correlation_id IN (SELECT correlation_id FROM ck) GROUP BY pid, correlation_id),
        kl AS (SELECT ck.*, l.c.tid AS tid, coalesce(l.c.start_ns, -1) AS launch_ns
               FROM ck LEFT JOIN l USING (pid, correlation_id)),
        ka AS (SELECT * FROM collectives WHERE rank = $rank AND source = 'kernel' AND device_id = $device),
        rpc AS (SELECT pid, tid, start_ns, end_ns, collective, group_name, group_ranks, seq, in_nelems, out_nelems,
                       dtype FROM collectives WHERE rank = $rank AND source = 'record_param_comms'),
        nv AS (SELECT pid, tid, start_ns, coalesce(end_ns, start_ns) AS end_ns, name FROM user_ranges
               WHERE rank = $rank AND regexp_matches(name, '{_NCCL_CALL}')),
        ng AS (SELECT pid, tid, start_ns FROM user_ranges
               WHERE rank = $rank AND name = 'ncclGroupStart')
        SELECT kl.start_ns, kl.end_ns, kl.stream_id, kl.class,
            coalesce(ka.collective, CASE WHEN kl.launch_ns <= r.end_ns THEN r.collective END) AS collective,
            CASE WHEN kl.launch_ns <= nv.end_ns OR nv.start_ns >= ng.start_ns THEN nv.name END AS nccl_call,
            coalesce(ka.group_name, CASE WHEN kl.launch_ns <= r.end_ns THEN r.group_name END) AS group_name,
            coalesce(ka.group_ranks, CASE WHEN kl.launch_ns <= r.end_ns THEN r.group_ranks END) AS group_ranks,
            coalesce(ka.seq, CASE WHEN kl.launch_ns <= r.end_ns THEN r.seq END) AS seq,
            coalesce(ka.in_nelems, CASE WHEN kl.launch_ns <= r.end_ns THEN r.in_nelems END) AS in_nelems,
            coalesce(ka.out_nelems, CASE WHEN kl.launch_ns <= r.end_ns THEN r.out_nelems END) AS out_nelems,
            coalesce(ka.dtype, CASE WHEN kl.launch_ns <= r.end_ns THEN r.dtype END) AS dtype
        FROM kl
        LEFT JOIN ka ON ka.stream_id = kl.stream_id AND ka.start_ns = kl.start_ns
            AND ka.correlation_id IS NOT DISTINCT FROM kl.correlation_id
        ASOF LEFT JOIN rpc r ON r.pid = kl.pid AND r.tid = kl.tid AND kl.launch_ns >= r.start_ns
        ASOF LEFT JOIN nv ON nv.pid = kl.pid AND nv.tid = kl.tid AND kl.launch_ns >= nv.start_ns
        ASOF LEFT JOIN ng ON ng.pid = kl.pid AND ng.tid = kl.tid AND kl.launch_ns >= ng.start_ns
    """


@dataclass
class _Meta:
    name: str | None
    source: str  # 'pytorch' | 'nvtx' | 'class'
    group: str | None
    group_ranks: str | None
    seq: int
    size_bytes: int


def load_metadata(con: duckdb.DuckDBPyConnection, rank: int, device_id: int, communication: frozenset[str],
                  lo: int = -(2**62), hi: int = 2**62) -> dict[tuple[int, int, int], _Meta]:
    """What the trace says of each communication kernel of a device starting in [lo, hi) (a batch of steps),
    keyed by (start_ns, end_ns, stream)."""
    table = con.sql(_metadata_sql(sorted(communication)),
                    params={"rank": rank, "device": device_id, "lo": lo, "hi": hi}).to_arrow_table()
    out: dict[tuple[int, int, int], _Meta] = {}
    for start, end, stream, cls, collective, call, group, ranks, seq, n_in, n_out, dtype in zip(
            *(table.column(c).to_pylist() for c in table.column_names), strict=True):
        pytorch, nvtx = op_name(collective), op_name(call)
        name = pytorch or nvtx or op_name(cls)
        out[(start, end, stream)] = _Meta(
            name, "pytorch" if pytorch else "nvtx" if nvtx else "class", None if group is None else str(group),
            ranks, -1 if seq is None else int(seq), message_bytes(name, n_in, n_out, dtype))
    return out


def _in_windows(lo: np.ndarray, hi: np.ndarray, gaps: iv.Intervals, per_gap: np.ndarray) -> np.ndarray:
    """Per window [lo, hi): ns by cause of the gaps lying wholly inside it (gaps never straddle a collective's
    end or a step's first operation, the only places a window starts)."""
    out = np.zeros((lo.size, per_gap.shape[1]), dtype=np.int64)
    if lo.size == 0 or len(gaps) == 0:
        return out
    cum = np.vstack([np.zeros((1, per_gap.shape[1]), dtype=np.int64), np.cumsum(per_gap, axis=0)])
    first = np.searchsorted(gaps.starts, lo, side="left")
    last = np.searchsorted(gaps.ends, hi, side="right")
    return np.where((last > first)[:, None], cum[np.maximum(last, first)] - cum[first], 0)


@dataclass
class _Anchor:
    """The latest end of a collective so far in the step, with the host gaps by cause that start before it and
    the busy time per class before it, since the step's start; ``gap_ns`` is None until the piece holding that
    instant is read."""

    at_ns: int
    gap_ns: np.ndarray | None
    class_ns: dict[int, int]


@dataclass
class CollectiveCollector:
    """Builds one device's ``CollectiveLog`` step by step, as the device's analysis accounts its steps: each
    step in time pieces (``begin_step``, ``add_piece`` per piece, ``end_step``), a long step in several. A
    collective's window reaches back across pieces; what lies in earlier pieces is carried as running sums
    (no host gap straddles a piece's edge), so a step read in pieces logs what one read would."""

    rank: int
    device_id: int
    communication: frozenset[str]
    meta: dict[tuple[int, int, int], _Meta] = field(default_factory=dict)  # of the batch being read
    steps_comparable: bool = False
    _rows: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    _class_rows: list[tuple[int, dict[str, np.ndarray]]] = field(default_factory=list)  # per piece: busy per class
    _steps: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    _step: dict[str, object] = field(default_factory=dict)  # the step being read

    def begin_step(self, window: StepWindow) -> None:
        self._step = {"window": window, "gap_ns": np.zeros(len(CAUSES), dtype=np.int64), "class_ns": {},
                      "anchor": _Anchor(window.start_ns, np.zeros(len(CAUSES), dtype=np.int64), {}),
                      "exposed": []}

    def add_piece(self, ops: DeviceOps, piece: Piece, per_gap: np.ndarray) -> None:
        """Record the collectives starting in one accounted piece of the step (``per_gap``: its gaps' ns by
        cause, as ``gaps.gap_causes`` gives them)."""
        st = self._step
        w: StepWindow = st["window"]  # type: ignore[assignment]
        lo, a, b = w.start_ns, piece.a, piece.b
        gap_sum: np.ndarray = st["gap_ns"]  # type: ignore[assignment]
        class_sum: dict[int, int] = st["class_ns"]  # type: ignore[assignment]
        anchor: _Anchor = st["anchor"]  # type: ignore[assignment]
        step = len(self._steps["start"])
        st["exposed"].append(piece.exposed)  # type: ignore[union-attr]
        comm_class = np.array([c in self.communication for c in ops.class_names.tolist()], dtype=bool)
        idx = piece.ops_in_window
        is_comm = comm_class[ops.cls_code[idx]]
        s, e = np.clip(ops.start_ns[idx], a, b), np.clip(ops.end_ns[idx], a, b)
        comm = piece.owned[comm_class[ops.cls_code[piece.owned]]]
        comm = comm[ops.start_ns[comm] >= lo]  # a collective belongs to the step it starts in
        starts, ends = ops.start_ns[comm], ops.end_ns[comm]
        # The window before each collective: since the latest end of an earlier collective of the step, else
        # since the step's start.
        prior_end = np.maximum.accumulate(np.concatenate(([anchor.at_ns], ends)))[:-1]
        window = np.minimum(np.maximum(prior_end, lo), starts)
        earlier = window < a  # the window opens in an earlier piece: at the anchor
        gaps = _in_windows(np.maximum(window, a), starts, piece.gaps, per_gap)
        codes = ops.cls_code[idx[~is_comm]]
        cs, ce = s[~is_comm], e[~is_comm]
        unions = {c: iv.union(cs[codes == c], ce[codes == c]) for c in distinct(codes).tolist()}
        if earlier.any():
            gaps[earlier] += gap_sum - anchor.gap_ns
        busy: dict[str, np.ndarray] = {}
        if starts.size:
            for c in sorted(set(unions) | set(class_sum)):
                v = (iv.overlap_per_interval(np.maximum(window, a), starts, unions[c]) if c in unions
                     else np.zeros(starts.size, dtype=np.int64))
                v[earlier] += class_sum.get(c, 0) - anchor.class_ns.get(c, 0)
                busy[str(ops.class_names[c])] = v
        self._rows["window_gap"].append(gaps)
        keys = list(zip(starts.tolist(), ends.tolist(), ops.stream_id[comm].tolist(), strict=True))
        none = _Meta(None, "class", None, None, -1, -1)
        metas = [self.meta.get(k) or none for k in keys]
        r = self._rows
        r["stream"] += [k[2] for k in keys]
        r["start"] += [k[0] for k in keys]
        r["end"] += [k[1] for k in keys]
        r["step"] += [step] * len(keys)
        r["name"] += [m.name or str(ops.cls[j]) for m, j in zip(metas, comm.tolist(), strict=True)]
        r["source"] += [m.source for m in metas]
        r["group"] += [m.group for m in metas]
        r["ranks"] += [m.group_ranks for m in metas]
        r["seq"] += [m.seq for m in metas]
        r["size"] += [m.size_bytes for m in metas]
        r["window"] += window.tolist()
        self._class_rows.append((int(starts.size), {c: v for c, v in busy.items() if v.any()}))
        # Carry the running sums past this piece, and the anchor: the latest collective end, with its sums if
        # it lies in this piece (later, it is read with its piece; earlier, it is kept).
        latest = int(max(anchor.at_ns, int(ends.max()) if ends.size else lo))
        if a <= latest < b and (latest != anchor.at_ns or anchor.gap_ns is None):
            at = np.array([latest])
            before = int(np.searchsorted(piece.gaps.starts, latest, side="left"))  # gaps starting before it
            anchor = _Anchor(latest, gap_sum + per_gap[:before].sum(axis=0),
                             {c: class_sum.get(c, 0) + int(iv.overlap_per_interval(np.array([a]), at, unions[c])[0])
                              if c in unions else class_sum.get(c, 0) for c in set(unions) | set(class_sum)})
        elif latest >= b:
            anchor = _Anchor(latest, None, {})
        st["anchor"] = anchor
        st["gap_ns"] = gap_sum + per_gap.sum(axis=0)
        for c, u in unions.items():
            class_sum[c] = class_sum.get(c, 0) + iv.length(u)

    def end_step(self) -> None:
        st = self._step
        w: StepWindow = st["window"]  # type: ignore[assignment]
        anchor: _Anchor = st["anchor"]  # type: ignore[assignment]
        exposed: list[iv.Intervals] = st["exposed"]  # type: ignore[assignment]
        step = len(self._steps["start"])
        joined = exposed[0] if len(exposed) == 1 else iv.union(np.concatenate([x.starts for x in exposed]),
                                                               np.concatenate([x.ends for x in exposed]))
        self._rows["exposed_start"].append(joined.starts)
        self._rows["exposed_end"].append(joined.ends)
        self._rows["exposed_step"].append(np.full(len(joined), step, dtype=np.int32))
        # The host gaps at the step's tail: after its last collective's end (none when that is past the step).
        tail = (st["gap_ns"] - anchor.gap_ns if anchor.at_ns < w.end_ns and anchor.gap_ns is not None  # type: ignore[operator]
                else np.zeros(len(CAUSES), dtype=np.int64))
        self._steps["start"].append(w.start_ns)
        self._steps["label"].append(w.label)
        self._steps["tail"].append(tail)
        self._step = {}

    def finish(self) -> CollectiveLog:
        r = self._rows
        n = len(r["start"])
        classes = sorted({c for _, part in self._class_rows for c in part})
        width = len(CAUSES)

        def arr(col: str, dtype: type = np.int64) -> np.ndarray:
            return np.array(r[col], dtype=dtype)

        def cat(col: str, dtype: type = np.int64) -> np.ndarray:
            return np.concatenate(r[col]).astype(dtype) if r[col] else np.zeros(0, dtype)

        return CollectiveLog(
            rank=self.rank, device_id=self.device_id, stream=arr("stream"), start_ns=arr("start"),
            end_ns=arr("end"), step=arr("step", np.int32), name=list(r["name"]), name_source=list(r["source"]),
            group=list(r["group"]),
            group_ranks=list(r["ranks"]), seq=arr("seq"), size_bytes=arr("size"), window_start_ns=arr("window"),
            window_gap_ns=np.vstack(r["window_gap"]) if n else np.zeros((0, width), np.int64),
            window_class_ns={c: np.concatenate([part[c] if c in part else np.zeros(k, np.int64)
                                                for k, part in self._class_rows] or [np.zeros(0, np.int64)]
                                               ).astype(np.int64) for c in classes},
            step_start_ns=np.array(self._steps["start"], np.int64), step_label=list(self._steps["label"]),
            step_tail_gap_ns=(np.vstack(self._steps["tail"]) if self._steps["tail"]
                              else np.zeros((0, width), np.int64)),
            exposed_start_ns=cat("exposed_start"), exposed_end_ns=cat("exposed_end"),
            exposed_step=cat("exposed_step", np.int32), steps_comparable=self.steps_comparable,
        )
