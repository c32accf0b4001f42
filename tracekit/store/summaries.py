"""Per-name summaries of kernels, API calls, NVTX ranges and memory operations, with the statistics of
``nsys stats``.

Each function runs one DuckDB query over the store tables (all ranks pooled) and returns a polars
DataFrame ordered by total time, descending. Statistics follow the nsys report scripts (facts §6):
``total_ns`` = sum of durations, ``avg_ns`` mean, ``med_ns`` median (mean of the two middle values for
an even count), ``stddev_ns`` the sample standard deviation (0 for a single instance), ``time_pct`` =
100 x total / the sum of ``total_ns`` over all rows. Values are not rounded; nsys prints avg, median and
stddev rounded to 1 decimal. Every statistic is computed from exact integer sums, so a report is the
same byte for byte however DuckDB's threads split the rows.
Memory operations are also summarised by size, in bytes (nsys prints MB,
10^6 bytes, to 3 decimals).
"""

from __future__ import annotations

from typing import Literal

import duckdb
import polars as pl

KernelGrouping = Literal["name", "name_grid_block", "short_name"]

# Grouping keys per `by`; `name` is always the first output column.
_KERNEL_KEYS: dict[str, str] = {
    "name": "name",
    "short_name": "short_name AS name",
    "name_grid_block": "name, grid_x, grid_y, grid_z, block_x, block_y, block_z",
}


def _stats(source: str, keys: str, where: str = "true", value: str = "dur_ns", unit: str = "ns") -> str:
    """The statistics query over ``source``'s ``value`` column, grouped by ``keys``; columns are named by
    ``unit`` (``total_ns``, ``avg_ns``, ...), and a time gets its share of all rows' time (``time_pct``)."""
    key_positions = ", ".join(str(i + 1) for i in range(len(keys.split(","))))
    share = f", 100.0 * sum({value}) / sum(sum({value})) OVER () AS time_pct" if unit == "ns" else ""
    return f"""
        SELECT {keys},
            count(*) AS instances,
            sum({value})::BIGINT AS total_{unit},
            avg({value}) AS avg_{unit},
            median({value})::DOUBLE AS med_{unit},
            min({value}) AS min_{unit},
            max({value}) AS max_{unit},
            -- from exact integer sums, so the result does not depend on the order threads add rows in
            CASE WHEN count(*) < 2 THEN 0.0 ELSE sqrt(greatest(
                count(*)::HUGEINT * sum({value}::HUGEINT * {value}) - sum({value}::HUGEINT) * sum({value}::HUGEINT), 0
            )::DOUBLE / (count(*) * (count(*) - 1))) END AS stddev_{unit}{share}
        FROM {source}
        WHERE {where}
        GROUP BY ALL
        ORDER BY total_{unit} DESC, {key_positions}
    """


def kernel_summary(con: duckdb.DuckDBPyConnection, by: KernelGrouping = "name") -> pl.DataFrame:
    """GPU kernel time per kernel name (nsys ``cuda_gpu_kern_sum``).

    ``by``: ``"name"`` groups by demangled name (the 2023+ report), ``"short_name"`` by base name
    (``:base``), ``"name_grid_block"`` by name and launch geometry (the 2022.4 ``gpukernsum``).
    """
    if by not in _KERNEL_KEYS:
        raise ValueError(f"by must be one of {', '.join(_KERNEL_KEYS)}, not {by!r}")
    return con.sql(_stats("kernels", _KERNEL_KEYS[by])).pl()


def api_summary(con: duckdb.DuckDBPyConnection, nsys_compat: bool = False) -> pl.DataFrame:
    """Host API time per call name (nsys ``cuda_api_sum``), runtime and driver calls alike.

    By default backtrace duplicate rows are excluded and calls are grouped by display name. With
    ``nsys_compat`` every row counts and calls are grouped by recorded name, as nsys 2022.4 did: its
    ``cudaapisum`` lists a backtrace duplicate as a second row of the same display name.
    """
    if nsys_compat:
        source = "(SELECT raw_name, name, dur_ns FROM api_calls)"
        return con.sql(_stats(source, "name, raw_name")).pl().drop("raw_name")
    return con.sql(_stats("api_calls", "name", where="NOT is_duplicate")).pl()


def nvtx_summary(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """NVTX range time per (range name, style), as nsys ``nvtx_sum`` computes it.

    The name is ``domain:message`` when the range's domain is named. Nested ranges are not made
    exclusive. A range that never ended lasts until the last NVTX timestamp of its rank (nsys uses the
    last timestamp of its file's NVTX data; the store keeps ranges only, not marks).
    """
    source = """(
        WITH nvtx AS (SELECT * FROM ranges WHERE source = 'nvtx'),
        last AS (SELECT rank, greatest(max(start_ns), max(end_ns)) AS last_ns FROM nvtx GROUP BY rank)
        SELECT CASE WHEN r.domain IS NULL THEN r.name ELSE r.domain || ':' || r.name END AS name,
            r.style, coalesce(r.end_ns, l.last_ns) - r.start_ns AS dur_ns
        FROM nvtx r JOIN last l ON l.rank IS NOT DISTINCT FROM r.rank
    )"""
    return con.sql(_stats(source, "name, style")).pl()


# nsys's name for a memory operation: "[CUDA memcpy HtoD]", "[CUDA memset]" (the 2022.4 reports' spelling).
_MEMOP_OPERATION = """CASE WHEN kind = 'memset' THEN '[CUDA memset]'
    WHEN copy_kind IS NULL THEN '[CUDA memcpy]' ELSE '[CUDA memcpy ' || copy_kind || ']' END"""


def memop_time_summary(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """GPU time per memory operation kind (nsys ``cuda_gpu_mem_time_sum``, 2022.4 ``gpumemtimesum``)."""
    return con.sql(_stats(f"(SELECT {_MEMOP_OPERATION} AS operation, dur_ns FROM memops)", "operation")).pl()


def memop_size_summary(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Bytes per memory operation kind (nsys ``cuda_gpu_mem_size_sum``, 2022.4 ``gpumemsizesum``): the
    statistics of ``_stats`` over each operation's size, ordered by total bytes, descending."""
    source = f"(SELECT {_MEMOP_OPERATION} AS operation, bytes FROM memops)"
    return con.sql(_stats(source, "operation", value="bytes", unit="bytes")).pl()
