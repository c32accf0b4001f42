"""Whole commands as a user runs them, side by side with the peer in the same run (issue 26).

Run: ``.venv/bin/python bench/bench_cli.py [--repeat 3] [--hta-python bench/.venv-hta/bin/python] [--before REV]
[--write]``.

Each case runs tracekit (A) and its peer (B) alternately, ``--repeat`` times each, every run a fresh process
tree: wall time (interpreter start included) and the peak of the summed RSS of the process and its children,
sampled every 20 ms (``measure``). The fastest run of each side is compared (the ratio B/A: above 1,
tracekit is faster), with the largest peak. tracekit runs as an installed copy does: its modules compiled to
bytecode first, and ``PYTHONDONTWRITEBYTECODE`` removed from the children's environment (a shell that sets
it would otherwise compile every tracekit module from source on every run). Peers:

- ``python -c pass`` for ``tracekit --help``;
- HTA, for two floors of any Python tool (what the goals "5x faster than HTA" are measured against): importing
  tracekit's four libraries against importing HTA, and gunzipping and decoding the 53.7 MB Kineto JSON with
  msgspec (no analysis) against HTA's analysis of it;
- HTA 0.5.0 (``TraceAnalysis`` on the folder, then the temporal, idle-time, communication/computation
  overlap and kernel breakdowns) for ``tracekit analyze --no-cache`` of real Kineto traces. HTA lives in its
  own virtualenv, made here when absent, with pandas pinned below 3 (HTA 0.5.0 fails on pandas 3.x with
  an int16 ``TypeError``): ``bench/.venv-hta``; never a tracekit dependency;
- the first (uncached) run for a cached re-analysis (``analyze`` again over the same ``--cache-dir``);
- ``--jobs 1`` for the default ``--jobs`` and for ``--jobs 2`` on ``dlrm8_v100`` (which the default picks);
- with ``--before REV``, tracekit as it was at git revision REV (its source exported to a temporary folder and
  run from there, compiled to bytecode) for the tiny ``analyze``, ``dlrm8_v100`` and a trace of many short
  steps (an XSpace of 30,000 kernels in 10,000 XLA module executions, ``fixtures.synth_xplane``): what a change
  gained.

``--write`` replaces the section "Whole commands side by side (issue 26)" of docs/benchmarks.md with the
table printed.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from bench_kineto_ranks import Measured, measure_tree  # noqa: E402 - sibling script

from fixtures.synth_xplane import build_xspace  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
SECTION = "## Whole commands side by side (issue 26)"
HTA_PINS = ["holistictraceanalysis==0.5.0", "pandas>=2.2,<3"]
NOT_RERUN = ("Not rerun here (each takes more than a few minutes on this machine): the synthetic 250 MB and "
             "1 GB Kineto files against HTA, nsys ingest at 1M and 5M kernels against the bare read, and "
             "`analyze` of 5M kernels with and without `--step`; the sections above give each its own latest run, "
             "with the command, the date or revision and the load.")
HTA_CHILD = """
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(ranks=a.t.get_ranks(), visualize=False)  # all ranks (default: rank 0)
a.get_comm_comp_overlap(visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
"""
# What no reader of a Kineto JSON in Python goes below: the file gunzipped and decoded into Python objects by
# the fastest JSON decoder at hand (no store, no analysis).
DECODE_CHILD = """
import gzip, sys, msgspec
msgspec.json.decode(gzip.open(sys.argv[1]).read())
"""


def hta_python(path: Path) -> Path:
    """The HTA interpreter, its virtualenv made (HTA 0.5.0, pandas < 3) when absent."""
    if not path.exists():
        venv = path.parent.parent
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *HTA_PINS], check=True)
    return path


CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(cmd: list[str], env: dict[str, str] | None = None) -> Measured:
    """``cmd``'s wall time and peak summed RSS (sampled every 20 ms: a short command's peak is brief)."""
    return measure_tree(cmd, interval_s=0.02, env=env or CHILD_ENV)


def source_at(rev: str, into: Path) -> dict[str, str]:
    """The environment that runs ``.venv/bin/tracekit`` as it was at git revision ``rev``: its source exported
    into ``into`` (first on the path), the packages the install maps (parsers, floor, budgets) linked under
    ``tracekit/`` as installed, and compiled to bytecode."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for package in ("parsers", "floor", "budgets"):
        (into / "tracekit" / package).symlink_to(into / package)
    compileall.compile_dir(str(into), quiet=1)
    return {**CHILD_ENV, "PYTHONPATH": str(into)}


def side_by_side(a: Callable[[], list[str]], b: Callable[[], list[str]], repeat: int,
                 before_a: Callable[[], None] = lambda: None, before_b: Callable[[], None] = lambda: None,
                 env_b: dict[str, str] | None = None) -> tuple[Measured, Measured, list[float], list[float]]:
    """A and B (in ``env_b``) alternately, ``repeat`` times each: the fastest of each (with its largest peak)
    and all walls."""
    runs: dict[str, list[Measured]] = {"a": [], "b": []}
    for _ in range(repeat):
        before_a()
        runs["a"].append(measure(a()))
        before_b()
        runs["b"].append(measure(b(), env_b))

    def best(ms: list[Measured]) -> Measured:
        return Measured(min(m.wall_s for m in ms), max(m.peak_mb for m in ms))

    return best(runs["a"]), best(runs["b"]), [m.wall_s for m in runs["a"]], [m.wall_s for m in runs["b"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-python", type=Path, default=REPO / "bench" / ".venv-hta" / "bin" / "python")
    parser.add_argument("--before", metavar="REV", help="also time tracekit at this git revision against this tree")
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    tk = str(REPO / ".venv" / "bin" / "tracekit")
    for package in ("tracekit", "parsers", "floor", "budgets"):  # as installed: bytecode, not source, each run
        compileall.compile_dir(str(REPO / package), quiet=1)
    hta = str(hta_python(args.hta_python))
    work = Path(tempfile.mkdtemp(prefix="bench_cli."))
    cache = work / "cache"
    dfidx = work / "dfidx"  # HTA reads a folder: the single trace alone in one
    dfidx.mkdir()
    (dfidx / "rank0.json.gz").symlink_to(TRACES / "torch" / "hta__df_index_resolver__df_index_resolver.json.gz")
    dlrm8 = TRACES / "torch" / "dlrm8_v100"
    fixture = REPO / "fixtures" / "dsv32_ep16_decode.sqlite"
    nsys2 = TRACES / "nsys" / "nsys-ai__h100_2gpu_1s.sqlite"

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    def analyze(path: Path, *extra: str) -> Callable[[], list[str]]:
        return lambda: [tk, "analyze", str(path), "-q", *extra]

    cases = [
        ("`tracekit --help` vs `python -c pass`", lambda: [tk, "--help"], lambda: [sys.executable, "-c", "pass"],
         {}),
        ("tiny `analyze --no-cache` (fixtures/dsv32_ep16_decode.sqlite) vs `python -c pass`",
         analyze(fixture, "--no-cache"), lambda: [sys.executable, "-c", "pass"], {}),
        ("real 8-rank `dlrm8_v100` (8 x 54 KB gz): `analyze --no-cache` vs HTA", analyze(dlrm8, "--no-cache"),
         lambda: [hta, "-c", HTA_CHILD, str(dlrm8)], {}),
        ("`dlrm8_v100`: `analyze --no-cache --jobs 2` (processes and threads) vs `--jobs 1` (the default here)",
         analyze(dlrm8, "--no-cache", "--jobs", "2"), analyze(dlrm8, "--no-cache", "--jobs", "1"), {}),
        ("real Kineto 53.7 MB JSON (`hta__df_index_resolver`, 1 rank): `analyze --no-cache` vs HTA",
         analyze(dfidx, "--no-cache"), lambda: [hta, "-c", HTA_CHILD, str(dfidx)], {}),
        ("floor of any Python tool on it: the 53.7 MB JSON gunzipped and decoded by msgspec (no analysis) vs HTA",
         lambda: [sys.executable, "-c", DECODE_CHILD, str(dfidx / "rank0.json.gz")],
         lambda: [hta, "-c", HTA_CHILD, str(dfidx)], {}),
        ("imports alone: tracekit's libraries (duckdb, polars, numpy, pyarrow) vs HTA's (`hta.trace_analysis`)",
         lambda: [sys.executable, "-c", "import duckdb, polars, numpy, pyarrow"],
         lambda: [hta, "-c", "from hta.trace_analysis import TraceAnalysis"], {}),
        ("cached re-analysis vs first run, Kineto 53.7 MB", analyze(dfidx, "--cache-dir", str(cache)),
         analyze(dfidx, "--cache-dir", str(cache)), {"before_b": clear}),
        ("cached re-analysis vs first run, nsys `nsys-ai__h100_2gpu_1s` (2 GPUs)",
         analyze(nsys2, "--cache-dir", str(cache)), analyze(nsys2, "--cache-dir", str(cache)), {"before_b": clear}),
    ]
    if args.before:
        env = source_at(args.before, work / "before")
        steps = work / "steps.xplane.pb"  # 10,000 module executions of 3 kernels each: one step each
        steps.write_bytes(build_xspace(10_000).SerializeToString())
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.before], check=True,
                             capture_output=True, text=True).stdout.strip()
        cases += [(f"tiny `analyze --no-cache` (fixtures/dsv32_ep16_decode.sqlite): tracekit now vs at {rev}",
                   analyze(fixture, "--no-cache"), analyze(fixture, "--no-cache"), {"env_b": env}),
                  (f"`dlrm8_v100` `analyze --no-cache`: tracekit now vs at {rev}", analyze(dlrm8, "--no-cache"),
                   analyze(dlrm8, "--no-cache"), {"env_b": env}),
                  (f"10,000 short steps (XPlane, 30,000 kernels) `analyze --no-cache`: tracekit now vs at {rev}",
                   analyze(steps, "--no-cache"), analyze(steps, "--no-cache"), {"env_b": env})]
    rows = ["| case | tracekit s | tracekit MB | peer s | peer MB | peer/tracekit time | tracekit/peer memory |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    try:
        clear()
        measure(analyze(dfidx, "--cache-dir", str(cache))())  # a cached case's A needs a filled cache
        for name, a, b, hooks in cases:
            if "nsys" in name:
                clear()
                measure(analyze(nsys2, "--cache-dir", str(cache))())
            ma, mb, wa, wb = side_by_side(a, b, args.repeat, **hooks)
            rows.append(f"| {name} | {ma.wall_s:.2f} | {ma.peak_mb:,.0f} | {mb.wall_s:.2f} | {mb.peak_mb:,.0f} | "
                        f"{mb.wall_s / ma.wall_s:.2f}x | {ma.peak_mb / mb.peak_mb:.2f} |")
            notes.append(f"- {name}: tracekit runs {', '.join(f'{w:.2f}' for w in wa)} s; "
                         f"peer runs {', '.join(f'{w:.2f}' for w in wb)} s")
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    before = f" --before {args.before}" if args.before else ""
    text = "\n".join([SECTION, "", f"`.venv/bin/python bench/bench_cli.py --repeat {args.repeat}{before} --write` "
                      f"(fastest of {args.repeat} alternated runs per side, largest peak; {os.cpu_count()} cores, "
                      f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end: the machine was "
                      "shared, so read the ratios, not the seconds). HTA 0.5.0 ran in `bench/.venv-hta` with "
                      "pandas < 3 (pinned: HTA 0.5.0 fails on pandas 3.x).", "", *rows, "", *notes, "",
                      NOT_RERUN, ""])
    print(text)
    if args.write:
        doc = REPO / "docs" / "benchmarks.md"
        old = doc.read_text()
        if SECTION in old:
            head, _, rest = old.partition(SECTION)
            tail = rest[rest.find("\n## "):] if "\n## " in rest else ""
            new = head + text + ("\n" + tail.lstrip("\n") if tail else "")
        else:
            new = old.rstrip("\n") + "\n\n" + text
        doc.write_text(new)


if __name__ == "__main__":
    main()
