"""JAX XPlane (``*.xplane.pb``): both shared MI300X files read; kernel count and time equal an independent decode
of the protobuf wire format; time per kernel agrees with TraceLens's reference CSVs; a synthetic XSpace gives
its planted rows; XLA module executions are the steps ``--step`` selects."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from fixtures.synth_xplane import OPS, write_xplane
from tracekit.cli import main
from tracekit.parsers.registry import detect
from tracekit.parsers.schema import create_tables

FILES = ("tracelens__mi300__jax_conv_minimal_08__tw003.xplane.pb",
         "tracelens__mi300__jax_conv_minimal_legacy.xplane.pb")


def read(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_tables(con)
    spec = detect(path)
    assert spec.name == "xplane"
    spec.reader()(path, con)
    return con


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of one message: varints as ints, length-delimited fields as bytes."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        else:
            value, i = buf[i:i + 4], i + 4
        out.append((number, value))
    return out


def independent_kernels(path: Path) -> tuple[int, int]:
    """(count, total ns) of the events on the ``Stream #n(Kernel)`` lines of ``/device:GPU:n`` planes, decoded
    from the wire format by field number (XSpace.planes 1; XPlane.name 2, lines 3; XLine.name 2, events 4;
    XEvent.duration_ps 3), without the reader's descriptor."""
    count = total = 0
    for number, plane in _fields(path.read_bytes()):
        if number != 1:
            continue
        fields = _fields(plane)
        name = next((v for n, v in fields if n == 2), b"").decode()
        if not re.fullmatch(r"/device:GPU:\d+", name):
            continue
        for line in (v for n, v in fields if n == 3):
            lf = _fields(line)
            if not re.match(r"Stream #\d+\(Kernel\)", next((v for n, v in lf if n == 2), b"").decode()):
                continue
            for event in (v for n, v in lf if n == 4):
                count += 1
                total += round(next((v for n, v in _fields(event) if n == 3), 0) / 1000)
    return count, total


@pytest.mark.parametrize("name", FILES)
def test_shared_files_kernels_equal_an_independent_decode(shared_traces: Path, name: str) -> None:
    path = shared_traces / "jax" / name
    con = read(path)
    want = independent_kernels(path)
    assert want[0] > 0
    assert con.execute("SELECT count(*), sum(dur_ns) FROM kernels").fetchone() == want
    assert con.execute("SELECT DISTINCT sm_count, memory_bytes, compute_major, compute_minor, vendor FROM devices"
                       ).fetchall() == [(304, 206141652992, 9, 4, "amd")]  # MI300X: the catalog's identity
    # A kernel's HLO op (the classification signal) is a GPU-side range lying exactly over that kernel.
    ops, placed = con.execute("""SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM kernels k
            WHERE k.device_id = r.device_id AND k.stream_id = r.stream_id AND k.start_ns = r.start_ns
              AND k.end_ns = r.end_ns))
        FROM ranges r WHERE r.kind = 'gpu_range' AND r.source = 'hlo_op'""").fetchone()
    assert ops > 0 and placed == ops


def test_time_per_kernel_agrees_with_tracelens(shared_traces: Path) -> None:
    """TraceLens's kernel_launchers_summary.csv of the legacy file: count and total µs per kernel name."""
    con = read(shared_traces / "jax" / FILES[1])
    reference = shared_traces / "jax" / "reference-tracelens-jax_conv_minimal" / "kernel_launchers_summary.csv"
    with reference.open() as f:
        rows = list(csv.DictReader(f))
    got = dict(((n, (c, t)) for n, c, t in con.execute("SELECT name, count(*), sum(dur_ns) FROM kernels GROUP BY 1")
                .fetchall()))
    assert len(rows) == 5
    for row in rows:
        count, total_ns = got[row["name"]]
        assert count == int(row["Count"]), row["name"]
        assert total_ns / 1000 == pytest.approx(float(row["total_direct_kernel_time_sum"]), abs=0.001 * count)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_xplane(tmp_path_factory.mktemp("xp") / "run.xplane.pb", steps=4)


def test_synthetic_rows(synthetic: Path) -> None:
    con = read(synthetic)
    assert con.execute("SELECT count(*), sum(dur_ns), min(grid_x), min(block_x) FROM kernels").fetchone() == (
        4 * len(OPS), 4 * sum(d for _, d in OPS), 1024, 256)
    assert con.execute("SELECT count(*) FROM kernels k SEMI JOIN api_calls a USING (pid, correlation_id)"
                       ).fetchone()[0] == 4 * len(OPS)  # each kernel joins its hipModuleLaunchKernel
    assert con.execute("SELECT kind, source, count(*) FROM ranges GROUP BY ALL ORDER BY 1").fetchall() == [
        ("gpu_range", "hlo_op", 4 * len(OPS)), ("op", "xla_op", 4 * len(OPS)), ("range", "xla_module", 4)]
    assert con.execute("SELECT host FROM capture").fetchall() == [("synthetic-host",)]


def test_xla_modules_are_the_steps_step_selects(synthetic: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", str(synthetic), "--no-cache", "--format", "json",
                                       "--step", ":XLA GPU module$"])
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["steps"]
    assert steps["count"] == 4 and steps["source"] == ["regex"]


def test_xla_module_executions_are_the_steps_without_step(synthetic: Path, shared_traces: Path) -> None:
    """With no --step, each XLA module execution is a step (as ProfilerStep#N is in a PyTorch capture)."""
    for path, count in ((synthetic, 4), (shared_traces / "jax" / FILES[0], 40)):
        result = CliRunner().invoke(main, ["analyze", str(path), "--no-cache", "--format", "json"])
        assert result.exit_code == 0, result.output
        steps = json.loads(result.stdout)["steps"]
        assert (steps["count"], steps["source"]) == (count, ["xla_module"]), path.name
