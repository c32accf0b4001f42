"""Multi-rank inputs that do not form one run: each gets one line (a reason in ``ranks.reasons`` or a warning),
and the per-rank analysis still runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios_ranks import another_run, ranks_capture
from fixtures.synth import write_kineto, write_nsys
from tracekit.cli import main


def write(spec, folder: Path, rank: int, fmt: str, name: str | None = None) -> Path:
    folder.mkdir(exist_ok=True)
    stem = name or f"rank{rank}"
    if fmt == "nsys":
        return write_nsys(spec, folder / f"{stem}.sqlite")
    return write_kineto(spec, folder / f"{stem}.pt.trace.json.gz")


def analyze(*paths: Path) -> tuple[dict, str]:
    result = CliRunner().invoke(main, ["analyze", *map(str, paths), "--no-cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def job(tmp_path: Path, fmt: str, **kwargs: object) -> tuple[Path, list, object]:
    specs, truth = ranks_capture(fmt, **kwargs)
    folder = tmp_path / fmt
    for rank, spec in enumerate(specs):
        write(spec, folder, rank, fmt)
    return folder, specs, truth


def ran_per_rank(report: dict, ranks: int) -> None:
    """Every rank was analysed on its own: steps, gaps and classes are there."""
    assert report["steps"]["count"] > 0 and len(report["steps"]["per_rank_p50_ns"]) == ranks
    assert report["classes"]


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_ranks_from_different_jobs(tmp_path: Path, fmt: str) -> None:
    a, _ = ranks_capture(fmt)
    b, _ = ranks_capture(fmt, ranks=2, ranks_per_host=2, compute_ns=(1_100_000, 700_000), late_ns=500_000)
    folder = tmp_path / "mixed"
    write(a[0], folder, 0, fmt)
    write(b[1], folder, 1, fmt)
    report, _ = analyze(folder)
    reasons = report["ranks"]["reasons"]
    assert any(r.startswith("no collective matches across ranks") for r in reasons), reasons
    if fmt == "kineto":  # Kineto files say their world size
        assert any(r.startswith("the files name different world sizes (2 on rank 1; 8 on rank 0)") for r in reasons)
    assert report["exposed_comm"]["wait_ns"] is None and report["ranks"]["straggler"] is None
    ran_per_rank(report, 2)


def test_a_missing_rank(tmp_path: Path) -> None:
    folder, _, truth = job(tmp_path, "kineto")
    (folder / "rank3.pt.trace.json.gz").unlink()
    report, _ = analyze(folder)
    assert report["ranks"]["reasons"][0].startswith("1 of 8 ranks are not in the capture (3): wait is measured "
                                                    "among the 7 given")
    assert report["ranks"]["straggler"]["rank"] == truth.straggler
    ran_per_rank(report, 7)


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_duplicated_rank_file(tmp_path: Path, fmt: str) -> None:
    folder, _, truth = job(tmp_path, fmt)
    suffix = ".sqlite" if fmt == "nsys" else ".pt.trace.json.gz"
    copy = folder / f"rank3_copy{suffix}"
    shutil.copy(folder / f"rank3{suffix}", copy)
    report, err = analyze(folder)
    line = f"{folder / f'rank3{suffix}'} and {copy}: hold the very same kernels (one capture given twice?); {copy} " \
           "is left out"
    assert line in report["caveats"] and f"tracekit: warning: {line}" in err
    assert report["ranks"]["participants"] == truth.ranks
    assert report["ranks"]["straggler"]["rank"] == truth.straggler
    ran_per_rank(report, truth.ranks)


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_rank_file_from_another_run(tmp_path: Path, fmt: str) -> None:
    folder, specs, truth = job(tmp_path, fmt)
    write(another_run(specs[3]), folder, 3, fmt)
    report, _ = analyze(folder)
    ranks = report["ranks"]
    assert any(r.startswith("rank 3: its collectives line up only if its clock were +3600.000 s off rank 0's: a "
                            "file from another run?") for r in ranks["reasons"]), ranks["reasons"]
    clock = next(c for c in ranks["clocks"] if c["rank"] == 3)
    assert clock["excluded"] and not clock["estimated"]
    assert next(r for r in ranks["per_rank"] if r["rank"] == 3)["collectives"] == 0
    assert ranks["straggler"]["rank"] == truth.straggler  # the other seven still tell who was late
    ran_per_rank(report, truth.ranks)


def test_the_same_job_with_the_straggler_from_another_run(tmp_path: Path) -> None:
    """The file from another run is the reference rank's: the majority's clock wins, rank 1 becomes the reference."""
    folder, specs, truth = job(tmp_path, "kineto")
    write(another_run(specs[0]), folder, 0, "kineto")
    ranks = analyze(folder)[0]["ranks"]
    clocks = {c["rank"]: c for c in ranks["clocks"]}
    assert clocks[0]["excluded"] and clocks[1]["note"] == "reference clock" and clocks[1]["offset_ns"] == 0
    assert clocks[4]["offset_ns"] == truth.offset_ns[4]


def test_offsets_that_cannot_be_estimated_say_so(tmp_path: Path) -> None:
    folder, _, _ = job(tmp_path, "kineto", steps=1)  # two collectives: fewer than three to agree on an offset
    report, _ = analyze(folder)
    ranks = report["ranks"]
    assert not any(c["estimated"] for c in ranks["clocks"] if c["rank"] != 0)
    line = "rank 4: clock offset cannot be estimated (2 collectives agree on one offset, fewer than 3)"
    assert any(r.startswith(line) for r in ranks["reasons"]), ranks["reasons"]
