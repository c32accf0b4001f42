"""Large Kineto files read in bounded blocks (parsers/kineto_stream.py) store exactly what a file held whole
stores, table by table in stored order: on real traces and on inline ones whose strings and nested values
hold what a cut looks for; a tail the look-ahead gets wrong reads the file whole; bad input is one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest
from conftest import SHARED_TRACES
from test_kineto_reader import BASE_NS, dumps_exact, gpu, modern_trace, write, x

from tracekit.errors import InputError
from tracekit.parsers import kineto, kineto_stream, schema

TORCH = SHARED_TRACES / "torch"


def stored(path: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect()
    schema.create_tables(con)
    kineto.read_kineto(path, con)
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    return {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in tables}  # stored order


@pytest.fixture
def in_blocks(monkeypatch: pytest.MonkeyPatch):
    """Read every file in blocks of ``block`` bytes (and chunks of 5 events); returns a reader."""

    def read(path: Path, block: int = 300) -> dict[str, list[tuple]]:
        monkeypatch.setattr(kineto, "STREAM_MIN_BYTES", 0)
        monkeypatch.setattr(kineto_stream, "BLOCK_BYTES", block)
        try:
            return stored(path)
        finally:
            monkeypatch.setattr(kineto, "STREAM_MIN_BYTES", 1 << 60)

    monkeypatch.setattr(kineto, "STREAM_MIN_BYTES", 1 << 60)
    return read


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 5 events, so that chunks and blocks cut an inline trace in many places."""
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", 5)


def awkward_trace() -> str:
    """Events whose strings hold '},{' and ']' and whose args nest lists of objects; values after the events."""
    events = [
        x("cpu_op", 'aten::mm"},{"x": [1]}', "1000.100", "10.000", **{"External id": 7, "Input Dims": [[2, 2]],
          "Call stack": "a},\n{b]}, {\"c\": [{}]}"}),
        x("cuda_runtime", "cudaLaunchKernel", "1000.200", "3.000", correlation=11),
        gpu("kernel", "k],[0]}", "1010.123", "2.501", 11, grid=[4, 2, 1], block=[128, 1, 1],
            extra=[{"a": 1}, {"b": [2]}]),
    ] * 7
    doc = {
        "schemaVersion": 1,
        "note": '"traceEvents": [ not here',
        "distributedInfo": {"rank": 2, "world_size": 4},
        "traceEvents": events,
        "traceName": "t],\"z\": 1}",
        "extra": [{"a": [1]}],
        "baseTimeNanoseconds": BASE_NS,
    }
    return dumps_exact(doc)


@pytest.mark.parametrize("name", ["awkward.json", "awkward.json.gz", "modern.json", "list.json"])
@pytest.mark.usefixtures("small_chunks")
def test_blocks_store_what_the_whole_file_stores(tmp_path: Path, in_blocks, name: str) -> None:
    if name.startswith("list"):
        text = json.dumps([gpu("kernel", f"k{i}", 5 + i, 2, i) for i in range(40)])
    else:
        text = awkward_trace() if name.startswith("awkward") else modern_trace()
    path = write(tmp_path, "\ufeff  " + text if name == "awkward.json" else text, name)
    whole = stored(path)
    assert whole["kernels"]
    for block in (64, 300, 1 << 20):
        assert in_blocks(path, block) == whole


@pytest.mark.parametrize("name", ["hta__nccl_parser_config__nccl_data.json.gz", "hta__call_stack__backward_thread.json",
                                  "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"])
def test_blocks_on_real_traces(shared_traces: Path, in_blocks, name: str) -> None:
    path = TORCH / name
    assert in_blocks(path, 4096) == stored(path)


def test_a_tail_the_look_ahead_gets_wrong_reads_the_file_whole(tmp_path: Path, in_blocks,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The last bytes start inside the tail's own list of objects: the look-ahead takes a ']' there for the
    end of the events; once the events end, the tail differs, and the file is read whole instead."""
    path = write(tmp_path, awkward_trace())
    data = path.read_bytes()
    tail_bytes = len(data) - data.rindex(b'[{"a": [1]}]') - 1  # the end starts inside that list
    end = data[-tail_bytes:]
    monkeypatch.setattr(kineto_stream, "TAIL_BYTES", tail_bytes)
    guessed = kineto_stream.guess_tail(end, bare_list=False)
    assert guessed is not None and b"traceName" not in guessed[0]  # a wrong guess
    whole = stored(path)
    assert in_blocks(path) == whole
    assert {r[1] for r in whole["trace_meta"]} >= {"traceName", "baseTimeNanoseconds"}


@pytest.mark.parametrize(("cut", "problem"), [(0.5, "truncated JSON"), (None, "invalid JSON")])
def test_bad_input_in_blocks_is_one_line(tmp_path: Path, in_blocks, cut: float | None, problem: str) -> None:
    text = awkward_trace()
    if cut is None:
        text = text.replace('"cudaLaunchKernel", "pid"', '"cudaLaunchKernel" "pid"', 5)
    else:
        text = text[: int(len(text) * cut)]
    path = write(tmp_path, text, "bad.json.gz")
    with pytest.raises(InputError) as err:
        in_blocks(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_small_files_are_read_whole_and_large_ones_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, awkward_trace())
    opened = []
    real = kineto_stream.EventBlocks.__init__

    def spy(self, *args, **kwargs) -> None:
        opened.append(args[0])
        real(self, *args, **kwargs)

    monkeypatch.setattr(kineto_stream.EventBlocks, "__init__", spy)
    stored(path)
    assert opened == []
    monkeypatch.setattr(kineto, "STREAM_MIN_BYTES", path.stat().st_size)
    stored(path)
    assert opened == [path]
    gz = tmp_path / "a.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    monkeypatch.setattr(kineto, "STREAM_MIN_BYTES", gz.stat().st_size * kineto.GZIP_RATIO)
    stored(gz)
    assert opened == [path, gz]
