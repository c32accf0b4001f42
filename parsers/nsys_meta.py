"""The small tables of an Nsight Systems SQLite export, read with the stdlib ``sqlite3`` module.

Metadata tables of Windows exports hold Latin-1 bytes that strict UTF-8 readers (adbc, DuckDB's
sqlite scanner) reject (facts P4), so every table here is read as bytes and decoded with
``errors='replace'``. This module also decides whether a file is a readable Nsight Systems export at
all, before any large table is touched.
"""

from __future__ import annotations

import shlex
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from tracekit.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
# Export metadata: 2.x writes EXPORT_META_DATA; 3.x META_DATA_EXPORT plus META_DATA_CAPTURE.
SESSION_START_KEY = "TARGET_INFO_SESSION_START_TIME.utcEpochNs"
META_TABLES = ("EXPORT_META_DATA", "META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_SYSTEM_ENV")


@dataclass
class GpuRow:
    """One row of TARGET_INFO_GPU, joined with pre-2.x TARGET_INFO_CUDA_GPU where that exists."""

    device_id: int
    name: str | None
    sm_count: int | None
    memory_bytes: int | None
    mem_bw_bytes_per_s: float | None
    compute_major: int | None
    compute_minor: int | None
    has_cuda_properties: bool


@dataclass
class ExportInfo:
    """What the small tables of one export say."""

    uri: str
    tables: dict[str, list[str]]  # table name -> column names
    meta: list[tuple[str, str]] = field(default_factory=list)
    format_version: str = "pre-2.x"
    product_version: str | None = None
    capture_command: str | None = None
    gpus: list[GpuRow] | None = None  # None: TARGET_INFO_GPU absent
    process_names: dict[int, str] = field(default_factory=dict)  # decoded pid -> name
    recorded_rank: int | None = None  # the launched process's RANK-like variable (torchrun, MPI, Slurm), if any
    replaced_strings: int = 0  # metadata values with invalid UTF-8, decoded with replacement

    def table(self, name: str) -> str | None:
        """The export's name for a table: exact, else the highest ``NAME_V<n>`` variant, else None."""
        if name in self.tables:
            return name
        variants = [t for t in self.tables if t.startswith(name + "_V") and t[len(name) + 2 :].isdigit()]
        return max(variants, key=lambda t: int(t[len(name) + 2 :])) if variants else None


def sqlite_uri(path: Path) -> str:
    """A read-only, immutable SQLite URI: nothing is locked, journaled or created beside the file."""
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def _check_header(path: Path) -> None:
    """Reject files that are not SQLite, or shorter than the size their header declares."""
    with path.open("rb") as f:
        head = f.read(100)
    if not head.startswith(SQLITE_HEADER):
        raise InputError(f"{path}: not an SQLite file (expected an Nsight Systems SQLite export); "
                         "export it with `nsys export --type sqlite`")
    if len(head) < 100:
        raise InputError(f"{path}: truncated SQLite file (header incomplete); copy or export it again")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    # The in-header page count is valid only when the change counter equals "version-valid-for".
    if head[24:28] == head[92:96] and pages and path.stat().st_size < pages * page_size:
        size = path.stat().st_size
        raise InputError(f"{path}: truncated SQLite file ({size} bytes, header declares {pages * page_size}); "
                         "copy or export it again")


def _text(value: object) -> tuple[str | None, bool]:
    """Decode a bytes value; the flag says whether invalid UTF-8 was replaced."""
    if value is None or isinstance(value, int | float):
        return (None if value is None else str(value)), False
    raw = bytes(value)  # type: ignore[arg-type]
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def inspect_export(path: Path) -> ExportInfo:
    """Open ``path`` read-only and read its catalogue, metadata, GPUs and process names.

    Raises InputError when the file is not SQLite, is corrupt or truncated, is not an Nsight Systems
    export, or has no kernels.
    """
    _check_header(path)
    uri = sqlite_uri(path)
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot open as SQLite ({exc})") from None
    db.text_factory = bytes
    try:
        return _inspect(path, uri, db)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: corrupt SQLite file ({exc}); copy or export it again") from None
    finally:
        db.close()


def _inspect(path: Path, uri: str, db: sqlite3.Connection) -> ExportInfo:
    names = [r[0].decode() for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    # Table names come from the file: passed as a parameter, never spliced into the SQL text.
    tables = {t: [r[0].decode() for r in db.execute("SELECT name FROM pragma_table_info(?)", (t,))] for t in names}
    info = ExportInfo(uri=uri, tables=tables)
    is_nsys = "StringIds" in tables and any(
        t.startswith("CUPTI_ACTIVITY_KIND_") or t in META_TABLES for t in tables
    )
    if not is_nsys:
        raise InputError(f"{path}: SQLite file is not an Nsight Systems export (no StringIds/CUPTI tables); "
                         "export the .nsys-rep with `nsys export --type sqlite`")
    # An export without kernels (CPU, OS runtime, NVTX only) is read all the same: `info` describes it, and
    # the reader notes `no_gpu_activity`, which the analysis refuses.
    _read_meta(info, db)
    _read_gpus(info, db)
    if (processes := info.table("PROCESSES")) is not None:
        for gpid, name in db.execute(f"SELECT globalPid, name FROM {processes} WHERE globalPid IS NOT NULL"):
            text, bad = _text(name)
            info.replaced_strings += bad
            if text is not None:
                info.process_names[(gpid >> 24) & 0xFFFFFF] = text
    return info


def _read_meta(info: ExportInfo, db: sqlite3.Connection) -> None:
    """Metadata key/values, schema and product versions, and the capture command line."""
    capture: dict[str, str] = {}
    for base in META_TABLES:
        table = info.table(base)
        if table is None or not {"name", "value"} <= set(info.tables[table]):
            continue
        for raw_key, raw_value in db.execute(f"SELECT name, value FROM {table}"):
            (key, bad_k), (value, bad_v) = _text(raw_key), _text(raw_value)
            info.replaced_strings += bad_k + bad_v
            if key is None:
                continue
            info.meta.append((key, value or ""))
            if base == "META_DATA_CAPTURE":
                capture.setdefault(key, value or "")
    session = info.table("TARGET_INFO_SESSION_START_TIME")
    if session is not None and "utcEpochNs" in info.tables[session]:
        row = db.execute(f"SELECT utcEpochNs FROM {session} LIMIT 1").fetchone()
        if row is not None and isinstance(row[0], int):  # the wall clock of timeline 0 (facts §2.7)
            info.meta.append((SESSION_START_KEY, str(row[0])))
    meta = dict(info.meta)
    info.format_version = meta.get("EXPORT_SCHEMA_VERSION", "pre-2.x")
    info.product_version = meta.get("EXPORT_PRODUCT_VERSION")
    info.capture_command = _capture_command(capture)
    info.recorded_rank = _recorded_rank(info.meta)


def capture_facts(meta: list[tuple[str, str]]) -> dict[str, str | int | None]:
    """The store's ``capture`` facts the export states: host, the wall clock of timeline 0 (the session's
    start, facts §2.7), and a start trigger or delay (``--capture-range``, ``--delay``)."""
    values = dict(meta)
    base, delay_ms = values.get(SESSION_START_KEY, ""), values.get("START_DELAY_MS", "")
    return {"host": values.get("Hostname") or values.get("EXPORT_HOST"),
            "wall_clock_base_ns": int(base) if base.isdigit() else None,
            "start_trigger": values.get("START_TRIGGER"),
            "start_delay_ns": int(delay_ms) * 1_000_000 if delay_ms.isdigit() else None}


def _capture_command(capture: dict[str, str]) -> str | None:
    """The first launched process's command line, shell-quoted, from META_DATA_CAPTURE."""
    for n in range(64):
        command = capture.get(f"PROCESS_{n}:COMMAND")
        if command:
            args, i = [], 0
            while f"PROCESS_{n}:ARGUMENT_{i}" in capture:
                args.append(capture[f"PROCESS_{n}:ARGUMENT_{i}"])
                i += 1
            return shlex.join([command, *args])
    return None


RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")  # first found wins, in this order


def _recorded_rank(meta: list[tuple[str, str]]) -> int | None:
    """The rank in the launched process's environment (META_DATA_CAPTURE PROCESS_n:ENVIRONMENT_VARIABLE
    'RANK="3"'): set when nsys runs inside each rank (``torchrun ... nsys profile``, ``srun nsys profile``)."""
    env: dict[str, str] = {}
    for key, value in meta:
        if key.endswith(":ENVIRONMENT_VARIABLE") and "=" in value:
            name, _, text = value.partition("=")
            env.setdefault(name.strip(), text.strip().strip('"'))
    for name in RANK_VARIABLES:
        if env.get(name, "").isdigit():
            return int(env[name])
    return None


def _read_gpus(info: ExportInfo, db: sqlite3.Connection) -> None:
    """GPU properties: 2.x/3.x TARGET_INFO_GPU, or the pre-2.x 5-column form + TARGET_INFO_CUDA_GPU."""
    table = info.table("TARGET_INFO_GPU")
    if table is None:
        return
    cols = set(info.tables[table])
    info.gpus = []
    if "id" in cols:  # 2.x / 3.x: full properties in one table
        want = ["id", "name", "smCount", "totalMemory", "memoryBandwidth", "computeMajor", "computeMinor"]
        select = ", ".join(c if c in cols else "NULL" for c in want)
        for dev, name, sms, mem, bw, major, minor in db.execute(f"SELECT {select} FROM {table}"):
            info.gpus.append(
                GpuRow(dev, _text(name)[0], sms, mem, bw, major, minor, bool(sms) or bool(major))
            )
        cuda_dev = info.table("TARGET_INFO_CUDA_DEVICE")
        if cuda_dev is not None and "gpuId" in info.tables[cuda_dev]:
            ids = {r[0] for r in db.execute(f"SELECT gpuId FROM {cuda_dev}")}
            for gpu in info.gpus:
                gpu.has_cuda_properties |= gpu.device_id in ids
        return
    props: dict[int, tuple] = {}
    cuda_gpu = info.table("TARGET_INFO_CUDA_GPU")
    if cuda_gpu is not None:
        # CUPTI reports globalMemoryBandwidth in KB/s.
        for row in db.execute(
            f"SELECT deviceId, numMultiprocessors, globalMemorySize, globalMemoryBandwidth * 1000.0, "
            f"computeCapabilityMajor, computeCapabilityMinor FROM {cuda_gpu}"
        ):
            props.setdefault(row[0], row[1:])
    for dev, name in db.execute(f"SELECT deviceId, name FROM {table}"):
        p = props.get(dev)
        info.gpus.append(GpuRow(dev, _text(name)[0], *(p or (None,) * 5), has_cuda_properties=p is not None))
