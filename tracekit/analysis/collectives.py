"""Matching the instances of one collective across the devices of its communicator.

Each device's collectives (``tracekit.analysis.commlog``) are grouped by communicator: the process group
where PyTorch names it, else the communication stream, streams being paired across devices by their order
of first use (a device's first communication stream is every device's first). Within a communicator an
instance is keyed
- by the process group's sequence number where Kineto records it (``Seq``): exact, whatever was dropped;
- otherwise by order: NCCL issues a communicator's collectives in the same order on every rank, so each
  device's n-th collective on it is the n-th instance; counted within each step where step labels name the
  same iteration on every rank (``ProfilerStep#N``, ``--step``), so a collective one rank's capture missed
  (it started later, or was sampled) shifts the order of one step only.
An instance that some device of the communicator lacks is *unmatched*; one whose members name different
collectives, or whose key repeats on a device, is *ambiguous*; one whose members' ends disagree once the
clocks are aligned (``tracekit.analysis.clocks``) is *inconsistent*. All are counted, none silently dropped;
only consistent instances enter wait, transfer and straggler figures.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from tracekit.analysis.commlog import CollectiveLog

MATCHED, UNMATCHED, AMBIGUOUS, INCONSISTENT = 0, 1, 2, 3
STATUS = ("matched", "unmatched", "ambiguous", "inconsistent")


@dataclass
class Matching:
    """Candidate instances and their members (flat arrays: member i is record ``member_rec[i]`` of participant
    ``member_part[i]``, in instance ``member_inst[i]``), with a status per instance."""

    communicator: list[str]  # per instance
    method: list[str]  # per instance: 'seq' or 'order'
    status: np.ndarray  # int8 per instance (MATCHED, UNMATCHED, AMBIGUOUS, INCONSISTENT)
    member_part: np.ndarray
    member_rec: np.ndarray
    member_inst: np.ndarray
    communicators: dict[str, list[int]] = field(default_factory=dict)  # label: participants that use it

    @property
    def n_instances(self) -> int:
        return len(self.communicator)

    def members(self, status: int = MATCHED) -> np.ndarray:
        """Indices of the members of instances with ``status``."""
        return np.flatnonzero(self.status[self.member_inst] == status)

    def counts(self) -> dict[str, int]:
        """Instances by status."""
        return {name: int((self.status == code).sum()) for code, name in enumerate(STATUS)}


def _communicator_keys(log: CollectiveLog) -> list[str]:
    """Each record's communicator label: its process group, else its stream's rank among this device's
    communication streams by first use (labels are comparable across devices)."""
    order: dict[int, int] = {}
    for g, s in zip(log.group, log.stream.tolist(), strict=True):
        if g is None and s not in order:
            order[s] = len(order)
    return [f"group {g}" if g is not None else f"stream #{order[s]}"
            for g, s in zip(log.group, log.stream.tolist(), strict=True)]


def _order_keys(log: CollectiveLog, recs: list[int], per_step: bool) -> list[object]:
    """Order keys of a device's records on one communicator: n, or (step label, n within the step)."""
    if not per_step:
        return list(range(len(recs)))
    counter: dict[str, int] = defaultdict(int)
    keys: list[object] = []
    for r in recs:
        label = log.step_label[int(log.step[r])]
        keys.append((label, counter[label]))
        counter[label] += 1
    return keys


def _sortable(key: object) -> tuple:
    """Instance keys in a stable order (sequence numbers, ordinals, or (step label, ordinal))."""
    return key if isinstance(key, tuple) else ("", key)


def match(logs: list[CollectiveLog]) -> Matching:
    """Candidate instances of every communicator shared by two or more devices."""
    by_comm: dict[str, dict[int, list[int]]] = defaultdict(dict)  # label -> participant -> records (start order)
    for p, log in enumerate(logs):
        for rec, label in enumerate(_communicator_keys(log)):
            by_comm[label].setdefault(p, []).append(rec)
    communicator, method, status = [], [], []
    m_part: list[int] = []
    m_rec: list[int] = []
    m_inst: list[int] = []
    used: dict[str, list[int]] = {}
    for label in sorted(by_comm):
        parts = by_comm[label]
        used[label] = sorted(parts)
        by_seq = all(logs[p].seq[recs].min() >= 0 for p, recs in parts.items())
        per_step = all(logs[p].steps_comparable for p in parts)
        instances: dict[object, list[tuple[int, int]]] = defaultdict(list)
        repeated: set[object] = set()
        for p, recs in parts.items():
            keys = logs[p].seq[recs].tolist() if by_seq else _order_keys(logs[p], recs, per_step)
            seen: set[object] = set()
            for key, rec in zip(keys, recs, strict=True):
                if key in seen:
                    repeated.add(key)
                seen.add(key)
                instances[key].append((p, rec))
        for key in sorted(instances, key=_sortable):
            members = instances[key]
            names = {logs[p].name[r] for p, r in members}
            if len(parts) < 2 or len({p for p, _ in members}) < len(parts):
                state = UNMATCHED
            elif key in repeated or len(names) > 1:
                state = AMBIGUOUS
            else:
                state = MATCHED
            i = len(communicator)
            communicator.append(label)
            method.append("seq" if by_seq else "order")
            status.append(state)
            for p, r in members:
                m_part.append(p)
                m_rec.append(r)
                m_inst.append(i)
    return Matching(communicator, method, np.array(status, dtype=np.int8), np.array(m_part, dtype=np.int64),
                    np.array(m_rec, dtype=np.int64), np.array(m_inst, dtype=np.int64), used)
