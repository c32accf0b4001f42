"""Ingest of rocpd and XPlane against a bare read of the same data, both in one run (issue 22's target: 1.5x).

Run: ``.venv/bin/python bench/bench_readers.py [--kernels 100000] [--repeat 3] [--workdir DIR]``.

- rocpd: a database of N kernel dispatches, each with its ``hipLaunchKernel`` region, written by
  ``fixtures.synth_rocpd`` (cached in the workdir). Bare read: the tables the reader reads
  (``rocpd_kernel_dispatch``, ``rocpd_region``, ``rocpd_event``, ``rocpd_info_kernel_symbol``), the columns it
  takes from each and no join, fetched into Arrow with adbc-driver-sqlite, as ``bench_ingest.py`` measures nsys.
  Ingest: ``read_rocpd`` into an in-memory DuckDB store.
- XPlane: an XSpace of N kernels with their launches, modules and ops (``fixtures.synth_xplane``). Bare read:
  ``XSpace.ParseFromString`` of the file's bytes (protobuf's C parser building every event and stat as a C
  message, no Python object per event: the fastest plain parse). Ingest: ``read_xplane`` into an in-memory
  DuckDB store (parse included). ``xplane decode`` is the ingest without the store: the file read and
  decoded into the Arrow tables it would insert (``parsers.xplane._Loader.decode``), so the store insert is
  the difference. Two more rows put the C parse in context: ``xplane store insert alone`` writes the already
  decoded tables into a new store (``_Loader.write``: what any reader of these rows must pay after its
  decode), and ``protobuf API read`` is the plain way to read the same data in Python: the C parse, then
  every event's ``metadata_id``, ``offset_ps``, ``duration_ps`` and every stat's ``metadata_id`` and value
  through protobuf's generated classes (no store).

``--before REV`` adds the readers of git revision REV (``parsers/rocpd.py`` and ``parsers/xplane.py`` as they
were there, loaded beside today's) to the same run, as ``rocpd @REV`` and ``xplane @REV``: before and after on
one machine state.

Each figure is the fastest of ``--repeat`` runs in this process (imports warm), wall clock.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import adbc_driver_sqlite.dbapi as adbc_sqlite  # noqa: E402
import duckdb  # noqa: E402
from bench_cache_key import best  # noqa: E402  (the fastest of N runs; bench/ is on the path of its scripts)

from fixtures.spec import Device, Kernel, Process, Thread, TraceSpec  # noqa: E402
from fixtures.synth_rocpd import write_rocpd  # noqa: E402
from fixtures.synth_xplane import OPS, build_xspace  # noqa: E402
from tracekit.parsers.rocpd import read_rocpd  # noqa: E402
from tracekit.parsers.schema import create_tables  # noqa: E402
from tracekit.parsers.xplane import _Loader, read_xplane  # noqa: E402
from tracekit.parsers.xplane_proto import XSpace, XSpaceRaw  # noqa: E402

NAMES = ("Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN",
         "void at::native::vectorized_layer_norm_kernel<float>(int)",
         "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")


def rocpd_file(n: int, workdir: Path) -> Path:
    path = workdir / f"bench_{n}_results.db"
    if not path.exists():
        kernels = [Kernel(NAMES[i % 3], 0, 1 + i % 2, 1_000_000 + i * 2_000, 1_500, 7, 7, 1_000_000 + i * 2_000 - 500,
                          300) for i in range(n)]
        spec = TraceSpec(devices=[Device(0, "AMD Instinct MI300X", 304, 206141652992, (9, 4))],
                         processes=[Process(7, "python3")], threads=[Thread(7, 7, "python3")], kernels=kernels)
        write_rocpd(spec, path)
    return path


# The columns read_rocpd takes from each table, without its joins.
BARE_COLUMNS = {
    "rocpd_kernel_dispatch": 'pid, agent_id, kernel_id, stream_id, start, "end", grid_size_x, grid_size_y, '
                             "grid_size_z, workgroup_size_x, workgroup_size_y, workgroup_size_z, event_id",
    "rocpd_region": 'pid, tid, start, "end", name_id, event_id',
    "rocpd_event": "id, category_id, stack_id, extdata",
    "rocpd_info_kernel_symbol": "id, display_name",
}


def bare_rocpd(path: Path) -> None:
    db = adbc_sqlite.connect(f"file:{path}?mode=ro&immutable=1")
    try:
        for table, columns in BARE_COLUMNS.items():
            cur = db.cursor()
            cur.execute(f"SELECT {columns} FROM {table}")
            cur.fetch_arrow_table()
            cur.close()
    finally:
        db.close()


def ingest(reader, path: Path) -> None:
    con = duckdb.connect()
    create_tables(con)
    reader(path, con)
    con.close()


def decode_xplane(path: Path) -> None:
    space = XSpaceRaw()
    space.ParseFromString(path.read_bytes())
    _Loader(path, None).decode(space)


def store_insert(path: Path):
    """A function that writes ``path``'s decoded tables into a new in-memory store (decoded once, here)."""
    space = XSpaceRaw()
    space.ParseFromString(path.read_bytes())
    loader = _Loader(path, None)
    loader.decode(space)

    def run() -> None:
        loader.con = duckdb.connect()
        create_tables(loader.con)
        loader.write(space)
        loader.con.close()

    return run


def api_read(data: bytes) -> int:
    """The events' fields and their stats' ids and values read through protobuf's generated classes."""
    space = XSpace()
    space.ParseFromString(data)
    rows = []
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                stats = [(s.metadata_id, getattr(s, s.WhichOneof("value") or "ref_value")) for s in event.stats]
                rows.append((line.id, event.metadata_id, event.offset_ps, event.duration_ps, stats))
    return len(rows)


def reader_at(rev: str, name: str):
    """``read_<name>`` as ``parsers/<name>.py`` defined it at git revision ``rev``."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:parsers/{name}.py"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"tracekit.parsers.{name}_at_{rev}")
    module.__package__ = "tracekit.parsers"  # its relative imports: today's modules beside it
    sys.modules[module.__name__] = module  # where dataclasses look their module up
    exec(compile(source, f"{rev}:parsers/{name}.py", "exec"), module.__dict__)  # noqa: S102 - our own history
    return getattr(module, f"read_{name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tracekit-bench-readers")
    ap.add_argument("--only", choices=("rocpd", "xplane"), help="measure one format")
    ap.add_argument("--before", metavar="REV", help="also measure the readers of this git revision")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.only != "xplane":
        db = rocpd_file(args.kernels, args.workdir)
        bare, full = best(lambda: bare_rocpd(db), args.repeat), best(lambda: ingest(read_rocpd, db), args.repeat)
        rows.append(("rocpd", args.kernels, db.stat().st_size, bare, full))
        if args.before:
            before = reader_at(args.before, "rocpd")
            rows.append((f"rocpd @{args.before}", args.kernels, db.stat().st_size, bare,
                         best(lambda: ingest(before, db), args.repeat)))
    if args.only != "rocpd":
        rows += xplane_rows(args)
    print("| format | kernels | file MB | bare read s | ingest s | ingest / bare |")
    print("|---|---:|---:|---:|---:|---:|")
    for fmt, n, size, bare, full in rows:
        print(f"| {fmt} | {n:,} | {size / 1e6:.1f} | {bare:.3f} | {full:.3f} | {full / bare:.1f}x |")


def xplane_rows(args: argparse.Namespace) -> list[tuple]:
    space = build_xspace(args.kernels // len(OPS))
    xp = args.workdir / f"bench_{args.kernels}.xplane.pb"
    xp.write_bytes(space.SerializeToString())
    data = xp.read_bytes()
    bare = best(lambda: XSpace().ParseFromString(data), args.repeat)
    full = best(lambda: ingest(read_xplane, xp), args.repeat)
    decoded = best(lambda: decode_xplane(xp), args.repeat)
    n = args.kernels // len(OPS) * len(OPS)
    insert = best(store_insert(xp), args.repeat)
    api = best(lambda: api_read(data), args.repeat)
    rows = [("xplane", n, len(data), bare, full), ("xplane decode (no store insert)", n, len(data), bare, decoded),
            ("xplane store insert alone", n, len(data), bare, insert), ("protobuf API read", n, len(data), bare, api)]
    if args.before:
        before = reader_at(args.before, "xplane")
        rows.append((f"xplane @{args.before}", n, len(data), bare, best(lambda: ingest(before, xp), args.repeat)))
    return rows


if __name__ == "__main__":
    main()
