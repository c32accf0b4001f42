"""What a person reads: tables fit the terminal, long names keep their tail, numbers print in their unit,
a caveat shared by ranks prints once; JSON and CSV keep every name whole."""

from __future__ import annotations

import csv
import io
import json
import re

import polars as pl
import pytest

from tracekit.analysis.caveats import Caveat, caveat_texts
from tracekit.report.document import Document, Table
from tracekit.report.render import emit, render
from tracekit.report.text import shorten

LONG = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::BinaryFunctor<float, "
        "float, float, at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase&, "
        "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>> "
        "const&)::{lambda(int)#1}>(int, DISTINGUISHING_TAIL_42)")


def document() -> Document:
    frame = pl.DataFrame({"name": [LONG, "short_kernel"], "instances": [3, 12_000],
                          "total_ns": [265_140, 1_060_560_000], "avg_ns": [88_380.333, 88_380.0],
                          "measured ms": [0.0883803, 1060.56], "time_pct": [0.025, 99.975]})
    return Document("tracekit kernels", [Table("kernels by name", frame)])


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_a_table_fits_the_terminal_width(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                         columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    emit(document(), "table", None)
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 2  # one line per row: no name wraps into a multi-line cell
    cell = rows[0].split("│")[1].strip()
    assert "…" in cell and cell.startswith("void") and cell.endswith("_42)")  # head and tail, middle cut
    assert "DISTINGUISHING_TAIL_42)" in cell or columns < 120


def test_long_names_are_cut_in_the_middle_keeping_the_tail() -> None:
    cut = shorten(LONG, 60)
    assert len(cut) == 60 and cut.startswith("void at::native::") and cut.endswith("DISTINGUISHING_TAIL_42)")
    assert shorten("short", 60) == "short"


def test_markdown_cuts_names_but_json_and_csv_keep_them_whole() -> None:
    doc = document()
    markdown = render(doc, "markdown")
    assert LONG not in markdown.replace("\\", "") and "DISTINGUISHING\\_TAIL\\_42)" in markdown
    body = json.loads(render(doc, "json"))
    assert body["kernels by name"][0]["name"] == LONG
    rows = list(csv.DictReader(io.StringIO(render(doc, "csv"))))
    assert rows[0]["name"] == LONG


def test_numbers_print_in_their_unit() -> None:
    """Nanosecond columns print in milliseconds with 3 decimals, their names saying ms (never 8.838e+04, never
    a raw count of ns); CSV and JSON keep the nanoseconds."""
    for fmt in ("table", "markdown"):
        text = render(document(), fmt, width=200)
        assert not re.search(r"\de[+-]\d", text), text
        assert "88380" not in text and "1060560000" not in text and "265140" not in text
        assert "0.265" in text and "0.088" in text and "1,060.560" in text
        assert "total ms" in text and "avg ms" in text and "total_ns" not in text.replace("\\", "")
    rows = list(csv.DictReader(io.StringIO(render(document(), "csv"))))
    assert rows[1]["total_ns"] == "1060560000"


def test_a_caveat_shared_by_ranks_is_printed_once_naming_them() -> None:
    same = "no NVTX ranges or user annotations (no step markers or phase names)"
    caveats = [Caveat("no_ranges", r, f"rank {r}: {same}") for r in range(8)]
    caveats += [Caveat("unmatched_launch", 3, "rank 3: 64 kernels without their launch call"),
                Caveat("unmatched_launch", 1, "rank 1: 64 kernels without their launch call"),
                Caveat("unmatched_launch", 2, "rank 2: 5 kernels without their launch call")]
    assert caveat_texts(caveats) == [f"ranks 0-7: {same}", "ranks 1, 3: 64 kernels without their launch call",
                                     "rank 2: 5 kernels without their launch call"]


# ---- a terminal of width 0 and a closed pipe (issue 27): never an empty table, never exit 1 ----------------

SAMPLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "dsv32_ep16_decode.sqlite"


def _tracekit(tmp_path, *args: str) -> list[str]:  # noqa: ANN001
    import sys

    return [sys.executable, "-m", "tracekit", "kernels", str(SAMPLE), "--cache-dir", str(tmp_path / "cache"), *args]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


def test_a_terminal_of_width_zero_gets_a_table_80_columns_wide(tmp_path) -> None:  # noqa: ANN001
    """Under `script` (and some CI ptys) the terminal reports 0 x 0: the table was empty with exit 0."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    assert os.get_terminal_size(slave).columns == 0
    proc = subprocess.Popen(_tracekit(tmp_path, "--quiet"), stdin=slave, stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the pty closes when the child exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode())
    rows = [line for line in text.splitlines() if line.startswith("│ void")]
    assert len(rows) >= 5 and all(line.count("│") == 10 for line in rows), text  # every kernel, every column
    assert all("…" in line.split("│")[1] for line in rows)  # names cut to fit 80 columns, not 0


def test_a_closed_pipe_exits_0_silently(tmp_path) -> None:  # noqa: ANN001
    """`tracekit ... | head` under `set -o pipefail`: the reader is gone before the write (EPIPE); exit 0 and
    nothing on stderr (rich's own handler exited 1)."""
    import os
    import subprocess

    for fmt in ("table", "json"):
        read, write = os.pipe()
        os.close(read)  # every write now fails with EPIPE
        proc = subprocess.run(_tracekit(tmp_path, "--format", fmt), stdout=write, stderr=subprocess.PIPE, env=_env(),
                              timeout=120)
        os.close(write)
        assert proc.returncode == 0 and proc.stderr == b"", (fmt, proc.stderr)


def test_standard_output_on_a_full_disk_is_one_line(tmp_path) -> None:  # noqa: ANN001
    import subprocess

    with open("/dev/full", "wb") as full:
        proc = subprocess.run(_tracekit(tmp_path), stdout=full, stderr=subprocess.PIPE, env=_env(), timeout=120)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and lines == ["tracekit: error: standard output: cannot write (No space left on "
                                              "device); free space or write with --out to another place"]


def test_csv_of_a_document_with_several_tables_is_one_table() -> None:
    """No `#` section lines: the first table, or the one --table names; ms columns as integer ns."""
    frame = pl.DataFrame({"class": ["gemm"], "measured ms": [1.234567]})
    doc = Document("tracekit x", [Table("first one", frame), Table("second", pl.DataFrame({"n": [1]}))])
    assert render(doc, "csv") == "class,measured_ns\ngemm,1234567\n"
    assert render(doc, "csv", table="second") == render(doc, "csv", table="2") == "n\n1\n"
    with pytest.raises(Exception, match="--table third: no table"):
        render(doc, "csv", table="third")
