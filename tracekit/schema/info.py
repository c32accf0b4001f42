"""The ``tracekit info`` document ``tracekit.info/v1`` as msgspec Structs (docs/schema.md, "tracekit info",
key for key): one list of rows per table the command prints, then the capture caveats.

Field order is the JSON key order (a table's column order).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tracekit.schema.report import _Strict

INFO_SCHEMA = "tracekit.info/v1"


class InfoFile(_Strict, kw_only=True):
    rank: int
    file: str
    cached: bool
    format: str | None
    format_version: str | None
    product_version: str | None
    start_ns: int | None
    end_ns: int | None
    span_ns: int | None


class InfoDevice(_Strict, kw_only=True):
    rank: int
    device_id: int
    name: str | None
    sm_count: int | None
    memory_bytes: int | None
    compute_major: int | None
    compute_minor: int | None


class InfoProcess(_Strict, kw_only=True):
    rank: int
    pid: int
    name: str | None
    threads: int


class InfoStream(_Strict, kw_only=True):
    rank: int
    device_id: int
    stream_id: int
    kernels: int
    kernel_ns: int
    first_ns: int
    last_ns: int


class InfoEvents(_Strict, kw_only=True):
    rank: int
    kernels: int
    memops: int
    api_calls: int
    ranges: int


class RangeDomain(_Strict, kw_only=True):
    rank: int
    source: str
    domain: str
    ranges: int


class StepCandidate(_Strict, kw_only=True):
    pattern: str
    count: int
    ranks: int
    median_ns: int
    example: str
    auto: str | None
    step_regex: str


class ShapeField(_Strict, kw_only=True):
    field: str
    value: str
    source: str = msgspec.field(name="from")


class ReadNote(_Strict, kw_only=True):
    rank: int
    kind: str
    count: int
    detail: str | None


class InfoCaveat(_Strict, kw_only=True):
    kind: str
    rank: int | None
    text: str


class Info(_Strict, kw_only=True):
    """What a capture holds: ``tracekit info --format json`` is this document."""

    schema: Literal["tracekit.info/v1"] = INFO_SCHEMA
    files: list[InfoFile]
    devices: list[InfoDevice]
    processes: list[InfoProcess]
    streams: list[InfoStream]
    events: list[InfoEvents]
    range_domains: list[RangeDomain]
    step_candidates: list[StepCandidate]
    model_shape: list[ShapeField]
    read_notes: list[ReadNote]
    caveats: list[InfoCaveat]


def typed_info(doc: dict[str, Any]) -> Info:
    """The info document as its typed contract (the one conversion); an unknown key or a value of another type
    is a loud ``msgspec.ValidationError``."""
    return msgspec.convert(doc, Info)
