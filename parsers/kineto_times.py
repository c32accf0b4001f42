"""Kineto ``ts``/``dur`` (JSON number text, microseconds) to exact int64 nanoseconds, a column at a time.

Why not float64: 2024-04 files carry epoch microseconds with three decimals (19 significant digits),
where float64 is off by up to 0.1 us. The rule is ``start_ns = round(ts * 1000)`` and
``end_ns = round((ts + dur) * 1000)``, rounded half away from zero, NULL when not a number or beyond int64.

Fast path (every file torch.profiler writes): the texts are cast by Arrow to ``decimal128(22, 3)``, whose
unscaled integer *is* the time in ns; Arrow refuses any text with more than three decimals, so there is no
rounding to get wrong. A column with a text Arrow refuses (more decimals, a string, ``null``) goes to the
exact general path instead: DuckDB's ``DECIMAL(38, 9)`` cast, the same rule row by row, but slower.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .schema import quiet

_FAST = pa.decimal128(22, 3)  # up to 19 integer digits of us: every int64 ns value fits
_WIDE = pa.decimal128(23, 3)  # ts + dur
_GENERAL_SQL = """
    SELECT TRY_CAST(TRY_CAST(ts AS DECIMAL(38, 9)) * 1000 AS BIGINT) AS s,
           TRY_CAST((TRY_CAST(ts AS DECIMAL(38, 9)) + TRY_CAST(dur AS DECIMAL(38, 9))) * 1000 AS BIGINT) AS e
    FROM _times
"""


def texts(raws: Sequence[msgspec.Raw]) -> pa.StringArray:
    """JSON texts as one Arrow string column without a Python object per value; empty (absent) is NULL."""
    n = len(raws)
    lengths = np.fromiter(map(len, raws), np.int32, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.packbits(lengths > 0, bitorder="little")
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws)),
                                       pa.py_buffer(valid))


def start_end_ns(ts: pa.StringArray, dur: pa.StringArray) -> tuple[pa.Int64Array, pa.Int64Array]:
    """``(round(ts * 1000), round((ts + dur) * 1000))`` in ns, exact; NULL where unreadable."""
    try:
        ts_dec, dur_dec = pc.cast(ts, _FAST), pc.cast(dur, _FAST)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _general(ts, dur)
    return _unscaled(ts_dec), _unscaled(pc.add(pc.cast(ts_dec, _WIDE), pc.cast(dur_dec, _WIDE)))


def _unscaled(column: pa.Decimal128Array) -> pa.Int64Array:
    """A decimal column's unscaled integers as int64, NULL where NULL or beyond the int64 range."""
    words = np.frombuffer(column.buffers()[1], np.int64, 2 * len(column), 16 * column.offset).reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]
    fits = high == (low >> 63)  # 128-bit value is the sign extension of its low 64 bits
    if column.null_count:
        fits &= column.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(low, pa.int64(), mask=~fits)


def _general(ts: pa.StringArray, dur: pa.StringArray) -> tuple[pa.Int64Array, pa.Int64Array]:
    """The same rule through DuckDB's DECIMAL cast, for texts the fast path refuses."""
    con = quiet(duckdb.connect())
    try:
        con.register("_times", pa.table({"ts": ts, "dur": dur}))
        result = con.sql(_GENERAL_SQL).to_arrow_table()
    finally:
        con.close()
    return result.column("s").combine_chunks(), result.column("e").combine_chunks()
