"""Write every `analyze`, `info` and `kernels` report (JSON and Markdown) on the shared traces and the
fixtures into one folder, so two checkouts can be compared byte for byte (`diff -r BEFORE AFTER`).

Used to prove that a refactor changes no output: run it on the old tree, then on the new one, then diff.

    python bench/report_snapshot.py OUT_DIR [--shared ../shared/traces] [--fixtures fixtures]

Commands run from OUT_DIR (not the checkout), so the installed tracekit is the one measured; give both runs
the same --fixtures folder, since reports name their input files.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS: tuple[tuple[str, ...], ...] = (("analyze",), ("info",), ("kernels",))
CONFIGURED = {"dsv32_ep16_decode.sqlite": "dsv32-ep16"}


def trace_inputs(shared: Path, fixtures: Path) -> list[Path]:
    """Every trace file and every folder of rank files, in a stable order."""
    found: list[Path] = []
    for path in sorted((shared / "nsys").glob("*.sqlite")) + sorted((shared / "torch").iterdir()):
        if path.is_dir() and path.name.startswith("reference"):
            continue
        if path.is_dir() or path.suffix in (".sqlite", ".gz", ".json"):
            found.append(path)
    found += sorted(fixtures.glob("*.sqlite")) + [fixtures / "h200"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--fixtures", type=Path, default=REPO / "fixtures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    for trace in trace_inputs(args.shared.resolve(), args.fixtures.resolve()):
        for command in COMMANDS:
            extra = ["--config", CONFIGURED[trace.name]] if command == ("analyze",) and trace.name in CONFIGURED else []
            for fmt in ("json", "markdown"):
                name = f"{trace.name}.{command[0]}.{fmt}"
                run = subprocess.run([sys.executable, "-m", "tracekit", *command, str(trace), "--no-cache", "-q",
                                      "--format", fmt, *extra], capture_output=True, text=True, cwd=out)
                (out / name).write_text(f"exit {run.returncode}\n{run.stdout}{run.stderr}")
    print(f"wrote {len(list(out.iterdir()))} reports to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
