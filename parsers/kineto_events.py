"""Decoding Kineto trace events: a chunk of raw JSON events into typed structs, routed by category.

Only the fields the store needs are decoded (msgspec skips the rest without building them); ``ts``/``dur``
stay JSON text (``kineto_times`` converts them exactly). A chunk decodes in one C-level pass; an event
with unexpected value types (an id as a string, a grid of two) sends just that event through a lenient
decoder that keeps what converts. Routing works on category codes in numpy, not per event in Python.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields the store keeps."""

    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    nbytes: int | None = msgspec.field(default=None, name="bytes")
    name: str | None = None  # process_name / thread_name metadata
    kernel: str | None = None  # the kernel a launch call names (HIP traces, and launches captured into graphs)
    # A graph node's id on a replayed kernel, and its annotation (torch.cuda.graph(enable_annotations=True)
    # with export_chrome_trace(cuda_graph_annotations=...) writes the capturing module's ``module_fqn``).
    graph_node: int | None = msgspec.field(default=None, name="graph node id")
    module_fqn: str | None = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")  # record_shapes, raw JSON
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    # Collective metadata (NCCL kernels and record_param_comms; see the store's ``collectives`` table).
    collective: str | None = msgspec.field(default=None, name="Collective name")
    group_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    group_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    group_ranks: str | list[int] | None = msgspec.field(default=None, name="Process Group Ranks")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    seq: int | str | None = msgspec.field(default=None, name="Seq")
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    dtype: str | None = None


class Event(msgspec.Struct, gc=False):
    """One trace event; ``ts``/``dur`` as their exact JSON number text."""

    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()
    args: Args | None = None


class _Times(msgspec.Struct, gc=False):
    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()


EMPTY_ARGS = Args()
_EVENT_DECODER = msgspec.json.Decoder(Event)
_LOOSE_DECODER = msgspec.json.Decoder(dict[str, Any])
_TIMES_DECODER = msgspec.json.Decoder(_Times)
_STREAM_TID = re.compile(r"(?:stream\s*)?(\d+)\s*$")

# Route codes: destination by category. 2021 files use the capitalised names (code + LEGACY).
KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER = 1, 2, 3, 4, 5
USER_ANNOTATION, GPU_USER_ANNOTATION, CPU_OP, PYTHON_FUNCTION = 6, 7, 8, 9
LEGACY = 16
RANGE_SOURCES = {USER_ANNOTATION: "user_annotation", GPU_USER_ANNOTATION: "gpu_user_annotation",
                 CPU_OP: "cpu_op", PYTHON_FUNCTION: "python_function"}
# Each range source's kind in the store (parsers.schema.RANGE_KINDS).
RANGE_KINDS = {"user_annotation": "range", "gpu_user_annotation": "gpu_range", "cpu_op": "op",
               "python_function": "python"}
GPU_KINDS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
_CATEGORY_CODES: dict[str | None, int] = {
    "kernel": KERNEL, "Kernel": KERNEL + LEGACY,
    "gpu_memcpy": MEMCPY, "Memcpy": MEMCPY + LEGACY,
    "gpu_memset": MEMSET, "Memset": MEMSET + LEGACY,
    "cuda_runtime": RUNTIME, "Runtime": RUNTIME + LEGACY,
    "cuda_driver": DRIVER,
    "user_annotation": USER_ANNOTATION,
    "gpu_user_annotation": GPU_USER_ANNOTATION,
    "cpu_op": CPU_OP, "Operator": CPU_OP + LEGACY,
    "python_function": PYTHON_FUNCTION,
}
_PHASE_CODES: dict[str, int] = {"": 0, "X": 1, "M": 2}  # anything else: 3


def as_int(value: object) -> int | None:
    """An id as int: ints pass, digit strings and 2021's "stream 7" parse, anything else is None."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        match = _STREAM_TID.fullmatch(value.strip()) if value else None
        return int(match.group(1)) if match else None
    return None


@dataclass
class Routed:
    """One chunk's events split by destination, with the per-chunk facts the reader keeps."""

    gpu: list[Event]
    gpu_codes: np.ndarray  # KERNEL | MEMCPY | MEMSET per gpu event
    api: list[Event]
    api_codes: np.ndarray  # RUNTIME | DRIVER
    ranges: list[Event]
    range_codes: np.ndarray  # USER_ANNOTATION ... PYTHON_FUNCTION
    metadata: list[Event]
    recognised: int  # events with a phase
    legacy: bool  # a 2021 category was seen


def decode(raws: Sequence[msgspec.Raw], skipped: Counter[str]) -> list[Event]:
    """Decode a chunk of raw events; events that cannot be read at all are counted and left out."""
    try:
        return list(map(_EVENT_DECODER.decode, raws))
    except msgspec.ValidationError:
        pass
    events = []
    for raw in raws:
        try:
            events.append(_EVENT_DECODER.decode(raw))
        except msgspec.ValidationError:
            event = _decode_lenient(raw)
            if event is None:
                skipped["(malformed event)"] += 1
            else:
                events.append(event)
    return events


def _decode_lenient(raw: msgspec.Raw) -> Event | None:
    """Fallback for events with unexpected value types: keep what converts, drop what does not."""
    try:
        obj, times = _LOOSE_DECODER.decode(raw), _TIMES_DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    args = obj.get("args") if isinstance(obj.get("args"), dict) else {}

    def triple(value: object) -> tuple[int, int, int] | None:
        ints = [as_int(v) for v in value] if isinstance(value, list) else []
        return (ints[0], ints[1], ints[2]) if len(ints) == 3 and None not in ints else None

    def text(value: object) -> str | None:
        return value if isinstance(value, str) else None

    return Event(
        ph=text(obj.get("ph")) or "", cat=text(obj.get("cat")), name=text(obj.get("name")) or "",
        pid=obj.get("pid") if isinstance(obj.get("pid"), int | str) else None,
        tid=obj.get("tid") if isinstance(obj.get("tid"), int | str) else None,
        ts=times.ts, dur=times.dur,
        args=Args(device=as_int(args.get("device")), stream=as_int(args.get("stream")),
                  correlation=as_int(args.get("correlation")), grid=triple(args.get("grid")),
                  block=triple(args.get("block")), nbytes=as_int(args.get("bytes")),
                  name=text(args.get("name")), collective=text(args.get("Collective name")),
                  group_name=text(args.get("Process Group Name")) or as_int(args.get("Process Group Name")),
                  group_desc=text(args.get("Process Group Description")),
                  group_ranks=text(args.get("Process Group Ranks")), group_size=as_int(args.get("Group size")),
                  seq=as_int(args.get("Seq")), in_nelems=as_int(args.get("In msg nelems")),
                  out_nelems=as_int(args.get("Out msg nelems")), dtype=text(args.get("dtype"))),
    )


def route(events: list[Event], skipped: Counter[str]) -> Routed:
    """Split a chunk by destination: complete events of a known category, metadata, the rest (counted)."""
    n = len(events)
    categories = list(map(attrgetter("cat"), events))
    phase = np.fromiter(map(_PHASE_CODES.get, map(attrgetter("ph"), events), repeat(3)), np.int8, n)
    code = np.fromiter(map(_CATEGORY_CODES.get, categories, repeat(0)), np.int8, n)
    code[phase != 1] = 0  # only complete ("X") events carry a duration
    legacy = bool((code >= LEGACY).any())
    code &= LEGACY - 1

    def pick(index: np.ndarray) -> list[Event]:
        if len(index) < 2:
            return [events[i] for i in index.tolist()]
        return list(itemgetter(*index.tolist())(events))

    gpu = np.flatnonzero((code >= KERNEL) & (code <= MEMSET))
    api = np.flatnonzero((code == RUNTIME) | (code == DRIVER))
    ranges = np.flatnonzero(code >= USER_ANNOTATION)
    metadata = np.flatnonzero(phase == 2)
    unrouted = (code == 0) & (phase != 2)
    counts = Counter(map(categories.__getitem__, np.flatnonzero(unrouted).tolist()))
    if counts.pop(None, 0) + counts.pop("", 0):  # no category: counted by phase instead
        no_category = np.fromiter(map(operator.not_, categories), bool, n)
        for i in np.flatnonzero(unrouted & no_category).tolist():
            skipped[f"(no category, ph {events[i].ph or '?'})"] += 1
    skipped.update(counts)
    return Routed(
        gpu=pick(gpu), gpu_codes=code[gpu], api=pick(api), api_codes=code[api],
        ranges=pick(ranges), range_codes=code[ranges], metadata=pick(metadata),
        recognised=int(np.count_nonzero(phase)), legacy=legacy,
    )
