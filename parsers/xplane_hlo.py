"""What each XLA HLO op computes, from the HLO modules an XSpace carries, in the store's neutral op categories.

jax.profiler writes each compiled module's ``xla.HloProto`` in the ``/host:metadata`` plane: an event
metadata named ``<module>(<program id>)`` with a ``Hlo Proto`` bytes stat. From its ``HloModuleProto``
(``xla/service/hlo.proto``: ``HloProto.hlo_module = 1``; module ``name = 1``, ``computations = 3``;
computation ``name = 1``, ``instructions = 2``, ``id = 5``; instruction ``name = 1``, ``opcode = 2``,
``custom_call_target = 28``, ``called_computation_ids = 38``) each instruction gets a category
(``parsers.schema.OP_CATEGORIES``): a convolution (``convolution``, or a custom call whose target names one,
as ``__cudnn$convForward``), a matrix product (``dot``, a BLAS custom call), a collective by kind, and for a
fusion what the computation it calls holds (a convolution or product wins over the rest; only data movement
is ``data_movement``; a reduction ``reduction``; else ``elementwise``). Where a kernel carries XLA's own
``hlo_category`` stat (xprof's category names), that is mapped by the same words.
"""

from __future__ import annotations

import re

from tracekit.parsers.xplane_wire import WireError, as_buffer, walk

_COLLECTIVES = {"all-reduce": "allreduce", "all-gather": "allgather", "reduce-scatter": "reducescatter",
                "all-to-all": "alltoall", "ragged-all-to-all": "alltoall", "collective-permute": "sendrecv",
                "send": "sendrecv", "recv": "sendrecv", "collective-broadcast": "broadcast"}
_MOVEMENT = frozenset({"transpose", "copy", "bitcast", "reshape", "broadcast", "slice", "concatenate", "pad",
                       "gather", "dynamic-slice", "dynamic-update-slice", "reverse", "iota", "copy-start",
                       "copy-done", "bitcast-convert"})
_STRUCTURE = frozenset({"parameter", "constant", "get-tuple-element", "tuple"})  # no work of their own
_REDUCTIONS = frozenset({"reduce", "reduce-window", "select-and-scatter", "scatter", "sort", "reduce-precision"})
_BLAS = re.compile(r"gemm|matmul|blas", re.IGNORECASE)
_CONV = re.compile(r"conv", re.IGNORECASE)
_MODULE_ID = re.compile(r"^(.*)\((\d+)\)$")
_RANK = ("convolution", "matmul", "allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast",
         "reduction", "elementwise", "data_movement")  # what a fusion of several is: the first it holds


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    buf = as_buffer(data)
    return [(n, data[s:e]) for n, _, s, e in walk(buf, 0, len(data))]


def _varints(data: bytes) -> list[int]:
    """A packed (or one unpacked) repeated varint field's values."""
    out, value, shift = [], 0, 0
    for b in data:
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            out.append(value)
            value = shift = 0
    return out


def instruction_category(opcode: str, target: str = "", inner: list[str] | None = None) -> str | None:
    """The neutral category of one HLO instruction (``inner``: the categories of a fusion's instructions)."""
    base = opcode.removesuffix("-start").removesuffix("-done")
    if opcode == "convolution" or (opcode == "custom-call" and _CONV.search(target)):
        return "convolution"
    if opcode in ("dot", "ragged-dot") or (opcode == "custom-call" and _BLAS.search(target)):
        return "matmul"
    if base in _COLLECTIVES:
        return _COLLECTIVES[base]
    if opcode in ("fusion", "call") and inner is not None:
        held = set(inner)
        return next((c for c in _RANK if c in held), None)
    if opcode in _MOVEMENT:
        return "data_movement"
    if opcode in _REDUCTIONS:
        return "reduction"
    if opcode in _STRUCTURE or opcode in ("custom-call", "fusion", "call", "while", "conditional"):
        return None
    return "elementwise"


def category_from_xla(category: str) -> str | None:
    """The neutral category of an XLA ``hlo_category`` text (xprof's names, as 'convolution fusion')."""
    text = category.lower()
    if "convolution" in text:
        return "convolution"
    if "dot" in text or "matmul" in text or "gemm" in text:
        return "matmul"
    for name, neutral in _COLLECTIVES.items():
        if name in text:
            return neutral
    if "data formatting" in text or "copy" in text or "transpose" in text:
        return "data_movement"
    if "reduce" in text or "reduction" in text:
        return "reduction"
    if "elementwise" in text or "fusion" in text:
        return "elementwise"
    return None


def module_categories(hlo_proto: bytes) -> tuple[str, dict[str, str]]:
    """(module name, instruction name -> category) of one serialised ``xla.HloProto``."""
    module = next((v for n, v in _fields(hlo_proto) if n == 1), b"")
    fields = _fields(module)
    name = next((v.decode() for n, v in fields if n == 1), "")
    computations: dict[int, list[tuple[str, str, str, list[int]]]] = {}
    for comp in (v for n, v in fields if n == 3):
        cf = _fields(comp)
        cid = next((_varints(v)[0] for n, v in cf if n == 5), -1)
        instructions = []
        for ins in (v for n, v in cf if n == 2):
            f = _fields(ins)
            text = {n: v.decode() for n, v in f if n in (1, 2, 28)}
            called = [c for n, v in f if n == 38 for c in _varints(v)]
            instructions.append((text.get(1, ""), text.get(2, ""), text.get(28, ""), called))
        computations[cid] = instructions
    memo: dict[int, list[str]] = {}

    def held(cid: int, depth: int = 0) -> list[str]:
        if cid not in memo:
            memo[cid] = [c for _, op, target, called in computations.get(cid, []) if depth < 8
                         for c in [category(op, target, called, depth + 1)] if c]
        return memo[cid]

    def category(op: str, target: str, called: list[int], depth: int) -> str | None:
        inner = [c for cid in called for c in held(cid, depth)] if op in ("fusion", "call") else None
        return instruction_category(op, target, inner)

    out = {}
    for instructions in computations.values():
        for ins_name, op, target, called in instructions:
            if (c := category(op, target, called, 0)) is not None:
                out[ins_name] = c
    return name, out


def hlo_modules(space) -> tuple[dict[str, dict[str, str]], dict[int, dict[str, str]]]:
    """(module name -> its instructions' categories, program id -> the same) from ``/host:metadata``; a
    module that cannot be decoded is left out (the categories are a signal, not the trace)."""
    by_name: dict[str, dict[str, str]] = {}
    by_id: dict[int, dict[str, str]] = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        protos = {k for k, v in plane.stat_metadata.items() if v.name == "Hlo Proto"}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stat.metadata_id not in protos or stat.WhichOneof("value") != "bytes_value":
                    continue
                try:
                    name, categories = module_categories(stat.bytes_value)
                except (WireError, UnicodeDecodeError, IndexError, StopIteration):
                    continue
                by_name.setdefault(name, categories)
                if m := _MODULE_ID.match(meta.name):
                    by_id[int(m.group(2))] = categories
    return by_name, by_id


def kernel_categories(keys: list[tuple[int | None, str | None, str | None, str | None]], space) -> list[str | None]:
    """The category of each distinct (program id, module, HLO op, ``hlo_category`` text) of the kernels: XLA's
    own category where it gives one, else the op's in its module's HLO (by program id, else module name)."""
    by_name, by_id = hlo_modules(space) if any(k[2] for k in keys) else ({}, {})
    out = []
    for program, module, op, xla in keys:
        found = category_from_xla(xla) if xla else None
        if found is None and op:
            categories = by_id.get(program) if program is not None else None
            found = (categories if categories is not None else by_name.get(module or "", {})).get(op)
        out.append(found)
    return out
