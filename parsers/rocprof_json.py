"""Reader of rocprofv3 JSON results (``rocprofv3 --output-format json``: ``{"rocprofiler-sdk-tool": [...]}``).

rocprofv3 deprecates this output for rocpd (``parsers.rocpd``), but results written with it are in use. One
element of ``rocprofiler-sdk-tool`` per process; each holds ``metadata`` (pid, node, command), ``agents``,
``kernel_symbols`` (indexed by kernel id), ``strings.buffer_records`` (per record kind its name and its
operations' names) and ``buffer_records``:

- ``kernel_dispatch`` -> kernels: the symbol's formatted name, the agent's GPU index as device, the HIP stream
  handle as stream, HSA's work-item grid turned into workgroups (as ``parsers.rocpd``);
- ``hip_api`` -> api_calls (name = the operation's name); ``memory_copy`` -> memops;
- ``correlation_id.internal`` joins a kernel to its launch, as in rocpd.

Other record kinds (HSA, markers, RCCL, allocations) are counted in ``read_notes``. Timestamps are
rocprofiler's (not Unix-epoch). The file names no rank: the store assigns one.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import duckdb
import msgspec
import pyarrow as pa

from tracekit.errors import InputError
from tracekit.parsers.kernel_names import function_name
from tracekit.parsers.rocpd import COPY_KINDS
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture

TOOL_KEY = "rocprofiler-sdk-tool"


class _Handle(msgspec.Struct):
    handle: int = 0


class _Dim(msgspec.Struct):
    x: int = 1
    y: int = 1
    z: int = 1


class _Correlation(msgspec.Struct):
    internal: int = 0


class _DispatchInfo(msgspec.Struct):
    agent_id: _Handle = msgspec.field(default_factory=_Handle)
    kernel_id: int = 0
    workgroup_size: _Dim = msgspec.field(default_factory=_Dim)
    grid_size: _Dim = msgspec.field(default_factory=_Dim)


class _Dispatch(msgspec.Struct):
    start_timestamp: int
    end_timestamp: int
    dispatch_info: _DispatchInfo
    correlation_id: _Correlation = msgspec.field(default_factory=_Correlation)
    stream_id: _Handle = msgspec.field(default_factory=_Handle)
    thread_id: int | None = None


class _Api(msgspec.Struct):
    kind: int
    operation: int
    start_timestamp: int
    end_timestamp: int
    correlation_id: _Correlation = msgspec.field(default_factory=_Correlation)
    thread_id: int | None = None


class _Copy(msgspec.Struct):
    kind: int
    operation: int
    start_timestamp: int
    end_timestamp: int
    correlation_id: _Correlation = msgspec.field(default_factory=_Correlation)
    stream_id: _Handle = msgspec.field(default_factory=_Handle)
    dst_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    src_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    bytes: int = 0


class _Symbol(msgspec.Struct):
    kernel_id: int
    formatted_kernel_name: str = ""
    kernel_name: str = ""


class _Agent(msgspec.Struct):
    id: _Handle
    type: int
    logical_node_type_id: int | None = None
    product_name: str = ""
    vendor_name: str = ""
    cu_count: int | None = None
    gfx_target_version: int | None = None
    mem_banks: list[dict] = []


class _Kind(msgspec.Struct):
    kind: str
    operations: list[str] = []


class _Strings(msgspec.Struct):
    buffer_records: list[_Kind] = []


class _Tool(msgspec.Struct):
    metadata: dict = {}
    agents: list[_Agent] = []
    kernel_symbols: list[_Symbol] = []
    strings: _Strings = msgspec.field(default_factory=_Strings)
    buffer_records: msgspec.Raw = msgspec.Raw(b"{}")


_GPU = 2  # rocprofiler_agent_type_t: 1 CPU, 2 GPU
_RECORDS = {"kernel_dispatch": list[_Dispatch], "hip_api": list[_Api], "memory_copy": list[_Copy]}


def read_rocprof_json(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one rocprofv3 JSON results file into the store tables of ``con`` (rank NULL)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = f.read()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        tools = msgspec.json.decode(data, type=dict[str, list[_Tool]])[TOOL_KEY]
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{path}: cannot read the rocprofv3 JSON ({exc}); copy the file again") from None
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError) as exc:
        raise InputError(f"{path}: not rocprofv3 JSON results ({str(exc).splitlines()[0]})") from None
    notes: list[tuple[str, int, str]] = []
    for tool in tools:
        _load(path, tool, con, notes)
    if not con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]:
        notes.append((NO_GPU_ACTIVITY, 1, "rocprofv3 results have no kernel dispatches; capture with "
                      "`rocprofv3 --kernel-trace`"))
    if notes:
        con.executemany("INSERT INTO read_notes VALUES (NULL, ?, ?, ?)", notes)
    start, end = con.execute("""SELECT min(s), max(e) FROM (SELECT min(start_ns) s, max(end_ns) e FROM kernels
        UNION ALL SELECT min(start_ns), max(end_ns) FROM memops UNION ALL SELECT min(start_ns), max(end_ns)
        FROM api_calls)""").fetchall()[0]
    command = " ".join(str(c) for c in tools[0].metadata.get("command", []) or []) if tools else None
    con.execute("INSERT INTO trace_info VALUES (NULL, ?, 'rocprofv3-json', NULL, NULL, ?, ?, ?)",
                [str(path), command or None, start, end])
    node = tools[0].metadata.get("node") if tools else None
    host = node.get("hostname") if isinstance(node, dict) else None
    write_capture(con, None, host=str(host) if host else None)


def _load(path: Path, tool: _Tool, con: duckdb.DuckDBPyConnection, notes: list[tuple[str, int, str]]) -> None:
    try:
        records = msgspec.json.decode(tool.buffer_records, type=dict[str, msgspec.Raw])
        got = {k: msgspec.json.decode(records[k], type=_RECORDS[k]) for k in _RECORDS if k in records}
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(f"{path}: unreadable rocprofv3 buffer records ({str(exc).splitlines()[0]})") from None
    for kind, raw in sorted(records.items()):
        if kind not in _RECORDS and (n := len(msgspec.json.decode(raw, type=list[msgspec.Raw]))):
            notes.append(("skipped_records", n, f"{kind} records (not read)"))
    pid = tool.metadata.get("pid")
    agents = {a.id.handle: a for a in tool.agents}
    gpu = {h: a.logical_node_type_id for h, a in agents.items() if a.type == _GPU}
    symbols = {s.kernel_id: s.formatted_kernel_name or s.kernel_name for s in tool.kernel_symbols}
    kinds = tool.strings.buffer_records

    def op_name(kind: int, operation: int) -> str | None:
        ops = kinds[kind].operations if 0 <= kind < len(kinds) else []
        return ops[operation] if 0 <= operation < len(ops) else None

    kd = got.get("kernel_dispatch", [])
    names = [symbols.get(r.dispatch_info.kernel_id) or None for r in kd]
    short = {n: function_name(n) for n in set(names) if n}
    kernels = pa.table({
        "pid": pa.array([pid] * len(kd), pa.int64()),
        "device_id": pa.array([gpu.get(r.dispatch_info.agent_id.handle) for r in kd], pa.int32()),
        "stream_id": pa.array([r.stream_id.handle for r in kd], pa.int64()),
        "start_ns": pa.array([r.start_timestamp for r in kd], pa.int64()),
        "end_ns": pa.array([r.end_timestamp for r in kd], pa.int64()),
        "name": pa.array(names, pa.string()),
        "short_name": pa.array([short.get(n) for n in names], pa.string()),
        "correlation_id": pa.array([r.correlation_id.internal for r in kd], pa.int64()),
        **{f"grid_size_{a}": pa.array([getattr(r.dispatch_info.grid_size, a) for r in kd], pa.int64()) for a in "xyz"},
        **{f"block_{a}": pa.array([getattr(r.dispatch_info.workgroup_size, a) for r in kd], pa.int32()) for a in "xyz"},
    })
    con.register("_rj_k", kernels)
    con.execute("""INSERT INTO kernels (pid, device_id, stream_id, start_ns, end_ns, dur_ns, name, short_name,
            correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z)
        SELECT pid, device_id, stream_id, start_ns, end_ns, end_ns - start_ns, name, short_name, correlation_id,
            CAST(ceil(grid_size_x / greatest(block_x, 1)) AS INTEGER),
            CAST(ceil(grid_size_y / greatest(block_y, 1)) AS INTEGER),
            CAST(ceil(grid_size_z / greatest(block_z, 1)) AS INTEGER), block_x, block_y, block_z FROM _rj_k""")
    con.unregister("_rj_k")
    hip = got.get("hip_api", [])
    if hip:
        calls = pa.table({
            "tid": pa.array([r.thread_id for r in hip], pa.int64()),
            "start_ns": pa.array([r.start_timestamp for r in hip], pa.int64()),
            "end_ns": pa.array([r.end_timestamp for r in hip], pa.int64()),
            "name": pa.array([op_name(r.kind, r.operation) for r in hip], pa.string()),
            "correlation_id": pa.array([r.correlation_id.internal for r in hip], pa.int64()),
        })
        con.register("_rj_a", calls)
        con.execute("""INSERT INTO api_calls (pid, tid, start_ns, end_ns, dur_ns, name, raw_name, api, correlation_id,
                is_duplicate)
            SELECT $pid, tid, start_ns, end_ns, end_ns - start_ns, name, name, 'runtime', correlation_id, false
            FROM _rj_a""", {"pid": pid})
        con.unregister("_rj_a")
    copies = got.get("memory_copy", [])
    if copies:
        rows = []
        for r in copies:
            op = op_name(r.kind, r.operation) or ""
            src, dst = gpu.get(r.src_agent_id.handle), gpu.get(r.dst_agent_id.handle)
            kind = "PtoP" if op == "MEMORY_COPY_DEVICE_TO_DEVICE" and src != dst else COPY_KINDS.get(op)
            rows.append((pid, dst if dst is not None else src, r.stream_id.handle, r.start_timestamp, r.end_timestamp,
                         r.end_timestamp - r.start_timestamp, "memcpy", kind, r.bytes, r.correlation_id.internal))
        con.executemany("INSERT INTO memops (pid, device_id, stream_id, start_ns, end_ns, dur_ns, kind, copy_kind,"
                        " bytes, correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    devices = []
    for a in tool.agents:
        if a.type != _GPU:
            continue
        memory = sum(b.get("size_in_bytes", 0) for b in a.mem_banks if isinstance(b, dict)) or None
        v = a.gfx_target_version
        devices.append((None, a.logical_node_type_id, a.product_name.strip() or None, a.cu_count, memory, None,
                        v // 10000 if v else None, v // 100 % 100 if v else None,
                        (a.vendor_name or "amd").strip().lower()))
    if devices:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", devices)
    if pid is not None:
        command = tool.metadata.get("command") or []
        con.execute("INSERT INTO processes VALUES (NULL, ?, ?)",
                    [pid, Path(str(command[0])).name if command else None])
