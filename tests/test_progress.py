"""Ingest progress: a bar on a terminal (files done, rate, time left); nothing on a pipe or with --quiet."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import main
from tracekit.store.ingest import open_store
from tracekit.store.inputs import ingest_progress

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = [SAMPLES / "sample_decode_rank0.json.gz", SAMPLES / "sample_decode_rank1.json.gz"]


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_terminal_gets_a_bar_with_files_rate_and_time_left(tmp_path: Path) -> None:
    term = FakeTerminal()
    with ingest_progress(FILES, quiet=False, stream=term) as on_done:
        assert on_done is not None
        with open_store(FILES, cache_dir=tmp_path, on_file_done=on_done):
            pass
    shown = term.getvalue()
    assert "ingest 2/2 files" in shown
    assert "/s" in shown  # the rate column (input bytes per second)
    assert "left" in shown


def test_quiet_or_no_terminal_shows_nothing() -> None:
    for stream, quiet in ((FakeTerminal(), True), (io.StringIO(), False)):
        with ingest_progress(FILES, quiet=quiet, stream=stream) as on_done:
            assert on_done is None
        assert stream.getvalue() == ""


def test_cli_stderr_stays_clean_when_not_a_terminal(tmp_path: Path) -> None:
    for extra in ([], ["--quiet"]):
        result = CliRunner().invoke(main, ["ingest", *map(str, FILES), "--cache-dir", str(tmp_path),
                                           "--format", "json", *extra])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        stages = {row["stage"] for row in json.loads(result.stdout)["stages"]}
        assert stages == {"identify", "read", "finish", "open"}


def test_progress_within_one_file(tmp_path: Path) -> None:
    """Each reader reports how far it is through a file (increasing, under 1 before the file is done), and the
    bar listens while it is shown, so one big file no longer sits at 0/1 until it ends."""
    from tracekit import progress

    for path in (FILES[0], SAMPLES / "dsv32_ep16_decode.sqlite"):
        seen: list[tuple[str, float]] = []
        with progress.listening(lambda p, f, seen=seen: seen.append((p, f))), \
                open_store([path], cache_dir=tmp_path / path.stem):
            pass
        fractions = [f for p, f in seen if p == str(path)]
        assert fractions and fractions == sorted(fractions) and 0 < fractions[0] < 1, (path.name, seen)
    assert progress._listener is None  # nothing listens outside the block
    term = FakeTerminal()
    with ingest_progress([FILES[0]], quiet=False, stream=term) as on_done:
        assert progress._listener is not None  # the bar listens while it is shown
        with open_store([FILES[0]], cache_dir=tmp_path / "bar", on_file_done=on_done):
            pass
    assert progress._listener is None and "ingest 1/1 files" in term.getvalue()
