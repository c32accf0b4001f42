"""PyTorch's autograd NVTX ranges with input shapes, read as cpu ops with their shapes (``op_shapes``).

``nsys profile --pytorch=autograd-shapes-nvtx`` (``torch.autograd.profiler.emit_nvtx(record_shapes=True)``)
names each op's NVTX range as PyTorch's ``getNvtxStr`` writes it (torch/csrc/profiler/util.cpp):

    <op>[, seq = <n>][, op_id = <n>], sizes = [[d0, d1, ...], [], ...][, input_op_ids = [(<op id>,<output>), ...]]

A range whose text carries ``sizes`` is an op: its row in ``ranges`` becomes kind ``op`` named ``<op>``, and
its sizes are the op's ``input_dims`` in ``op_shapes`` (compact JSON, as the Kineto reader writes them). NVTX
records no dtypes: each tensor's type is ``UNRECORDED_DTYPE``, which the op floor counts at one byte an
element and bounds by the FP8 peak (``tracekit.floor.ops``), so the floor stays a lower bound whatever the
real dtype; an empty size ``[]`` (a scalar, or no tensor) gets no type. Ranges without sizes (``emit_nvtx()``
without shapes: ``aten::mm, op_id = 5``) stay user ranges.
"""

from __future__ import annotations

import json
import re

import duckdb
import pyarrow as pa

#: the dtype of a tensor whose NVTX range gives its sizes only (floor/ops.py: one byte, the FP8 peak)
UNRECORDED_DTYPE = "(dtype not recorded)"
#: PyTorch's NVTX op range with sizes: group 1 the op, group 2 the sizes (a list of lists of integers).
NVTX_SHAPES_REGEX = (r"^([^,]+?)(?:, seq = -?\d+)?(?:, op_id = \d+)?, sizes = (\[(?:\[[-0-9, ]*\](?:, )?)*\])"
                     r"(?:, input_op_ids = \[[^\]]*\])?$")
_SIZES = re.compile(NVTX_SHAPES_REGEX)


def read_nvtx_shapes(con: duckdb.DuckDBPyConnection) -> int:
    """Turn the NVTX op ranges with sizes in ``ranges`` into cpu ops with ``op_shapes`` rows; their number."""
    rows = con.execute("SELECT rank, pid, tid, start_ns, end_ns, name FROM ranges "
                       "WHERE source = 'nvtx' AND contains(name, ', sizes = [') AND regexp_full_match(name, $re)",
                       {"re": NVTX_SHAPES_REGEX}).fetchall()
    if not rows:
        return 0
    out: dict[str, list] = {c: [] for c in ("rank", "pid", "tid", "start_ns", "end_ns", "name", "input_dims",
                                            "input_types")}
    for rank, pid, tid, start, end, text in rows:
        match = _SIZES.match(text)
        if match is None:
            continue
        sizes = json.loads(match.group(2))
        values = (rank, pid, tid, start, end, match.group(1), json.dumps(sizes, separators=(",", ":")),
                  json.dumps([UNRECORDED_DTYPE if s else "" for s in sizes]))
        for col, value in zip(out, values, strict=True):
            out[col].append(value)
    table = pa.table(out, schema=pa.schema([("rank", pa.int32()), ("pid", pa.int64()), ("tid", pa.int64()),
                                             ("start_ns", pa.int64()), ("end_ns", pa.int64()), ("name", pa.string()),
                                             ("input_dims", pa.string()), ("input_types", pa.string())]))
    con.register("_nvtx_shapes", table)
    try:
        con.execute("INSERT INTO op_shapes (rank, pid, tid, start_ns, end_ns, name, input_dims, input_types) "
                    "SELECT * FROM _nvtx_shapes").fetchall()
    finally:
        con.unregister("_nvtx_shapes")
    con.execute("UPDATE ranges SET kind = 'op', name = regexp_extract(name, $re, 1) "
                "WHERE source = 'nvtx' AND contains(name, ', sizes = [') AND regexp_full_match(name, $re)",
                {"re": NVTX_SHAPES_REGEX}).fetchall()
    return len(table)
