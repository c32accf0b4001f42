"""The cross-rank part of ``analyze``: collectives matched, clocks aligned, wait vs transfer, the straggler.

Runs in ``build_analysis`` over the per-device summaries (``DeviceAnalysis.collectives``), so it works the
same when the per-rank part ran on Dask. Order: match instances (``collectives``), estimate each file's
clock offset from them (``clocks``; a file from another run is left out and matching redone), drop instances
whose aligned ends disagree, then wait and transfer per member and the straggler's cause (``stragglers``),
the exposed communication of every step split into wait and transfer, the transfer placed against the
floor's network budget where message sizes are known, and one line for each input that does not fit.
The result is the report's ``ranks`` section (``docs/report-schema.md``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from tracekit import intervals as iv
from tracekit.analysis import clocks
from tracekit.analysis.clocks import median_ns, medians_without_each
from tracekit.analysis.collectives import MATCHED, Matching, match
from tracekit.analysis.commlog import CollectiveLog
from tracekit.analysis.device import DeviceAnalysis
from tracekit.analysis.gpu import TraceGpu, gpu_spec, identify
from tracekit.analysis.network import network_rows
from tracekit.analysis.stragglers import Blame, Waits, blame, cause_of, waits

PER_STEP_ROWS = 100


@dataclass
class RankMeta:
    """What each input file says about the job: its ranks (an Nsight Systems export can hold several, one per
    process: they share its clock), its world size, its host and the wall-clock base of its timeline."""

    file_of: dict[int, str]  # rank -> the file it came from
    world_size: dict[int, int]  # rank -> world size its file names
    host: dict[int, str]
    wall_base_ns: dict[int, int]
    gpu: TraceGpu  # the capture's GPU, as tracekit.analysis.gpu identifies it

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> RankMeta:
        rows = con.execute("""
            SELECT i.source_path, list(DISTINCT i.rank ORDER BY i.rank), max(c.world_size), max(c.host),
                max(c.wall_clock_base_ns)
            FROM trace_info i LEFT JOIN capture c ON c.rank = i.rank GROUP BY ALL ORDER BY 2
        """).fetchall()
        meta = cls({}, {}, {}, {}, identify(con))
        for path, ranks, ws, hostname, base in rows:
            for rank in ranks:
                meta.file_of[rank] = str(path)
                if ws is not None:
                    meta.world_size[rank] = int(ws)
                if hostname:
                    meta.host[rank] = str(hostname)
                if base is not None:
                    meta.wall_base_ns[rank] = int(base)
        return meta


@dataclass
class CrossRank:
    """The ``ranks`` report section, with what the pictures need: per device its clock offset and its records'
    wait and transfer (-1 where the record is in no consistent instance), and per device per analysed step (in
    the order of its accounts) the step's exposed communication that was wait and that was transfer (empty when
    no instance matched: nothing was measured)."""

    section: dict[str, Any]
    participants: list[tuple[int, int]]
    offset_ns: list[int]
    record_wait_ns: list[np.ndarray]
    record_transfer_ns: list[np.ndarray]
    record_last: list[np.ndarray]  # per record: the participant (index) that arrived last in its instance, or -1
    step_wait_ns: list[list[int]]
    step_transfer_ns: list[list[int]]

    def step_split(self, rank: int, device_id: int, step: int) -> tuple[int, int] | None:
        """(wait, transfer) of one analysed step's exposed communication (``step``: its position among the
        device's accounts); None when nothing was measured."""
        if not self.step_wait_ns or (rank, device_id) not in self.participants:
            return None
        p = self.participants.index((rank, device_id))
        return self.step_wait_ns[p][step], self.step_transfer_ns[p][step]

    def verdict_note(self, exposed_ns: int, wait_ns: int | None) -> tuple[int, str | None]:
        """How much exposed communication a slow kernel class on the late rank explains (it belongs to question
        3, not to the pipeline), and the reason line when exposed communication is mostly wait."""
        s = self.section.get("straggler")
        if not s or not wait_ns or not exposed_ns or wait_ns < 0.5 * exposed_ns:
            return 0, None
        cause = s["cause"]
        shares = [c["excess_ns"] for c in cause["contributions"]]
        kernel = sum(c["excess_ns"] for c in cause["contributions"] if c["kind"] == "kernel_class")
        kernel_wait = int(wait_ns * kernel / sum(shares)) if shares else 0
        who = f"rank {s['rank']}" + (f" device {s['device']}" if self.section["devices_per_rank"] > 1 else "")
        return kernel_wait, (f"exposed communication is {wait_ns / exposed_ns:.0%} waiting in collectives, mostly "
                             f"for {who} ({cause['text']}): the fix is on {who}, not the network")


def _no_collectives(log: CollectiveLog) -> CollectiveLog:
    """The log without its records (a file from another run takes no part in matching)."""
    fields = {f.name: getattr(log, f.name) for f in dataclasses.fields(log)}
    cut = {k: (v[:0] if k in ("stream", "start_ns", "end_ns", "step", "name", "name_source", "group", "group_ranks",
                              "seq", "size_bytes", "window_start_ns", "window_gap_ns") else v)
           for k, v in fields.items()}
    cut["window_class_ns"] = {}
    return CollectiveLog(**cut)


def _domains(results: list[DeviceAnalysis], meta: RankMeta, matching: Matching) -> list[clocks.ClockDomain]:
    """One clock per input file (all its ranks and devices); the reference first: the file of the lowest rank
    among those with matched collectives."""
    with_matched = {int(p) for p in matching.member_part[matching.members(MATCHED)]}
    by_file: dict[str, list[int]] = {}
    for p, r in enumerate(results):
        by_file.setdefault(meta.file_of.get(r.rank, f"rank {r.rank}"), []).append(p)

    def first_rank(parts: list[int]) -> int:
        return min(results[p].rank for p in parts)

    files = sorted(by_file.values(), key=lambda parts: (not any(p in with_matched for p in parts), first_rank(parts)))
    return [clocks.ClockDomain(first_rank(parts), parts, meta.host.get(first_rank(parts)),
                               meta.wall_base_ns.get(first_rank(parts)),
                               ranks=sorted({results[p].rank for p in parts})) for parts in files]


def _ranges(ranks: list[int]) -> str:
    """'2-5, 7' for [2, 3, 4, 5, 7]."""
    out, run = [], []
    for r in sorted(ranks):
        if run and r != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(r)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _input_reasons(results: list[DeviceAnalysis], meta: RankMeta, logs: list[CollectiveLog]) -> list[str]:
    """One line per way the inputs do not form one job: world sizes that differ, ranks not given."""
    reasons = []
    present = sorted({r.rank for r in results})
    sizes = sorted(set(meta.world_size.values()))
    if len(sizes) > 1:
        parts = "; ".join(f"{s} on rank{'s' if sum(v == s for v in meta.world_size.values()) > 1 else ''} "
                          f"{_ranges([r for r, v in meta.world_size.items() if v == s])}" for s in sizes)
        reasons.append(f"the files name different world sizes ({parts}): ranks from different jobs?")
    elif sizes:
        missing = [r for r in range(sizes[0]) if r not in present]
        if missing:
            reasons.append(f"{len(missing)} of {sizes[0]} ranks are not in the capture ({_ranges(missing)}): wait is "
                           f"measured among the {len(present)} given, and a missing rank may be the one they "
                           "waited for")
    texts = {text for log in logs for text in log.group_ranks if text}  # few distinct texts, many records
    named = {int(x) for text in texts for x in re.findall(r"\d+", text)}
    if named and (absent := sorted(named - set(present))) and not sizes:
        reasons.append(f"ranks {_ranges(absent)} of the process groups are not in the capture: wait is measured "
                       "among the ranks given")
    return reasons


def cross_rank(results: list[DeviceAnalysis], meta: RankMeta, hardware_key: str | None) -> CrossRank | None:
    """The cross-rank analysis of the per-device results; None for a single device."""
    if len(results) < 2 or any(r.collectives is None for r in results):
        return None
    logs = [r.collectives for r in results]
    reasons = _input_reasons(results, meta, logs)
    matching = match(logs)
    domains = _domains(results, meta, matching)
    clocks.estimate(logs, matching, domains)
    if any(d.excluded for d in domains):
        gone = {p for d in domains if d.excluded for p in d.participants}
        logs = [_no_collectives(log) if p in gone else log for p, log in enumerate(logs)]
        matching = match(logs)
        kept = _domains(results, meta, matching)
        excluded = {d.rank: d for d in domains if d.excluded}
        domains = [excluded.get(d.rank, d) for d in kept]
        clocks.estimate(logs, matching, [d for d in domains if not d.excluded])
    offset_of = np.zeros(len(results), np.int64)
    for d in domains:
        offset_of[d.participants] = d.offset_ns
    clocks.check(logs, matching, offset_of)
    w = waits(logs, matching, offset_of)
    blames = blame(logs, w, offset_of)
    section = _section(results, logs, matching, domains, w, blames, offset_of, meta, hardware_key)
    section["reasons"] = reasons + _matching_reasons(logs, matching, domains)
    rec_wait, rec_transfer, rec_last = _record_arrays(logs, w)
    step_wait, step_transfer = _exposed_split(logs, rec_wait, rec_transfer) if w.part.size else ([], [])
    return CrossRank(section, [(r.rank, r.device_id) for r in results], offset_of.tolist(), rec_wait, rec_transfer,
                     rec_last, step_wait, step_transfer)


def _matching_reasons(logs: list[CollectiveLog], matching: Matching, domains: list[clocks.ClockDomain]) -> list[str]:
    counts = matching.counts()
    reasons = [f"rank {d.rank}: {d.note}" for d in domains if d.excluded]
    reasons += [f"rank {d.rank}: clock offset {d.note}" for d in domains
                if not d.excluded and not d.estimated and any(len(logs[p]) for p in d.participants)]
    with_collectives = sum(1 for log in logs if len(log))
    if with_collectives >= 2 and counts["matched"] == 0:
        reasons.append(f"no collective matches across ranks ({counts['unmatched']} unmatched, {counts['ambiguous']} "
                       f"ambiguous, {counts['inconsistent']} inconsistent instances): ranks from different jobs, or "
                       "ranks without their peers; wait and transfer are not measured")
    elif counts["unmatched"] + counts["ambiguous"] + counts["inconsistent"]:
        reasons.append(f"{counts['matched']} collective instances matched across ranks; {counts['unmatched']} "
                       f"unmatched, {counts['ambiguous']} ambiguous and {counts['inconsistent']} inconsistent "
                       "ones are left out of wait and transfer")
    return reasons


def _record_arrays(logs: list[CollectiveLog], w: Waits) -> tuple[list[np.ndarray], ...]:
    """Per device and record: its wait, its transfer and its instance's last arrival (-1: no instance)."""
    wait = [np.full(len(log), -1, np.int64) for log in logs]
    transfer = [np.full(len(log), -1, np.int64) for log in logs]
    last = [np.full(len(log), -1, np.int64) for log in logs]
    group = np.repeat(np.arange(w.heads.size), np.diff(np.append(w.heads, w.part.size)))
    for p, r, a, b, g in zip(w.part.tolist(), w.rec.tolist(), w.wait_ns.tolist(), w.transfer_ns.tolist(),
                             group.tolist(), strict=True):
        wait[p][r], transfer[p][r], last[p][r] = a, b, int(w.last_part[g])
    return wait, transfer, last


def _exposed_split(logs: list[CollectiveLog], rec_wait: list[np.ndarray], rec_transfer: list[np.ndarray]
                   ) -> tuple[list[list[int]], list[list[int]]]:
    """Per device, per analysed step: its exposed communication inside its collectives' wait, and inside
    their transfer (outside any wait)."""
    wait_out: list[list[int]] = []
    transfer_out: list[list[int]] = []
    for log, wait, _ in zip(logs, rec_wait, rec_transfer, strict=True):
        ok = wait >= 0
        split = log.start_ns[ok] + wait[ok]
        waiting = iv.union(log.start_ns[ok], split)
        moving = iv.difference(iv.union(split, log.end_ns[ok]), waiting)
        steps = log.step_start_ns.size
        for cover, out in ((waiting, wait_out), (moving, transfer_out)):
            ns = iv.overlap_per_interval(log.exposed_start_ns, log.exposed_end_ns, cover)
            out.append(np.bincount(log.exposed_step, weights=ns, minlength=steps).astype(np.int64).tolist())
    return wait_out, transfer_out


def _label(results: list[DeviceAnalysis], p: int) -> dict[str, int]:
    return {"rank": results[p].rank, "device": results[p].device_id}


def _section(results: list[DeviceAnalysis], logs: list[CollectiveLog], matching: Matching,
             domains: list[clocks.ClockDomain], w: Waits, blames: dict[int, Blame], offset_of: np.ndarray,
             meta: RankMeta, hardware_key: str | None) -> dict[str, Any]:
    n = len(results)
    wait_by = np.bincount(w.part, weights=w.wait_ns, minlength=n).astype(np.int64)
    transfer_by = np.bincount(w.part, weights=w.transfer_ns, minlength=n).astype(np.int64)
    count_by = np.bincount(w.part, minlength=n)
    waited_for = np.bincount(w.last_part, weights=w.waited_ns, minlength=n).astype(np.int64)
    last_in = np.bincount(w.last_part[w.waited_ns > 0], minlength=n)
    late_start = _late_step_starts(logs, offset_of)
    per_rank = [{**_label(results, p), "host": meta.host.get(results[p].rank), "offset_ns": int(offset_of[p]),
                 "collectives": int(count_by[p]), "wait_ns": int(wait_by[p]), "transfer_ns": int(transfer_by[p]),
                 "waited_for_ns": int(waited_for[p]), "last_in": int(last_in[p]),
                 "step_start_late_ns": late_start[p]} for p in range(n)]
    total_wait = int(w.wait_ns.sum())
    straggler = None
    if total_wait > 0:
        s = int(np.argmax(waited_for))
        b = blames.get(s, Blame())
        straggler = {**_label(results, s), "waited_for_ns": int(waited_for[s]),
                     "share": float(waited_for[s] / total_wait), "instances": b.instances,
                     "late_ns": median_ns(b.late_ns) if b.late_ns else 0, "cause": cause_of(b)}
    counts = matching.counts()
    methods = sorted({m for m, st in zip(matching.method, matching.status.tolist(), strict=True) if st == MATCHED})
    gpu = gpu_spec(hardware_key, meta.gpu)
    return {
        "participants": n, "devices_per_rank": max(sum(1 for r in results if r.rank == x.rank) for x in results),
        "instances": counts, "methods": methods, "name_sources": _name_sources(logs, w),
        "unmatched_records": int(sum(len(log) for log in logs) - w.part.size),
        "clocks": [{"rank": d.rank, "ranks": d.ranks, "host": d.host, "offset_ns": d.offset_ns,
                    "residual_ns": d.residual_ns,
                    "collectives": d.collectives, "estimated": d.estimated, "excluded": d.excluded, "note": d.note}
                   for d in sorted(domains, key=lambda d: d.rank)],
        "hosts": _hosts(domains),
        "wait_ns": total_wait, "transfer_ns": int(w.transfer_ns.sum()),
        "per_rank": per_rank, "straggler": straggler,
        "per_step": _per_step(results, logs, w),
        "network": network_rows(logs, w, gpu),
        "network_gpu": gpu.key if gpu is not None else None,
    }


def _name_sources(logs: list[CollectiveLog], w: Waits) -> dict[str, int]:
    """Matched collectives' records by where their name came from (PyTorch's metadata, NCCL's NVTX, the class)."""
    out: dict[str, int] = {}
    for p, r in zip(w.part.tolist(), w.rec.tolist(), strict=True):
        source = logs[p].name_source[r]
        out[source] = out.get(source, 0) + 1
    return dict(sorted(out.items()))


def _hosts(domains: list[clocks.ClockDomain]) -> list[dict[str, Any]]:
    """Per host the files name (Nsight Systems), the offset of its clock: the median of its files' estimates,
    and their spread (files of one host share its clock, so a spread well above the residuals is suspect)."""
    by_host: dict[str, list[clocks.ClockDomain]] = {}
    for d in domains:
        if d.host is not None and d.estimated:
            by_host.setdefault(d.host, []).append(d)
    return [{"host": h, "ranks": sorted(d.rank for d in ds), "offset_ns": median_ns([d.offset_ns for d in ds]),
             "spread_ns": max(d.offset_ns for d in ds) - min(d.offset_ns for d in ds)}
            for h, ds in sorted(by_host.items())]


def _late_step_starts(logs: list[CollectiveLog], offset_of: np.ndarray) -> list[int | None]:
    """Per device: the median over its steps of (its aligned step start minus the median of the other devices'
    aligned starts of the step with the same label); None where no other device has the label."""
    starts: dict[str, tuple[list[int], list[int]]] = {}
    for p, log in enumerate(logs):
        for label, s in zip(log.step_label, log.step_start_ns.tolist(), strict=True):
            entry = starts.setdefault(label, ([], []))
            entry[0].append(p)
            entry[1].append(s - int(offset_of[p]))
    late: list[list[int]] = [[] for _ in logs]
    for parts, at in starts.values():
        if len(parts) < 2:
            continue
        rel = np.array(at, np.int64) - at[0]  # relative to one of them: exact in float-free integer arithmetic
        for p, d in zip(parts, (rel - medians_without_each(rel)).tolist(), strict=True):
            late[p].append(d)
    return [median_ns(v) if v else None for v in late]


def _per_step(results: list[DeviceAnalysis], logs: list[CollectiveLog], w: Waits) -> list[dict[str, Any]]:
    """Per step (by label): the device the others waited for most, and how long in all."""
    per: dict[str, dict[int, int]] = {}
    order: dict[str, int] = {}
    for i in np.flatnonzero(w.waited_ns > 0).tolist():
        k = int(w.last_member[i])
        p, r = int(w.part[k]), int(w.rec[k])
        label = logs[p].step_label[int(logs[p].step[r])]
        order.setdefault(label, int(logs[p].step[r]))
        per.setdefault(label, {})
        per[label][p] = per[label].get(p, 0) + int(w.waited_ns[i])
    rows = []
    for label in sorted(per, key=lambda x: order[x])[:PER_STEP_ROWS]:
        p = max(per[label], key=lambda q: (per[label][q], -q))
        rows.append({"step": label, **_label(results, p), "waited_for_ns": per[label][p],
                     "wait_ns": sum(per[label].values())})
    return rows
