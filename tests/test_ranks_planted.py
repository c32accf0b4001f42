"""Planted multi-rank captures in both formats (8 ranks on 2 hosts, one straggler whose steps start late after
a host gap, per-host clock offsets, known transfer per collective): the cross-rank analysis recovers the
straggler and its cause, the wait and transfer totals and the clock offsets within 2 %."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios_ranks import PlantedRanks, ranks_capture
from fixtures.synth import write_kineto, write_nsys
from tracekit.cli import main

FORMATS = ["nsys", "kineto"]


def write_ranks(tmp_path: Path, fmt: str, **kwargs: object) -> tuple[Path, PlantedRanks]:
    specs, truth = ranks_capture(fmt, **kwargs)
    folder = tmp_path / fmt
    folder.mkdir()
    for rank, spec in enumerate(specs):
        if fmt == "nsys":
            write_nsys(spec, folder / f"rank{rank}.sqlite")
        else:
            write_kineto(spec, folder / f"rank{rank}.pt.trace.json.gz")
    return folder, truth


def analyze(*args: str) -> dict:
    result = CliRunner().invoke(main, ["analyze", *args, "--no-cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def within(got: float, want: float, scale: float | None = None) -> bool:
    """Within 2 % of ``want`` (of ``scale`` when the truth is 0)."""
    return abs(got - want) <= 0.02 * abs(scale if scale is not None else want)


@pytest.fixture(params=FORMATS)
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict, PlantedRanks, str]:
    folder, truth = write_ranks(tmp_path, request.param)
    return analyze(str(folder)), truth, request.param


def test_straggler_and_its_cause_are_named(planted: tuple[dict, PlantedRanks, str]) -> None:
    report, truth, _ = planted
    s = report["ranks"]["straggler"]
    assert s["rank"] == truth.straggler
    assert within(s["late_ns"], truth.late_ns)
    assert within(s["waited_for_ns"], truth.wait_total_ns)
    assert s["cause"]["kind"] == "late_step_start" and s["cause"]["detail"] == "host_idle"
    assert "host gap" in s["cause"]["text"]
    row = next(r for r in report["ranks"]["per_rank"] if r["rank"] == truth.straggler)
    assert within(row["step_start_late_ns"], truth.late_ns) and row["wait_ns"] == 0
    assert [p["rank"] for p in report["ranks"]["per_step"]] == [truth.straggler] * truth.steps
    assert all(within(p["waited_for_ns"], (truth.ranks - 1) * truth.late_ns) for p in report["ranks"]["per_step"])


def test_wait_and_transfer_totals_and_exposed_split(planted: tuple[dict, PlantedRanks, str]) -> None:
    report, truth, fmt = planted
    ranks = report["ranks"]
    assert ranks["instances"]["matched"] == 2 * truth.steps
    assert ranks["methods"] == (["seq"] if fmt == "kineto" else ["order"])
    records = 2 * truth.steps * truth.ranks  # named by PyTorch's metadata in Kineto, NCCL's NVTX ranges in nsys
    assert ranks["name_sources"] == ({"pytorch": records} if fmt == "kineto" else {"nvtx": records})
    assert within(ranks["wait_ns"], truth.wait_total_ns)
    assert within(ranks["transfer_ns"], truth.transfer_total_ns)
    ec = report["exposed_comm"]
    assert within(ec["exposed_ns"], truth.late_ns + sum(truth.transfer_ns))
    assert within(ec["wait_ns"], truth.late_ns) and within(ec["transfer_ns"], sum(truth.transfer_ns))


def test_clock_offsets_are_recovered(planted: tuple[dict, PlantedRanks, str]) -> None:
    report, truth, fmt = planted
    clocks = {c["rank"]: c for c in report["ranks"]["clocks"]}
    biggest = max(truth.offset_ns)
    for rank, offset in enumerate(truth.offset_ns):
        assert clocks[rank]["estimated"], clocks[rank]
        assert within(clocks[rank]["offset_ns"], offset, scale=offset or biggest), (rank, clocks[rank])
        assert clocks[rank]["host"] == (f"node{truth.host_of[rank]}" if fmt == "nsys" else None)
    if fmt == "nsys":  # the files name their hosts: one offset per host
        hosts = {h["host"]: h for h in report["ranks"]["hosts"]}
        for rank, offset in enumerate(truth.offset_ns):
            host = hosts[f"node{truth.host_of[rank]}"]
            assert rank in host["ranks"] and within(host["offset_ns"], offset, scale=offset or biggest)


def test_transfer_is_placed_against_the_network_budget(tmp_path: Path) -> None:
    folder, truth = write_ranks(tmp_path, "kineto")
    report = analyze(str(folder), "--config", "llama3-70b-tp8-h100")
    rows = {r["collective"]: r for r in report["ranks"]["network"]}
    assert set(rows) == {"allreduce", "allgather"}
    for op, transfer, size, factor in (("allreduce", truth.transfer_ns[0], truth.size_bytes[0], 2 * 7 / 8),
                                       ("allgather", truth.transfer_ns[1], truth.size_bytes[1], 7 / 8)):
        r = rows[op]
        assert r["ranks"] == truth.ranks and r["size_bytes"] == size and within(r["transfer_ns"], transfer)
        assert within(r["busbw_bytes_per_s"], size / (transfer / 1e9) * factor)
        assert r["catalog_busbw_bytes_per_s"] == 370e9 and r["transfer_over_budget"] > 1
    assert report["ranks"]["network_gpu"] == "h100"


VERDICT_CASE = {"compute_ns": (8_000_000, 4_000_000), "late_ns": 6_000_000}  # step 18.9 ms, 1.74x the floor


@pytest.mark.parametrize("fmt", FORMATS)
def test_exposed_wait_for_a_late_host_is_pipeline_and_names_the_rank(tmp_path: Path, fmt: str) -> None:
    folder, truth = write_ranks(tmp_path, fmt, **VERDICT_CASE)
    result = CliRunner().invoke(main, ["analyze", str(folder), "--no-cache", "--format", "json", "--config",
                                       "llama3-70b-tp8-h100", "--gate"])
    report = json.loads(result.stdout)
    assert report["verdict"] == "pipeline" and result.exit_code == 10
    line = next(r for r in report["reasons"] if r.startswith("exposed communication is"))
    assert "waiting in collectives, mostly for rank 7" in line and "host gap before the step (host_idle" in line
    assert line.endswith("the fix is on rank 7, not the network")


def test_exposed_wait_for_a_slow_kernel_is_that_kernel_class(tmp_path: Path) -> None:
    """The same wait caused by the late rank's long norm kernel: the wait is its kernel time, not pipeline."""
    folder, truth = write_ranks(tmp_path, "kineto", slow_kernel=True, **VERDICT_CASE)
    result = CliRunner().invoke(main, ["analyze", str(folder), "--no-cache", "--format", "json", "--config",
                                       "llama3-70b-tp8-h100", "--gate"])
    report = json.loads(result.stdout)
    cause = report["ranks"]["straggler"]["cause"]
    assert (cause["kind"], cause["detail"]) == ("kernel_class", "norm_elementwise")
    assert within(cause["excess_ns"], truth.steps * truth.late_ns)
    assert report["verdict"] == "kernel" and result.exit_code == 11
    assert any("- wait for slow kernels on the late rank" in r for r in report["reasons"])
    assert any("norm_elementwise kernels run 6.000 ms longer" in r for r in report["reasons"])


def test_report_surfaces_carry_the_ranks(tmp_path: Path) -> None:
    """Markdown: the per-rank table and the straggler; HTML: aligned lanes of the median step with wait and
    transfer apart; Perfetto: wait and transfer spans per collective, and each rank's clock offset."""
    import re

    from tracekit.report.html_ranks import TRANSFER_COLOUR, WAIT_COLOUR

    folder, truth = write_ranks(tmp_path, "kineto")
    md = CliRunner().invoke(main, ["analyze", str(folder), "--no-cache", "--format", "markdown"]).stdout
    table = md[md.index("## 2b. across ranks"):]
    assert "The others waited 70.000 ms for rank 7 (100% of all wait" in table  # ms: 3 decimals everywhere
    assert len(re.findall(r"^\| \d \| \d \|", table, re.M)) == truth.ranks

    page_path = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["analyze", str(folder), "--no-cache", "--format", "html", "--out",
                                     str(page_path)]).exit_code == 0
    page = page_path.read_text()
    chart = page[page.index('id="tl-ranks"'):]
    chart = chart[:chart.index("</svg>")]
    lanes = re.findall(r'<div title="[^"]*">(rank \d[^<]*)</div>', page[page.index('id="tl-ranks"'):])
    assert len(lanes) == truth.ranks and lanes[4] == "rank 4 (1.700 ms clock)"
    waits = re.findall(rf'x="([\d.]+)" y="(\d+)" width="([\d.]+)" height="\d+" fill="{WAIT_COLOUR}"', chart)
    assert len(waits) == truth.ranks - 1 and all(float(w) == truth.late_ns / 1e3 for _, _, w in waits)
    assert len(re.findall(f'fill="{TRANSFER_COLOUR}"', chart)) == 2 * truth.ranks

    out = tmp_path / "timeline.json"
    assert CliRunner().invoke(main, ["export", str(folder), "--no-cache", "--perfetto", str(out)]).exit_code == 0
    events = json.loads(out.read_text())["traceEvents"]
    wait = [e for e in events if e.get("cat") == "tracekit" and e["tid"] == 5]
    transfer = [e for e in events if e.get("cat") == "tracekit" and e["tid"] == 6]
    assert sum(round(e["dur"] * 1000) for e in wait) == truth.wait_total_ns
    assert sum(round(e["dur"] * 1000) for e in transfer) == truth.transfer_total_ns
    assert {e["name"] for e in wait} == {"wait for rank 7: allreduce"}
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert "rank 4 GPU 0: tracekit analysis (clock offset +1.700 ms)" in names
