"""`--jobs` unless given (issue 26): the cores available for input files of ``PARALLEL_MIN_BYTES`` on average,
one process and one thread for small ones (a folder of small rank files reads and analyses faster so)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.store import inputs


def test_small_files_run_in_one_process_and_big_ones_on_every_core(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "available_cores", lambda: 4)
    small = tmp_path / "small"
    small.mkdir()
    for i in range(3):
        (small / f"rank{i}.json").write_text('{"traceEvents": []}')
    assert inputs.auto_jobs([small]) == 1
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: the size is what counts
        f.truncate(inputs.PARALLEL_MIN_BYTES)
    assert inputs.auto_jobs([big]) == 4
    assert inputs.auto_jobs([big, small / "rank0.json"]) == 1  # on average under the bound
    assert inputs.auto_jobs([tmp_path / "missing.json"]) == 4  # left to opening the inputs to say what is wrong
    monkeypatch.setattr(inputs, "available_cores", lambda: 1)
    assert inputs.auto_jobs([big]) == 1
