"""`analyze --engine dask` gives the in-process report; the in-process report cache answers repeat runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixtures.scenarios import GapPlan, decode_capture
from fixtures.synth import write_nsys
from tracekit import floor
from tracekit.analysis.analyze import analyze
from tracekit.analysis.options import AnalyzeOptions
from tracekit.budgets.budget import class_budgets
from tracekit.budgets.classify import load_rules
from tracekit.budgets.configs import load_config
from tracekit.cli import main
from tracekit.store.ingest import open_store
from tracekit.store.inputs import Inputs

CONFIG = "dsv32-ep16"


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two planted decode ranks; rank 1 has longer host gaps, so it is the straggler."""
    budgets = class_budgets(floor.compute_floor(load_config(CONFIG)).parts, load_rules())
    folder = tmp_path_factory.mktemp("ranks")
    for rank, launch_ns in ((0, 100_000), (1, 400_000)):
        spec, _ = decode_capture(budgets, gaps=GapPlan(launch_ns=launch_ns, sync_ns=50_000),
                                 exposed_dispatch_ns=200_000 * (rank + 1))
        write_nsys(dataclasses.replace(spec, rank=rank), folder / f"rank{rank}.sqlite")
    return folder


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as local:
        yield local


def cli_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_dask_engine_gives_the_in_process_report(two_ranks: Path, cluster, tmp_path: Path) -> None:
    from tracekit.analysis.engine import analyze_dask

    opts = AnalyzeOptions(config=CONFIG)
    with open_store([two_ranks], cache_dir=tmp_path / "local") as store:
        expected = analyze(store, opts)
    got = analyze_dask(Inputs((two_ranks,), cache_dir=tmp_path / "dask"), opts, cluster.scheduler_address)
    assert got == expected
    assert expected["steps"]["slowest_rank"] == 1 and len(expected["inputs"]) == 2


def test_cli_dask_engine_matches_local_run(two_ranks: Path, cluster) -> None:
    local = cli_json(str(two_ranks), "--no-cache", "--config", CONFIG)
    dask = cli_json(str(two_ranks), "--no-cache", "--config", CONFIG, "--engine", "dask",
                    "--scheduler", cluster.scheduler_address)
    assert dask == local


def test_dask_engine_on_real_eight_rank_kineto_set(cluster, tmp_path: Path, shared_traces: Path) -> None:
    dlrm = shared_traces / "torch" / "dlrm8_v100"
    local = cli_json(str(dlrm), "--cache-dir", str(tmp_path / "a"))
    dask = cli_json(str(dlrm), "--cache-dir", str(tmp_path / "b"), "--engine", "dask",
                    "--scheduler", cluster.scheduler_address)
    assert dask == local and len(local["inputs"]) == 8


def test_repeat_analyze_reads_the_cached_report(two_ranks: Path, tmp_path: Path) -> None:
    from tracekit.analysis.engine import read_cached_report, write_cached_report

    cache = tmp_path / "cache"
    args = (str(two_ranks), "--cache-dir", str(cache), "--config", CONFIG)
    first = cli_json(*args)
    (entry,) = (cache / "reports").glob("*.json")
    assert read_cached_report(entry) == first
    # A cache entry that differs detectably, with a matching size and CRC: the next run prints it, so the
    # cache was read (no analysis would give this reason).
    marked = {**first, "reasons": ["read from the report cache"]}
    inputs = json.loads(entry.read_bytes().split(b"\n", 1)[0])["input_keys"]
    assert len(inputs) == 2 and all(len(h) == 32 for h in inputs)  # bound to both inputs' content
    write_cached_report(entry, marked)  # the same report bound to no input: never read
    assert cli_json(*args) == first
    write_cached_report(entry, marked, inputs=inputs)
    assert cli_json(*args) == marked
    # Damaged in place into other valid JSON of the same size: the CRC-32 catches it; analysed again.
    head, body = entry.read_bytes().split(b"\n", 1)
    entry.write_bytes(head + b"\n" + body.replace(b"read from the report cache", b"read from the report cachE"))
    assert json.loads(entry.read_bytes().split(b"\n", 1)[1])["reasons"] == ["read from the report cachE"]
    assert cli_json(*args) == first
    assert read_cached_report(entry) == first  # and cached again, whole
    # Other options are another report; an entry that is not even JSON is analysed again.
    other = cli_json(*args, "--threshold", "2")
    assert other["config"]["threshold"] == 2 and len(list((cache / "reports").glob("*.json"))) == 2
    entry.write_text("{not json")
    assert cli_json(*args) == first


def test_scheduler_needs_the_dask_engine(two_ranks: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", str(two_ranks), "--no-cache", "--scheduler", "tcp://x:1"])
    assert result.exit_code == 2 and "--scheduler" in result.output


def test_dask_engine_gives_the_same_cross_rank_analysis(cluster, tmp_path: Path) -> None:
    """The per-rank part on Dask workers, the cross-rank part here: the planted straggler job's `ranks` section
    and exposed wait/transfer split are the in-process ones."""
    from fixtures.scenarios_ranks import ranks_capture
    from fixtures.synth import write_kineto

    specs, truth = ranks_capture("kineto")
    for rank, spec in enumerate(specs):
        write_kineto(spec, tmp_path / f"rank{rank}.pt.trace.json.gz")
    local = cli_json(str(tmp_path), "--no-cache")
    dask = cli_json(str(tmp_path), "--no-cache", "--engine", "dask", "--scheduler", cluster.scheduler_address)
    assert dask["ranks"] == local["ranks"] and dask["exposed_comm"] == local["exposed_comm"]
    assert local["ranks"]["straggler"]["rank"] == truth.straggler
