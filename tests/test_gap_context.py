"""What the host was doing during a gap: a tiny inline store, the query, the expected answer."""

from __future__ import annotations

import duckdb
import pytest

from tracekit.analysis.gaps import gap_context


def store(api: list[tuple[str, int, int]], ranges: list[tuple[str, int, int | None]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE api_calls (rank INT, pid INT, tid INT, is_duplicate BOOL, name VARCHAR, "
                "start_ns BIGINT, end_ns BIGINT)")
    con.execute("CREATE TABLE ranges (rank INT, pid INT, tid INT, device_id INT, name VARCHAR, start_ns BIGINT, "
                "end_ns BIGINT)")
    for row in api:
        con.execute("INSERT INTO api_calls VALUES (0, 1, 1, false, ?, ?, ?)", row)
    for row in ranges:
        con.execute("INSERT INTO ranges VALUES (0, 1, 1, NULL, ?, ?, ?)", row)
    con.execute("INSERT INTO ranges VALUES (0, 1, 2, NULL, 'other thread', 100, 200)")
    con.execute("CREATE VIEW launches AS SELECT * FROM api_calls WHERE NOT is_duplicate")  # the store's named view
    return con


STEP = ("ProfilerStep#3", 0, 1000)


@pytest.mark.parametrize(("api", "ranges", "expected"), [
    # the sync's tail opens the gap, the slow launch fills it; the op covers most of it, inside the step
    ([("cudaStreamSynchronize", 50, 110), ("cudaGraphLaunch", 120, 200)], [STEP, ("aten::linear", 90, 180)],
     {"range": "aten::linear", "api_call": "cudaGraphLaunch"}),
    # no inner range covers half of the gap: the one covering most (the step); no call at all
    ([], [STEP, ("aten::copy_", 190, 260), ("aten::mm", 60, 130)], {"range": "ProfilerStep#3", "api_call": None}),
    # no range covers half and there is no enclosing one: the largest share; an open range counts by its start
    ([("cudaLaunchKernel", 195, 230)], [("late", 170, 300), ("early", 100, 140), ("mark", 150, None)],
     {"range": "early", "api_call": "cudaLaunchKernel"}),
    ([], [], {"range": None, "api_call": None}),
])
def test_gap_context_names_what_covers_the_gap(api: list, ranges: list, expected: dict) -> None:
    assert gap_context(store(api, ranges), 0, 1, 1, 100, 200) == expected
