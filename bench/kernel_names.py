"""List every distinct kernel name in a folder of traces, read straight from the files (no tracekit code: the
standard library, and msgspec for the JSON, which the standard library parses about 5x slower).

nsys SQLite exports: ``CUPTI_ACTIVITY_KIND_KERNEL.demangledName`` resolved through ``StringIds``.
Kineto JSON (``.json`` / ``.json.gz``, any depth): ``X`` events whose ``cat`` is ``kernel`` (``Kernel`` in the
2021 legacy format). Output: one row per name, ``name<TAB>total_ns<TAB>traces`` (GPU time summed over all
files; the traces that hold it), sorted by name. The kernel-class corpus ``tests/kernel_classes.tsv`` is
refreshed from this list: new names get a label by hand, never from the rules.

Usage: ``python bench/kernel_names.py [TRACES_DIR] > names.tsv`` (default ``../shared/traces``);
``--missing tests/kernel_classes.tsv`` prints only the names that corpus does not label yet.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import msgspec

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces"


def nsys_kernels(path: Path) -> Iterator[tuple[str, int]]:
    """(name, duration ns) per kernel of an nsys SQLite export; nothing when it has no kernel table."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return
        yield from con.execute("""SELECT s.value, k."end" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
                                  JOIN StringIds s ON s.id = k.demangledName""")
    finally:
        con.close()


class _Event(msgspec.Struct):
    """The fields of a trace event this listing reads; msgspec skips every other field without building it."""

    ph: object = None
    cat: object = ""
    name: object = ""
    dur: object = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815 - Kineto's key


def kineto_kernels(path: Path) -> Iterator[tuple[str, int]]:
    """(name, duration ns, rounded) per complete kernel event of a Kineto trace."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    try:
        events = msgspec.json.decode(raw, type=_Trace).traceEvents
    except msgspec.ValidationError:  # a top-level list or another shape: no Kineto events
        return
    for ev in events:
        if ev.ph == "X" and str(ev.cat).lower() == "kernel" and ev.dur is not None:
            yield ev.name, round(float(ev.dur) * 1000)


def trace_files(root: Path) -> list[Path]:
    """Every nsys export and Kineto trace under ``root`` (reference outputs and side files excluded)."""
    files = [p for p in root.rglob("*") if p.is_file() and not any(part.startswith("reference") for part in p.parts)
             and (p.suffix == ".sqlite" or p.name.endswith((".json", ".json.gz")))]
    return sorted(files)


def distinct_names(root: Path) -> dict[str, tuple[int, list[str]]]:
    """Name -> (total ns over all traces, the traces that launch it, relative to ``root``)."""
    total: dict[str, int] = defaultdict(int)
    where: dict[str, set[str]] = defaultdict(set)
    for path in trace_files(root):
        reader = nsys_kernels if path.suffix == ".sqlite" else kineto_kernels
        for name, dur_ns in reader(path):
            total[name] += int(dur_ns)
            where[name].add(str(path.relative_to(root)))
    return {n: (total[n], sorted(where[n])) for n in sorted(total)}


def corpus_names(tsv: Path) -> set[str]:
    """The names a labelled corpus (``name<TAB>class<TAB>note`` with a header row) holds."""
    with tsv.open(encoding="utf-8", newline="") as f:
        return {row["name"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--missing", type=Path, metavar="TSV", help="print only names this corpus lacks")
    args = parser.parse_args()
    known = corpus_names(args.missing) if args.missing else set()
    for name, (ns, traces) in distinct_names(args.traces).items():
        if name not in known:
            print(f"{name}\t{ns}\t{','.join(traces)}")


if __name__ == "__main__":
    main()
