"""Protobuf wire decoding in bulk, with numpy: the events of an XPlane without one Python object per event.

The XPlane reader parses a file's frame (planes, lines, metadata) in C with ``XSpaceRaw``, which leaves each
line's events as raw bytes, and decodes those bytes here, every event and stat of the file at once:

- ``records(buf, lo, hi, tag)``: the length-delimited records (``tag`` ``len`` ``body``) that tile
  ``buf[lo:hi]``, found without walking them one by one: every byte equal to ``tag`` is a candidate start, each
  candidate's successor is the position after its record, and the chain from ``lo`` is followed by pointer
  doubling (log2(records) rounds over all candidates). ``None`` when the region is not such a chain (a field of
  another number among the records), for the caller's field-by-field walk (``walk``).
- ``fields(buf, starts, ends)``: the fields of many messages in lockstep: round k decodes the k-th field of
  every message that has one, so the rounds are as many as the longest message has fields.

Wire format (protobuf encoding spec): a field is a varint key ``number << 3 | wire type``; wire type 0 is a
varint, 1 eight bytes, 2 a varint length and that many bytes, 5 four bytes (3 and 4, groups, are not used by
XPlane and are damage here). Varints are little-endian groups of 7 bits, the high bit set on all but the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

PAD = 16  # zero bytes after the data, so a varint read past a damaged end stops inside the buffer


class WireError(ValueError):
    """The bytes are not a well-formed protobuf encoding (truncated or damaged)."""


def as_buffer(data: bytes) -> np.ndarray:
    """``data`` as uint8, followed by ``PAD`` zero bytes."""
    buf = np.zeros(len(data) + PAD, np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    return buf


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at ``pos``: (values as uint64, the position after each); ``WireError`` if one
    runs past the data or past 10 bytes."""
    value, after, ok = _varints(buf, pos)
    if not ok.all():
        raise WireError("a varint runs past the end of the data")
    return value, after


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As ``varints``, with a mask of the well-formed ones instead of an error."""
    limit = buf.size - PAD
    ok = pos < limit
    byte = buf[np.where(ok, pos, limit)]
    value = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    more = np.flatnonzero(ok & (byte >= 0x80))
    shift = 7
    while more.size:
        cur = after[more]
        inside = cur < limit
        if shift > 63 or not inside.all():
            ok[more[~inside] if shift <= 63 else more] = False
            more = more[inside] if shift <= 63 else more[:0]
            cur = after[more]
        byte = buf[cur]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = cur + 1
        more = more[byte >= 0x80]
        shift += 7
    return value, after, ok


def records(buf: np.ndarray, lo: int, hi: int, tag: int, second: tuple[int, ...] = ()) -> (
        tuple[np.ndarray, np.ndarray] | None):
    """(body starts, body ends) of the records with key byte ``tag`` that tile ``buf[lo:hi]`` exactly.

    ``second``: key bytes the second field of a body usually has (after a one-byte key and a varint); the
    chain is first followed over the candidates whose body looks so, then, if that does not tile the region
    (a body of another shape), over every candidate. Either way only a chain that tiles it is returned.
    """
    if hi <= lo:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cand = np.flatnonzero(buf[lo:hi] == tag).astype(np.int64) + lo
    if cand.size == 0 or cand[0] != lo:
        return None
    length, body, ok = _varints(buf, cand + 1)
    ok &= length < np.uint64(hi - lo)
    after = np.where(ok, body + length.astype(np.int64), hi + 1)  # a malformed candidate starts nothing
    if second:
        _, past_first, ok1 = _varints(buf, np.minimum(body + 1, buf.size - 1))
        usual = ok1 & np.isin(buf[np.minimum(past_first, buf.size - 1)], second)
        usual[0] = True
        found = _chain(cand[usual], body[usual], after[usual], hi)
        if found is not None:
            return found
    return _chain(cand, body, after, hi)


def _chain(cand: np.ndarray, body: np.ndarray, after: np.ndarray, hi: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The chain of records from ``cand[0]``, each followed by the one starting where it ends, to ``hi``."""
    n = cand.size
    end_node, bad_node = n, n + 1  # sinks: the region's end, and a position that starts no record
    succ = np.full(n + 2, bad_node, np.int32 if n < 1 << 30 else np.int64)
    succ[end_node] = end_node
    at = np.searchsorted(cand, after)
    hit = at < n
    hit[hit] = cand[at[hit]] == after[hit]
    succ[:n][hit] = at[hit]
    succ[:n][after == hi] = end_node
    # Pointer doubling: ``reached`` holds the first 2**k records of the chain, ``succ`` the 2**k-th successor
    # of every candidate; each round doubles both.
    parts = [np.zeros(1, succ.dtype)]
    while True:
        tail = succ[parts[-1] if len(parts) == 1 else np.concatenate(parts)]
        if (tail == bad_node).any():
            return None
        tail = tail[tail != end_node]
        if tail.size == 0:
            break
        parts.append(tail)
        succ = succ[succ]
    reached = np.concatenate(parts)
    return body[reached], after[reached]


def walk(buf: np.ndarray, lo: int, hi: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value start, value end) of each field in ``buf[lo:hi]``, one by one."""
    data = buf.tobytes()
    i = lo
    while i < hi:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            start = i
            _, i = _varint(data, i)
        elif wire == 2:
            size, start = _varint(data, i)
            i = start + size
        elif wire in (1, 5):
            start, i = i, i + (8 if wire == 1 else 4)
        else:
            raise WireError(f"wire type {wire} (groups are not used by XPlane)")
        if i > hi:
            raise WireError("a field runs past the end of its message")
        yield number, wire, start, i


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) - PAD or shift > 63:
            raise WireError("a varint runs past the end of the data")
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


@dataclass(frozen=True)
class Fields:
    """One lockstep round: the next field of each message in ``msg`` (indices into the ``starts`` given)."""

    msg: np.ndarray     # int64, ascending
    number: np.ndarray  # field numbers
    wire: np.ndarray    # wire types
    value: np.ndarray   # uint64: the varint (wire 0), else 0
    start: np.ndarray   # int64: where a length-delimited value's bytes begin (wire 2)
    length: np.ndarray  # int64: their count (wire 2)


def fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Iterator[Fields]:
    """The fields of the messages ``buf[starts[i]:ends[i]]``, round by round (a later round's value of a
    field overrides an earlier one, as a parser's last-one-wins does)."""
    msg = np.flatnonzero(ends > starts)
    pos, end = starts[msg].astype(np.int64), ends[msg].astype(np.int64)
    while msg.size:
        key = buf[pos]
        if (key >= 0x80).any():  # a field number past 15: keys of more than one byte
            key, pos = varints(buf, pos)
        else:
            pos = pos + 1
        wire = (key & 7).astype(np.int8)
        number = (key >> 3).astype(np.int64)
        value = np.zeros(msg.size, np.uint64)
        start = np.zeros(msg.size, np.int64)
        length = np.zeros(msg.size, np.int64)
        w = np.flatnonzero(wire == 0)
        if w.size:
            value[w], pos[w] = varints(buf, pos[w])
        w = np.flatnonzero(wire == 2)
        if w.size:
            size, start[w] = varints(buf, pos[w])
            length[w] = size.astype(np.int64)
            pos[w] = start[w] + length[w]
        pos[wire == 1] += 8
        pos[wire == 5] += 4
        if ((wire == 3) | (wire == 4) | (wire > 5)).any() or (number == 0).any():
            raise WireError("a field has wire type 3, 4, 6 or 7, or number 0")
        if (pos > end).any() or (length < 0).any():
            raise WireError("a field runs past the end of its message")
        yield Fields(msg, number, wire, value, start, length)
        more = pos < end
        msg, pos, end = msg[more], pos[more], end[more]


def text(buf: np.ndarray, start: int, length: int) -> str:
    """The UTF-8 string at ``buf[start:start + length]``."""
    try:
        return buf[start:start + length].tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("a string field is not UTF-8") from None
