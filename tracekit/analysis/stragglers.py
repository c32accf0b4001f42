"""Wait vs transfer in every consistent collective instance, and the rank the others waited for, with why.

On aligned clocks (``tracekit.analysis.clocks``), for each member of an instance:
- ``wait`` = from its arrival (its kernel's start) to the last member's arrival;
- ``transfer`` = from the last arrival to its own end.
So wait + transfer is the member's kernel time (a last arrival that its own end precedes, within the clock
tolerance, counts the whole kernel as wait). The last to arrive is the instance's straggler; the others'
wait is time spent waiting *for it*.

Why was it late? Its own timeline in the window before the collective (since its previous collective ended,
or its step started; ``tracekit.analysis.commlog``) against the median of the other members' windows:
- a later window start: when the window is the step's start, the step started late (``late_step_start``),
  explained by the host gaps at the tail of its previous step, by cause, against the others';
- more host gap time in the window, by cause (``host_gap``);
- more busy time of a kernel class in the window (``kernel_class``).
Contributions are summed over the instances where the rank arrived last; the largest is the cause.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from tracekit.analysis.clocks import median_ns
from tracekit.analysis.collectives import MATCHED, Matching
from tracekit.analysis.commlog import CollectiveLog
from tracekit.analysis.gaps import CAUSES


@dataclass
class Waits:
    """Consistent instances' members (flat, grouped by instance) with their wait and transfer, and per instance
    the last arrival and how much the others waited for it."""

    part: np.ndarray
    rec: np.ndarray
    inst: np.ndarray
    wait_ns: np.ndarray
    transfer_ns: np.ndarray
    heads: np.ndarray  # first member of each instance in the arrays above
    last_part: np.ndarray  # per instance: the participant that arrived last
    last_member: np.ndarray  # per instance: index (into the member arrays) of the last arrival
    waited_ns: np.ndarray  # per instance: the others' wait, summed
    late_ns: np.ndarray  # per instance: last arrival minus the median of the others' arrivals


def waits(logs: list[CollectiveLog], matching: Matching, offset_of: np.ndarray) -> Waits:
    """Wait and transfer of every member of a consistent instance."""
    m = matching.members(MATCHED)
    order = np.argsort(matching.member_inst[m], kind="stable")
    m = m[order]
    part, rec, inst = matching.member_part[m], matching.member_rec[m], matching.member_inst[m]
    start = np.array([logs[p].start_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    end = np.array([logs[p].end_ns[r] for p, r in zip(part.tolist(), rec.tolist(), strict=True)], np.int64)
    arrival = start - offset_of[part]
    if m.size == 0:
        empty = np.zeros(0, np.int64)
        return Waits(part, rec, inst, empty, empty, empty, empty, empty, empty, empty)
    heads = np.flatnonzero(np.concatenate(([True], inst[1:] != inst[:-1])))
    last_arrival = np.maximum.reduceat(arrival, heads)
    sizes = np.diff(np.append(heads, inst.size))
    per_member_last = np.repeat(last_arrival, sizes)
    wait = np.clip(per_member_last - arrival, 0, end - start)
    transfer = (end - start) - wait
    # The last arrival: the latest arrival, ties to the first member (lowest participant).
    is_last = arrival == per_member_last
    group = np.repeat(np.arange(heads.size), sizes)
    last_member = heads + np.array([int(np.argmax(is_last[h:h + n])) for h, n in zip(heads, sizes, strict=True)])
    waited = np.bincount(group, weights=wait, minlength=heads.size).astype(np.int64) - wait[last_member]
    late = np.array([-median_ns(np.delete(arrival[h:h + n], k - h) - arrival[k])
                     for k, h, n in zip(last_member.tolist(), heads.tolist(), sizes.tolist(), strict=True)], np.int64)
    return Waits(part, rec, inst, wait.astype(np.int64), transfer.astype(np.int64), heads, part[last_member],
                 last_member, waited, late)


@dataclass
class Blame:
    """What one participant's lateness came from, summed over the instances where it arrived last."""

    instances: int = 0
    waited_ns: int = 0
    late_ns: list[int] = field(default_factory=list)
    parts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))  # (kind, detail): ns


def _window(logs: list[CollectiveLog], p: int, r: int, offset: int) -> tuple[int, bool, int]:
    """(aligned window start, whether it is the step's start, the step index) of record r of participant p."""
    log = logs[p]
    step = int(log.step[r])
    return int(log.window_start_ns[r]) - offset, bool(log.window_start_ns[r] == log.step_start_ns[step]), step


def blame(logs: list[CollectiveLog], w: Waits, offset_of: np.ndarray) -> dict[int, Blame]:
    """Per participant that arrived last somewhere (others waiting for it), its lateness by cause."""
    out: dict[int, Blame] = defaultdict(Blame)
    sizes = np.diff(np.append(w.heads, w.part.size))
    for i in np.flatnonzero(w.waited_ns > 0).tolist():
        h, n, k = int(w.heads[i]), int(sizes[i]), int(w.last_member[i])
        others = [j for j in range(h, h + n) if j != k]
        s, rs = int(w.part[k]), int(w.rec[k])
        b = out[s]
        b.instances += 1
        b.waited_ns += int(w.waited_ns[i])
        b.late_ns.append(int(w.late_ns[i]))
        ws, first, step = _window(logs, s, rs, int(offset_of[s]))
        wins = [_window(logs, int(w.part[j]), int(w.rec[j]), int(offset_of[w.part[j]])) for j in others]
        late_start = -median_ns([x[0] - ws for x in wins])
        b.parts[("late_step_start" if first else "late_window_start", "")] += late_start
        if first and step > 0 and all(x[2] > 0 for x in wins):
            mine = logs[s].step_tail_gap_ns[step - 1]
            theirs = np.median([logs[int(w.part[j])].step_tail_gap_ns[x[2] - 1] for j, x in zip(others, wins,
                                                                                              strict=True)], axis=0)
            for c, d in zip(CAUSES, (mine - theirs).tolist(), strict=True):
                b.parts[("step_start_gap", c)] += int(d)
        gaps = np.median([logs[int(w.part[j])].window_gap_ns[int(w.rec[j])] for j in others], axis=0)
        for c, d in zip(CAUSES, (logs[s].window_gap_ns[rs] - gaps).tolist(), strict=True):
            b.parts[("host_gap", c)] += int(d)
        classes = set(logs[s].window_class_ns) | {c for j in others for c in logs[int(w.part[j])].window_class_ns}
        for c in sorted(classes):
            def busy(p: int, r: int, cls: str = c) -> int:
                col = logs[p].window_class_ns.get(cls)
                return 0 if col is None else int(col[r])
            b.parts[("kernel_class", c)] += busy(s, rs) - int(np.median([busy(int(w.part[j]), int(w.rec[j]))
                                                                           for j in others]))
    return dict(out)


def cause_of(b: Blame) -> dict[str, object]:
    """The largest contribution to a participant's lateness, in words, with the ranked contributions."""
    ranked = sorted(((ns, kind, detail) for (kind, detail), ns in b.parts.items()
                     if ns > 0 and kind != "step_start_gap"), reverse=True)
    contributions = [{"kind": kind, "detail": detail or None, "excess_ns": ns} for ns, kind, detail in ranked[:5]]
    if not ranked:
        return {"kind": None, "detail": None, "excess_ns": 0, "text": "no excess found in its own timeline",
                "contributions": []}
    ns, kind, detail = ranked[0]
    per = ns // max(b.instances, 1)
    if kind == "late_step_start":
        gaps = sorted(((v, c) for (k, c), v in b.parts.items() if k == "step_start_gap" and v > 0), reverse=True)
        if gaps:
            detail = gaps[0][1]
            text = (f"its steps start late ({per / 1e6:.3f} ms per collective it was last in) after a host gap "
                    f"before the step ({detail}, {gaps[0][0] / 1e6:.3f} ms more than the other ranks in all)")
        else:
            text = f"its steps start late ({per / 1e6:.3f} ms per collective it was last in)"
    elif kind == "late_window_start":
        text = f"its previous collective ended late ({per / 1e6:.3f} ms per collective it was last in)"
    elif kind == "host_gap":
        text = (f"host gaps ({detail}) before the collective, {per / 1e6:.3f} ms more than the other ranks per "
                "collective it was last in")
    else:
        text = (f"{detail} kernels run {per / 1e6:.3f} ms longer than on the other ranks before the collective "
                "(per collective it was last in)")
    return {"kind": kind, "detail": detail or None, "excess_ns": ns, "text": text, "contributions": contributions}
