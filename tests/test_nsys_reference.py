"""tracekit's summaries agree row for row with NVIDIA's own ``nsys stats`` (2022.4.2) output.

The reference CSVs in shared/traces/nsys/reference-nsys-stats-2022.4/<file>/ were printed by nsys for
the exports of shared/traces/nsys. Each report is compared as a multiset of rows (ties in total time
have no defined order): instances, total, average, median, minimum, maximum, standard deviation and
time share, rounded as nsys prints them, plus the grouping columns.
"""

from __future__ import annotations

import csv
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracekit.parsers import schema
from tracekit.parsers.nsys import read_nsys
from tracekit.store import summaries

NSYS = Path(__file__).resolve().parents[2] / "shared" / "traces" / "nsys"
REFERENCE = NSYS / "reference-nsys-stats-2022.4"
pytestmark = pytest.mark.skipif(
    not REFERENCE.is_dir(), reason=f"nsys reference outputs not found at {REFERENCE}"
)

STATS = ["Total Time (ns)", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Time (%)"]
# report -> (the count column, the grouping columns) of its CSV
REPORTS = {
    "gpukernsum": ("Instances", ["GridXYZ", "BlockXYZ", "Name"]),
    "cudaapisum": ("Num Calls", ["Name"]),
    "nvtxsum": ("Instances", ["Style", "Range"]),
}
# Files with a non-empty reference, per report: the comparison must not silently shrink.
EXPECTED_FILES = {"gpukernsum": 6, "cudaapisum": 6, "nvtxsum": 3}


def nsys_round(value: float) -> str:
    """One decimal, half away from zero on the shortest decimal form, as nsys prints statistics."""
    return str(Decimal(repr(float(value))).quantize(Decimal("0.1"), ROUND_HALF_UP))


def cases() -> list[tuple[str, str]]:
    """(file, report) for every reference CSV that has rows."""
    if not REFERENCE.is_dir():
        return []
    return [
        (d.name, report)
        for d in sorted(REFERENCE.iterdir())
        for report in REPORTS
        if (d / f"{d.name}_{report}.csv").stat().st_size > 0
    ]


_stores: dict[str, duckdb.DuckDBPyConnection] = {}


def store(name: str) -> duckdb.DuckDBPyConnection:
    if name not in _stores:
        con = duckdb.connect()
        schema.create_tables(con)
        read_nsys(NSYS / f"{name}.sqlite", con)
        _stores[name] = con
    return _stores[name]


def reference_rows(name: str, report: str) -> list[tuple]:
    count, keys = REPORTS[report]
    with (REFERENCE / name / f"{name}_{report}.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    # Grid and block print as fixed-width triples (" 244    1    6"): compare the numbers.
    return [
        (
            r[count],
            *(r[s] for s in STATS),
            *(" ".join(r[k].split()) if k.endswith("XYZ") else r[k] for k in keys),
        )
        for r in rows
    ]


def our_rows(name: str, report: str) -> list[tuple]:
    con = store(name)
    df: pl.DataFrame
    if report == "gpukernsum":  # the 2022 definition: one row per name, grid and block
        df = summaries.kernel_summary(con, by="name_grid_block").with_columns(
            grid=pl.concat_str(["grid_x", "grid_y", "grid_z"], separator=" "),
            block=pl.concat_str(["block_x", "block_y", "block_z"], separator=" "),
        )
        keys = ["grid", "block", "name"]
    elif report == "cudaapisum":
        df, keys = summaries.api_summary(con, nsys_compat=True), ["name"]
    else:
        df, keys = summaries.nvtx_summary(con), ["style", "name"]
    return [
        (str(r["instances"]), str(r["total_ns"]), nsys_round(r["avg_ns"]), nsys_round(r["med_ns"]),
         str(r["min_ns"]), str(r["max_ns"]), nsys_round(r["stddev_ns"]), nsys_round(r["time_pct"]),
         *(r[k] for k in keys))
        for r in df.iter_rows(named=True)
    ]  # fmt: skip


def test_reference_set_is_complete() -> None:
    found = Counter(report for _, report in cases())
    assert found == EXPECTED_FILES


@pytest.mark.parametrize(("name", "report"), cases())
def test_agrees_with_nsys_stats(name: str, report: str) -> None:
    theirs, ours = Counter(reference_rows(name, report)), Counter(our_rows(name, report))
    assert sum(theirs.values()) > 0
    missing, extra = theirs - ours, ours - theirs
    assert not missing and not extra, (
        f"nsys rows we lack: {list(missing)[:3]}; rows nsys lacks: {list(extra)[:3]}"
    )


def test_golden_values_mfu() -> None:
    """Spot values quoted in facts §6.2, independent of the CSV parsing above."""
    con = store("nsys-ai__mfu_2gpu_before")
    kernels = summaries.kernel_summary(con, by="name_grid_block")
    top = kernels.row(0, named=True)
    assert top["name"].startswith("void flash::flash_fwd_kernel")
    assert (top["instances"], top["total_ns"], nsys_round(top["time_pct"])) == (34, 267_059_180, "49.9")
    nccl = kernels.filter(pl.col("name").str.starts_with("ncclDevKernel_SendRecv")).row(0, named=True)
    assert (nccl["instances"], nccl["total_ns"], nccl["grid_x"], nccl["block_x"]) == (66, 25_401_752, 32, 640)
    api = summaries.api_summary(con).row(0, named=True)
    assert (api["name"], api["instances"], api["total_ns"], nsys_round(api["time_pct"])) == (
        "cudaStreamSynchronize", 33, 324_534_733, "87.7",
    )  # fmt: skip
