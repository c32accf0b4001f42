"""A large Kineto file's events read in bounded blocks: the file is never held whole.

The file is one JSON object, ``{...head..., "traceEvents": [e, e, ...], ...tail...}`` (or a bare list of
events). The head is read up to the ``traceEvents`` key; the tail (``baseTimeNanoseconds`` comes after the
events) is read ahead from the file's last ``TAIL_BYTES``, so every event row can be written as it is met.
Then the events array is cut into blocks of about ``BLOCK_BYTES``, each at an event boundary, and each
block is decoded by msgspec in one call into a list of typed events.

Where to cut: a candidate boundary is ``}`` ``,`` ``{`` (whitespace between). A block that starts at a true
boundary and is cut at a false one (inside a string or a nested value) is an unfinished JSON value, which
msgspec reports as truncated input; any other decode error is the file's own (invalid JSON). So a block is
tried at its last candidate and, when truncated, at earlier ones. Once the events end, the tail read ahead
must be the tail found; when it is not (a file no look-ahead can foresee), ``TailMismatch`` asks the reader
to start again with the file held whole.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from tracekit.errors import InputError
from tracekit.files import check_decompressed

BLOCK_BYTES = 4 << 20  # JSON bytes per decoded block (about 18,000 events)
TAIL_BYTES = 1 << 20  # how much of the file's end is read ahead for the top-level values after the events
MAX_TRIES = 64  # candidate boundaries tried per block before reading on
_HEAD_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPACE = b" \t\r\n"
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])


class TailMismatch(Exception):
    """The top-level values after the events differ from those read ahead: read the file whole instead."""


class NotStreamable(Exception):
    """The file's start is not a JSON object with a ``traceEvents`` list (or a list): the whole-file reader
    reads it and says what is wrong."""


def _open(path: Path) -> tuple[BinaryIO, BinaryIO]:
    """(JSON byte stream, the file underneath it: its position is the progress)."""
    raw = path.open("rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw), raw
    raw.seek(0)
    return raw, raw


def _tail_bytes(path: Path) -> bytes:
    """The last ``TAIL_BYTES`` of the JSON (a gzip file is decompressed to its end, nothing kept but that)."""
    stream, raw = _open(path)
    with raw:
        if stream is raw:
            size = path.stat().st_size
            raw.seek(max(0, size - TAIL_BYTES))
            return raw.read()
        tail, held, compressed = b"", 0, path.stat().st_size
        while block := stream.read(BLOCK_BYTES):
            held += len(block)
            check_decompressed(path, held, compressed)
            tail = (tail + block)[-TAIL_BYTES:]
        return tail


def _skip_space(data: bytes | bytearray, i: int, step: int = 1) -> int:
    while 0 <= i < len(data) and data[i] in _SPACE:
        i += step
    return i


def _parse_tail(after: bytes, bare_list: bool) -> dict[str, msgspec.Raw] | None:
    """The top-level values in ``after`` (what follows the events' closing ``]`` to the end of the file),
    or None if it is not that: a bare list ends there, an object closes with ``}`` or goes on with ``,``."""
    i = _skip_space(after, 0)
    if bare_list:
        return {} if i == len(after) else None
    if after[i:i + 1] == b"}":
        return {} if _skip_space(after, i + 1) == len(after) else None
    if after[i:i + 1] == b",":
        try:
            return _TOP_DECODER.decode(b"{" + after[i + 1:])
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    return None


def guess_tail(end: bytes, bare_list: bool) -> tuple[bytes, dict[str, msgspec.Raw]] | None:
    """The events' closing ``]`` in the file's ``end``: the earliest ``]`` after an event (or ``[``) that
    the file's remaining bytes close as the top-level object (a bare list: nothing after it). Returns
    (the bytes after it, their values), or None."""
    for i in (m.start() for m in re.finditer(rb"\]", end)):
        before = _skip_space(end, i - 1, -1)
        if before >= 0 and end[before:before + 1] not in (b"}", b"["):
            continue
        after = bytes(end[i + 1:])
        values = _parse_tail(after, bare_list)
        if values is not None:
            return after, values
    return None


class EventBlocks:
    """The top-level values of a Kineto file and its events in blocks (see the module docstring)."""

    def __init__(self, path: Path, decoder: msgspec.json.Decoder) -> None:
        self.path, self.decoder = path, decoder  # decoder: of a list of typed events
        self.size = path.stat().st_size
        self.stream, self.raw = _open(path)
        self.held = 0  # JSON bytes read so far (the decompression bound)
        try:
            self.buffer = bytearray()
            self.eof = False
            self.top, self.pos, bare_list = self._head()
            ahead = guess_tail(_tail_bytes(path), bare_list)
            if ahead is None:
                raise NotStreamable
            self.tail_ahead, tail = ahead
            self.top |= {"traceEvents": msgspec.Raw(b"[]")} if not bare_list else {}
            self.top |= tail
        except BaseException:
            self.raw.close()
            raise

    def fraction(self) -> float:
        """How far through the file the reading is (0..1)."""
        return min(1.0, self.raw.tell() / self.size) if self.size else 1.0

    def _fill(self, at_least: int) -> None:
        """Read until the buffer holds ``at_least`` bytes or the file ends."""
        try:
            while not self.eof and len(self.buffer) < at_least:
                block = self.stream.read(BLOCK_BYTES)
                if not block:
                    self.eof = True
                    break
                self.held += len(block)
                if self.stream is not self.raw:
                    check_decompressed(self.path, self.held, self.size)
                self.buffer += block
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise InputError(f"{self.path}: corrupt gzip ({exc}); copy the file again") from None
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc})") from None

    def _head(self) -> tuple[dict[str, msgspec.Raw], int, bool]:
        """The values before ``traceEvents`` and where the first event starts (a bare list: none, 1)."""
        self._fill(BLOCK_BYTES)
        if self.buffer.startswith(b"\xef\xbb\xbf"):
            del self.buffer[:3]
        start = _skip_space(self.buffer, 0)
        first = bytes(self.buffer[start:start + 1])
        if first == b"[":
            return {}, start + 1, True
        if first != b"{":
            raise NotStreamable
        searched = start
        while True:
            for match in _HEAD_KEY.finditer(self.buffer, searched):
                try:
                    head = _TOP_DECODER.decode(bytes(self.buffer[start:match.start()]) + b'"traceEvents": []}')
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                head.pop("traceEvents")
                return head, match.end(), False
            if self.eof or len(self.buffer) > 16 * BLOCK_BYTES:
                raise NotStreamable  # no traceEvents list near the start: the whole-file reader says why
            searched = max(start, len(self.buffer) - 64)
            self._fill(len(self.buffer) + BLOCK_BYTES)

    def blocks(self) -> Iterator[list]:
        """Each block's events, in file order, decoded by ``decoder``, or (when an event does not fit its
        type) as ``msgspec.Raw`` slices to decode one by one; at the end the tail is checked against the one
        read ahead (``TailMismatch``)."""
        try:
            yield from self._blocks()
        finally:
            self.raw.close()

    def _blocks(self) -> Iterator[list]:
        want = BLOCK_BYTES
        while True:
            self._fill(self.pos + want)
            if self.eof:
                break
            cut = self._cut(self.pos, len(self.buffer))
            if cut is None:  # no boundary found in the window (one huge event): read on
                want *= 2
                continue
            events, resume = cut
            yield events
            del self.buffer[:resume]
            self.pos, want = 0, BLOCK_BYTES
        yield from self._last()

    def _decode(self, block: bytes) -> list | None:
        """The events of ``block`` (a JSON array), None when it is cut short (truncated), else bad input."""
        try:
            return self.decoder.decode(block)
        except msgspec.ValidationError:
            pass  # an event of unexpected shape: the slices, decoded one by one by the caller
        except msgspec.DecodeError as exc:
            if "truncated" in str(exc):
                return None
            raise InputError(f"{self.path}: invalid JSON ({exc}); copy the file again") from None
        try:
            return msgspec.json.decode(block, type=list[msgspec.Raw])
        except msgspec.DecodeError as exc:
            if "truncated" in str(exc):
                return None
            raise InputError(f"{self.path}: invalid JSON ({exc}); copy the file again") from None

    def _cut(self, start: int, stop: int) -> tuple[list, int] | None:
        """The events up to the last boundary in buffer[start:stop] that closes a whole run of them, and
        where the next event starts."""
        data, hi, tries = self.buffer, stop, 0
        while tries < MAX_TRIES:
            comma = data.rfind(b",", start, hi)
            if comma < 0:
                return None
            hi = comma
            before, after = _skip_space(data, comma - 1, -1), _skip_space(data, comma + 1)
            if before < start or data[before] != 0x7D or after >= stop or data[after] != 0x7B:  # '}' ',' '{'
                continue
            tries += 1
            events = self._decode(b"[" + bytes(data[start:before + 1]) + b"]")
            if events is not None:  # else cut inside a string or a nested value: an earlier boundary
                return events, after
        return None

    def _last(self) -> Iterator[bytes]:
        """The events after the last cut, up to the closing ``]``, then the tail check."""
        data = bytes(self.buffer[self.pos:])
        del self.buffer[:]
        for i in (m.start() for m in re.finditer(rb"\]", data)):
            before = _skip_space(data, i - 1, -1)
            if before >= 0 and data[before:before + 1] not in (b"}", b"["):
                continue
            events = [] if before < 0 else self._decode(b"[" + data[:i] + b"]")  # before < 0: no event left
            if events is None:
                continue
            if data[i + 1:] != self.tail_ahead:
                raise TailMismatch
            yield events
            return
        raise InputError(f"{self.path}: truncated JSON (the traceEvents list does not end); copy the file again")
