"""Ranks in parallel (files read in processes, ranks analysed in threads) give the report of one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.analysis.analyze import analyze
from tracekit.analysis.options import AnalyzeOptions
from tracekit.store.ingest import Store, open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RANKS = [FIXTURES / "sample_decode_rank0.json.gz", FIXTURES / "sample_decode_rank1.json.gz"]


@pytest.fixture(scope="module")
def serial() -> dict:
    with open_store(RANKS, use_cache=False, jobs=1) as store:  # in memory, one file and one rank at a time
        assert store.jobs == 1 and [f.db.name for f in store.files] == [":memory:", ":memory:"]
        return analyze(store, AnalyzeOptions())


def test_parallel_ranks_give_the_serial_report(serial: dict) -> None:
    with open_store(RANKS, use_cache=False, jobs=3) as store:  # more jobs than ranks: one each
        assert store.jobs == 3 and all(f.db.suffix == ".duckdb" for f in store.files)  # on disk: worker processes
        report = analyze(store, AnalyzeOptions())
    assert serial["steps"]["count"] > 0 and len(serial["inputs"]) == 2
    assert report == serial



def _kind(store: Store) -> str:
    """``table`` when the store's ``kernels`` is one table (the files copied into memory), else ``view``."""
    return store.con.execute("""
        SELECT CASE WHEN EXISTS (SELECT 1 FROM duckdb_tables() WHERE table_name = 'kernels'
                                 AND database_name = current_database()) THEN 'table' ELSE 'view' END
    """).fetchone()[0]


def test_serial_store_is_one_copy(serial: dict) -> None:
    with open_store(RANKS, use_cache=False, jobs=1) as store:
        assert _kind(store) == "table"
        assert analyze(store, AnalyzeOptions()) == serial


@pytest.mark.parametrize("limit", [0, 1 << 40])
def test_stores_on_disk_as_views_or_copied_give_the_serial_report(serial: dict, limit: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tracekit.store.ingest.COPY_MAX_BYTES", limit)  # 0: views over the attached stores
    with open_store(RANKS, use_cache=False, jobs=2) as store:
        assert _kind(store) == ("view" if limit == 0 else "table")
        report = analyze(store, AnalyzeOptions())
    assert report == serial
