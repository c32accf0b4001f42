"""Nsight Systems reports (``.nsys-rep``): exported to SQLite with ``nsys`` when it is on PATH, then read.

The report format is Nsight's own; its SQLite export is what ``parsers.nsys`` reads. With ``nsys`` on PATH
the report is exported (``nsys export --type sqlite``) beside the store being built, inside the cache (a
temporary folder for an uncached run), never next to the input, and the export is removed once read. The
store is cached under the report's own key, so a report is exported once. Without ``nsys`` the error gives
the exact command to run.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import duckdb

from tracekit.errors import InputError

from .nsys import read_nsys

EXPORT_TIMEOUT_S = 3600


def export_command(nsys: str, report: Path, output: Path) -> list[str]:
    """The ``nsys export`` command line that writes ``report``'s SQLite export to ``output``."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]


def read_nsys_rep(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Export ``path`` with ``nsys`` and read the export into ``con``; InputError when ``nsys`` is absent or fails."""
    path = Path(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        command = shlex.join(["nsys", "export", "--type", "sqlite", "--output",
                              str(path.with_name(path.name.removesuffix(".nsys-rep") + ".sqlite")), str(path)])
        raise InputError(f"{path}: an Nsight Systems report, and `nsys` is not on PATH to export it; export it "
                         f"with `{command}` and give the .sqlite")
    with tempfile.TemporaryDirectory(prefix=".nsys-export.", dir=_store_folder(con)) as folder:
        output = Path(folder) / (path.name.removesuffix(".nsys-rep") + ".sqlite")
        try:
            done = subprocess.run(export_command(nsys, path.resolve(), output), capture_output=True, text=True,
                                  timeout=EXPORT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"{path}: `nsys export` could not run ({exc}); run the export by hand") from None
        if done.returncode != 0 or not output.is_file():
            why = (done.stderr or done.stdout).strip().splitlines()
            raise InputError(f"{path}: `nsys export --type sqlite` failed (exit {done.returncode}"
                             f"{': ' + why[-1] if why else ''}); run the export by hand to see why")
        read_nsys(output, con)
        con.execute("UPDATE trace_info SET source_path = ?", [str(path)])


def _store_folder(con: duckdb.DuckDBPyConnection) -> str | None:
    """The folder of the store file ``con`` writes (in the cache); None for an in-memory store."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()[0]
    return str(Path(row[0]).parent) if row and row[0] else None
