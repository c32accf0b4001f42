"""tracekit's summary commands agree row for row with NVIDIA's own ``nsys stats`` (2022.4.2) output.

The reference CSVs in shared/traces/nsys/reference-nsys-stats-2022.4/<file>/ were printed by nsys for
the exports of shared/traces/nsys. Each report is compared, through the command a user runs
(``tracekit kernels --by name-grid-block``, ``api --nsys-2022``, ``nvtx``, ``memory --by time|size``, all
``--format csv``), as a multiset of rows (ties in total have no defined order): instances, total, average,
median, minimum, maximum, standard deviation and time share, rounded as nsys prints them, plus the
grouping columns. The cases are listed here by name, so none vanishes when the folder is absent.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.store import summaries
from tracekit.store.ingest import open_store

REFERENCE = "reference-nsys-stats-2022.4"
STATS = ["Total Time (ns)", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Time (%)"]
SIZE_STATS = ["Total (MB)", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)"]
# report -> (the command that prints it, the count column and the grouping columns of its CSV)
REPORTS = {
    "gpukernsum": (["kernels", "--by", "name-grid-block"], "Instances", ["GridXYZ", "BlockXYZ", "Name"]),
    "cudaapisum": (["api", "--nsys-2022"], "Num Calls", ["Name"]),
    "nvtxsum": (["nvtx"], "Instances", ["Style", "Range"]),
    "gpumemtimesum": (["memory", "--by", "time"], "Count", ["Operation"]),
    "gpumemsizesum": (["memory", "--by", "size"], "Count", ["Operation"]),
}
EXPORTS = ["extrap__concurrent_example__concurrent.s16__profile16", "extrap__nsys_db__con_kernel",
           "extrap__sampled_callchains__ex-gpu.s10__ex-gpu.s10", "nsys-ai__h100_2gpu_1s",
           "nsys-ai__mfu_2gpu_before", "nsys-ai__mock"]
# (export, report) of every reference CSV that nsys left empty: nothing of that kind in the export.
EMPTY = {(e, "nvtxsum") for e in EXPORTS[1:3] + EXPORTS[5:]} | {
    (EXPORTS[2], "gpumemtimesum"), (EXPORTS[2], "gpumemsizesum")}
CASES = [(e, r) for e in EXPORTS for r in REPORTS if (e, r) not in EMPTY]


def nsys_round(value: float, places: str = "0.1") -> str:
    """Rounded half away from zero on the shortest decimal form, as nsys prints statistics."""
    return str(Decimal(repr(float(value))).quantize(Decimal(places), ROUND_HALF_UP))


def test_reference_set_is_complete(shared_traces: Path) -> None:
    """The folder holds exactly the cases listed here: none is skipped and none is added unseen."""
    found = {(d.name, report) for d in (shared_traces / "nsys" / REFERENCE).iterdir() if d.is_dir()
             for report in REPORTS if (d / f"{d.name}_{report}.csv").stat().st_size > 0}
    assert found == set(CASES) and len(CASES) == 25


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nsys-reference-cache")


def reference_rows(folder: Path, name: str, report: str) -> list[tuple]:
    _, count, keys = REPORTS[report]
    with (folder / name / f"{name}_{report}.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    stats = SIZE_STATS if report == "gpumemsizesum" else STATS
    # Grid and block print as fixed-width triples (" 244    1    6"): compare the numbers.
    return [(r[count], *(r[s] for s in stats), *(" ".join(r[k].split()) if k.endswith("XYZ") else r[k]
                                                  for k in keys)) for r in rows]


def command_rows(nsys: Path, name: str, report: str, cache_dir: Path) -> list[tuple]:
    """The rows of the command's CSV, rounded the way nsys prints them."""
    command, _, _ = REPORTS[report]
    result = CliRunner().invoke(main, [*command, str(nsys / f"{name}.sqlite"), "--cache-dir", str(cache_dir),
                                       "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    if report == "gpumemsizesum":
        return [(r["instances"], *(nsys_round(float(r[f"{s}_bytes"]) / 1e6, "0.001")
                                   for s in ("total", "avg", "med", "min", "max", "stddev")), r["operation"])
                for r in rows]
    keys = {"gpukernsum": ["grid", "block", "name"], "cudaapisum": ["name"], "nvtxsum": ["style", "name"],
            "gpumemtimesum": ["operation"]}[report]
    for r in rows:
        r["grid"] = " ".join(r.get(f"grid_{a}", "") for a in "xyz")
        r["block"] = " ".join(r.get(f"block_{a}", "") for a in "xyz")
    return [(r["instances"], r["total_ns"], nsys_round(float(r["avg_ns"])), nsys_round(float(r["med_ns"])),
             r["min_ns"], r["max_ns"], nsys_round(float(r["stddev_ns"])), nsys_round(float(r["time_pct"])),
             *(r[k] for k in keys)) for r in rows]


@pytest.mark.parametrize(("name", "report"), CASES)
def test_agrees_with_nsys_stats(shared_traces: Path, cache_dir: Path, name: str, report: str) -> None:
    nsys = shared_traces / "nsys"
    theirs = Counter(reference_rows(nsys / REFERENCE, name, report))
    ours = Counter(command_rows(nsys, name, report, cache_dir))
    assert sum(theirs.values()) > 0
    missing, extra = theirs - ours, ours - theirs
    assert not missing and not extra, (
        f"nsys rows we lack: {list(missing)[:3]}; rows nsys lacks: {list(extra)[:3]}"
    )


def test_golden_values_mfu(shared_traces: Path, cache_dir: Path) -> None:
    """Spot values quoted in facts §6.2, independent of the CSV parsing above."""
    with open_store([shared_traces / "nsys" / "nsys-ai__mfu_2gpu_before.sqlite"], cache_dir=cache_dir) as store:
        kernels = summaries.kernel_summary(store.con, by="name_grid_block")
        api = summaries.api_summary(store.con).row(0, named=True)
    top = kernels.row(0, named=True)
    assert top["name"].startswith("void flash::flash_fwd_kernel")
    assert (top["instances"], top["total_ns"], nsys_round(top["time_pct"])) == (34, 267_059_180, "49.9")
    nccl = kernels.filter(pl.col("name").str.starts_with("ncclDevKernel_SendRecv")).row(0, named=True)
    assert (nccl["instances"], nccl["total_ns"], nccl["grid_x"], nccl["block_x"]) == (66, 25_401_752, 32, 640)
    assert (api["name"], api["instances"], api["total_ns"], nsys_round(api["time_pct"])) == (
        "cudaStreamSynchronize", 33, 324_534_733, "87.7",
    )  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_summary_commands_take_the_shared_output_options(shared_traces: Path, cache_dir: Path, fmt: str,
                                                         tmp_path: Path) -> None:
    trace = shared_traces / "nsys" / "nsys-ai__mfu_2gpu_before.sqlite"
    for command in (["api"], ["nvtx"], ["memory", "--by", "time"], ["memory", "--by", "size"]):
        out = tmp_path / f"{command[0]}.{fmt}"
        result = CliRunner().invoke(main, [*command, str(trace), "--cache-dir", str(cache_dir), "--format", fmt,
                                           "--out", str(out), "--limit", "2"])
        assert result.exit_code == 0 and result.stdout == "", result.output
        assert out.stat().st_size > 0
