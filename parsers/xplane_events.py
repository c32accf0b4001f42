"""The events and stats of an XSpace's lines as columns (numpy), decoded in bulk from the lines' raw bytes.

``decode(regions)`` takes, for each line, the bytes of its ``events`` field (``XLine.events = 4``: records of
key byte 0x22, as ``XLineRaw`` leaves them) and returns every event (``XEvent``: ``metadata_id = 1``,
``offset_ps = 2`` or ``num_occurrences = 5`` (a oneof), ``duration_ps = 3``, ``stats = 4``) and every stat
(``XStat``: ``metadata_id = 1`` and one of ``double_value = 2``, ``uint64_value = 3``, ``int64_value = 4``,
``str_value = 5``, ``bytes_value = 6``, ``ref_value = 7``), with the semantics of a protobuf parser: the last
value of a field wins, a oneof holds the member set last, a field of an unexpected wire type is unknown.
Beside it, what the reader builds its rows with: ``Strings`` (every text once, rows carrying codes),
``plane_codes`` (metadata ids to name codes), ``pick`` (an event's first or last stat of a key) and
``inside_recent_module`` (which op events lie in a module execution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tracekit.parsers.xplane_wire import as_buffer, fields, records, walk

EVENTS_KEY = 0x22  # field 4, wire type 2: XLine.events and XEvent.stats alike
_EVENT_SECOND = (0x10, 0x28)  # after metadata_id, an event's offset_ps or num_occurrences (a stat has none)
_WIRE = {2: 1, 3: 0, 4: 0, 5: 2, 6: 2, 7: 0}  # XStat value field -> its wire type


@dataclass(frozen=True)
class Events:
    """One row per event, in line order (``line``: the index of its region)."""

    line: np.ndarray
    metadata_id: np.ndarray
    offset_ps: np.ndarray
    duration_ps: np.ndarray
    num_occurrences: np.ndarray


@dataclass(frozen=True)
class Stats:
    """One row per stat, in rounds (every event's first stat, then every second one, ...: an event's stats
    in the order recorded, a row index growing with it); ``kind`` is the value's field number (0:
    none), ``value`` a varint value (uint64, ``int64_value`` as its two's complement), ``start``/``length``
    the bytes of a string value in ``buf``."""

    event: np.ndarray
    metadata_id: np.ndarray
    kind: np.ndarray
    value: np.ndarray
    start: np.ndarray
    length: np.ndarray


def decode(regions: list[bytes], keep_line: np.ndarray) -> tuple[np.ndarray, np.ndarray, Events, Stats]:
    """(buffer, events per region, events of the regions ``keep_line`` marks, their stats)."""
    sizes = np.fromiter(map(len, regions), np.int64, len(regions))
    lows = np.concatenate([[0], np.cumsum(sizes)])
    buf = as_buffer(b"".join(regions))
    spans = records(buf, 0, int(lows[-1]), EVENTS_KEY, second=_EVENT_SECOND)
    if spans is None:  # a field other than the events among them: walk each region's fields
        found = [(s, e) for i in range(len(regions))
                 for n, w, s, e in walk(buf, int(lows[i]), int(lows[i + 1])) if n == 4 and w == 2]
        spans = (np.array([s for s, _ in found], np.int64), np.array([e for _, e in found], np.int64))
    starts, ends = spans
    line = np.searchsorted(lows, starts, side="right") - 1
    counts = np.bincount(line, minlength=len(regions))
    kept = np.flatnonzero(keep_line[line])
    starts, ends, line = starts[kept], ends[kept], line[kept]
    n = starts.size
    mid, dur, data = np.zeros(n, np.uint64), np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    member = np.zeros(n, np.int8)
    stat_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
    for rnd, f in enumerate(fields(buf, starts, ends)):
        varint = f.wire == 0
        for number, column in ((1, mid), (3, dur)):
            sel = varint & (f.number == number)
            column[f.msg[sel]] = f.value[sel]
        for number in (2, 5):  # the oneof ``data``: offset_ps or num_occurrences, whichever came last
            sel = varint & (f.number == number)
            data[f.msg[sel]] = f.value[sel]
            member[f.msg[sel]] = number
        sel = (f.wire == 2) & (f.number == 4)
        stat_parts.append((f.msg[sel], f.start[sel], f.start[sel] + f.length[sel], rnd))
    i64 = np.int64
    events = Events(line, mid.view(i64), np.where(member == 2, data.view(i64), 0), dur.view(i64),
                    np.where(member == 5, data.view(i64), 0))
    return buf, counts, events, _stats(buf, stat_parts)


def _stats(buf: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> Stats:
    if parts:
        event = np.concatenate([p[0] for p in parts])
        start, end = np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])

    else:
        event = start = end = np.zeros(0, np.int64)
    n = event.size
    mid, value = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    kind = np.zeros(n, np.int8)
    sstart, slength = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for f in fields(buf, start, end):
        sel = (f.wire == 0) & (f.number == 1)
        mid[f.msg[sel]] = f.value[sel]
        for number, wire in _WIRE.items():  # the oneof ``value``: the member set last
            hit = (f.number == number) & (f.wire == wire)
            sel = f.msg[hit]
            if sel.size:
                kind[sel], value[sel] = number, f.value[hit]
                sstart[sel], slength[sel] = f.start[hit], f.length[hit]
    return Stats(event, mid.view(np.int64), kind, value, sstart, slength)


class Strings:
    """Every text of the file once (names, stat texts): rows carry codes into it, -1 for NULL."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.codes: dict[str, int] = {}

    def code(self, value: str | None) -> int:
        if value is None:
            return -1
        if value not in self.codes:
            self.codes[value] = len(self.values)
            self.values.append(value)
        return self.codes[value]

    def map(self, codes: np.ndarray, fn) -> np.ndarray:
        """``codes`` with each text replaced by ``fn(text)`` (a text or None)."""
        return self._lookup(np.array([self.code(fn(v)) for v in list(self.values)], np.int64), codes, -1)

    def test(self, codes: np.ndarray, fn) -> np.ndarray:
        """Whether ``fn(text)`` holds for each code's text (False for NULL)."""
        return self._lookup(np.array([bool(fn(v)) for v in self.values], bool), codes, False)

    @staticmethod
    def _lookup(table: np.ndarray, codes: np.ndarray, null) -> np.ndarray:
        out = table[np.maximum(codes, 0)] if table.size else np.full(codes.size, null, table.dtype)
        out[codes < 0] = null
        return out

    def column(self, codes: np.ndarray) -> pa.Array:
        """The texts of ``codes`` as a dictionary-encoded Arrow column (the store takes it as VARCHAR)."""
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32(), mask=codes < 0),
                                              pa.array(self.values, pa.string()))


def plane_codes(strings: Strings, ids: np.ndarray, names: dict[int, str]) -> np.ndarray:
    """Codes of the metadata names ``ids`` point at in one plane (-1 where the plane has no such id)."""
    if not names or not ids.size:
        return np.full(ids.size, -1, np.int64)
    keys = np.fromiter(names.keys(), np.int64, len(names))
    if keys.min() >= 0 and keys.max() < 1 << 22:  # XPlane numbers its metadata 1, 2, ...: a dense table
        table = np.full(int(keys.max()) + 1, -1, np.int64)
        table[keys] = [strings.code(v) for v in names.values()]
        inside = (ids >= 0) & (ids < table.size)
        return np.where(inside, table[np.where(inside, ids, 0)], -1)
    uniq, inverse = np.unique(ids, return_inverse=True)
    return np.array([strings.code(names.get(int(u))) for u in uniq], np.int64)[inverse]


def pick(stats: Stats, key: np.ndarray, which: int, n: int, last: bool) -> np.ndarray:
    """Per event, the index of its last (or first) stat of kind ``which``; -1 where it has none."""
    rows = np.flatnonzero(key == which)
    if last:
        out = np.full(n, -1, np.int64)
        np.maximum.at(out, stats.event[rows], rows)
        return out
    out = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, stats.event[rows], rows)
    out[out == np.iinfo(np.int64).max] = -1
    return out


def inside_recent_module(ops: np.ndarray, module: np.ndarray, line: np.ndarray, start: np.ndarray,
                          end: np.ndarray) -> np.ndarray:
    """Whether each op event lies inside one of the last 4 module executions before it on its line."""
    mods = np.flatnonzero(module)
    if not mods.size or not ops.size:
        return np.zeros(ops.size, bool)
    before = np.cumsum(module)[ops]  # modules up to each op (an op is no module)
    first = np.searchsorted(line[mods], line[ops])  # the first module of the op's line
    inside = np.zeros(ops.size, bool)
    for back in range(1, 5):
        j = before - back
        ok = j >= np.maximum(first, before - 4)
        j = np.where(ok, j, 0)
        inside |= ok & (start[mods[j]] <= start[ops]) & (end[ops] <= end[mods[j]])
    return inside
