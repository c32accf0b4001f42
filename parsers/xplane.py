"""Reader of JAX/XLA profiles: the ``tensorflow.profiler.XSpace`` protobuf (``*.xplane.pb``) into the store.

Decoded with ``protobuf`` and the published ``xplane.proto`` (``parsers.xplane_proto``). Times: an event
starts ``line.timestamp_ns + offset_ps / 1000`` and lasts ``duration_ps / 1000`` (picoseconds, rounded to ns).

- Device planes ``/device:GPU:<n>`` (device id n, its ``core_count``, ``memory_size``, ``compute_cap_*``,
  ``device_vendor`` stats into ``devices``): events of a ``Stream #<s>(Kernel)`` line are kernels on stream s
  (grid and block from the ``kernel_details`` stat), of a ``(Memcpy...)`` line memops (bytes from
  ``memcpy_details``). The ``correlation_id`` stat joins a kernel to its host launch.
- The HLO op a kernel runs (stats ``hlo_op``, ``hlo_module``, ``hlo_category`` where recorded) is a ``ranges``
  row of kind 'gpu_range' over the kernel (source 'hlo_op', name the op, domain its category, device and
  stream set): the classification signal, beside the kernel it names.
- The host plane ``/host:CPU``: ``Host Threads/<tid>`` lines hold the HIP/CUDA API calls (``api_calls``);
  on the XLA execute threads an event named ``<module>:XLA GPU module`` (or ``... module``) is one module
  execution (``ranges`` kind 'range', source 'xla_module': what ``--step`` selects), events inside it without
  ``::`` in their name are the XLA ops it ran (kind 'op', source 'xla_op'); the ``python`` line's events are
  Python functions (kind 'python'). Other host events (runtime internals) are counted in ``read_notes``.
- An XSpace names no process: every row gets pid 0; the host is ``hostnames[0]``. Line timestamps are on the
  profiler's clock (Unix-epoch only where they are past 2001, which then gives a wall-clock base of 0).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
from google.protobuf.message import DecodeError

from tracekit.errors import InputError
from tracekit.parsers.kernel_names import function_name
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture
from tracekit.parsers.xplane_proto import XSpace

PID = 0
EPOCH_NS = 10**18
_DEVICE = re.compile(r"^/device:GPU:(\d+)$")
_STREAM = re.compile(r"^Stream #(\d+)\((\w+)\)")
_DIMS = re.compile(r"\b(grid|block):(\d+),(\d+),(\d+)")
_SIZE = re.compile(r"\bsize:(\d+)")
_MODULE = re.compile(r":XLA (GPU )?[Mm]odule$")
_COPY_KINDS = {"MemcpyH2D": "HtoD", "MemcpyD2H": "DtoH", "MemcpyD2D": "DtoD", "MemcpyP2P": "PtoP"}


def read_xplane(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one XSpace file into the store tables of ``con`` (rank NULL: the store assigns one)."""
    path = Path(path)
    with path.open("rb") as f:
        data = f.read()
    space = XSpace()
    try:
        space.ParseFromString(data)
    except DecodeError as exc:
        why = str(exc).rsplit(": ", 1)[-1]
        raise InputError(f"{path}: truncated or damaged XPlane protobuf ({why}); copy the file again") from None
    if not any(p.name == "/host:CPU" or _DEVICE.match(p.name) for p in space.planes):
        raise InputError(f"{path}: protobuf is not an XSpace profile (no /device:GPU or /host:CPU plane); give the "
                         ".xplane.pb that jax.profiler.trace wrote")
    _Loader(path, con).run(space)


class _Rows(dict):
    """Column name -> values, appended row by row."""

    def add(self, **row: object) -> None:
        for key, value in row.items():
            self.setdefault(key, []).append(value)


def _value(plane, stat) -> object:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        meta = plane.stat_metadata.get(stat.ref_value)
        return meta.name if meta is not None else None
    return getattr(stat, kind) if kind else None


def _stats(plane, stats) -> dict[str, object]:
    names = plane.stat_metadata
    return {names[s.metadata_id].name: _value(plane, s) for s in stats if s.metadata_id in names}


class _Loader:
    def __init__(self, path: Path, con: duckdb.DuckDBPyConnection) -> None:
        self.path, self.con = path, con
        self.kernels, self.memops, self.calls, self.ranges = _Rows(), _Rows(), _Rows(), _Rows()
        self.devices: list[tuple] = []
        self.skipped: Counter[str] = Counter()
        self.epoch = False

    def run(self, space) -> None:
        for plane in space.planes:
            if m := _DEVICE.match(plane.name):
                self._device(plane, int(m.group(1)))
            elif plane.name == "/host:CPU":
                self._host(plane)
        self._write(space)

    @staticmethod
    def _times(line, event) -> tuple[int, int]:
        start = line.timestamp_ns + round(event.offset_ps / 1000)
        return start, start + round(event.duration_ps / 1000)

    def _device(self, plane, device_id: int) -> None:
        st = _stats(plane, plane.stats)

        def num(key: str) -> int | None:
            try:
                return int(st[key]) if key in st else None
            except (TypeError, ValueError):
                return None

        self.devices.append((None, device_id, None, num("core_count"), num("memory_size"),
                             float(st["memory_bandwidth"]) if num("memory_bandwidth") else None,
                             num("compute_cap_major"), num("compute_cap_minor"),
                             str(st.get("device_vendor") or "").strip().lower() or None))
        for line in plane.lines:
            m = _STREAM.match(line.name)
            if m is None:
                self.skipped[f"device line {line.name.split('/')[0]}"] += len(line.events)
                continue
            stream, what = int(m.group(1)), m.group(2)
            for event in line.events:
                if event.WhichOneof("data") != "offset_ps":
                    self.skipped["aggregated events"] += 1
                    continue
                start, end = self._times(line, event)
                self.epoch |= start >= EPOCH_NS
                name = plane.event_metadata[event.metadata_id].name if event.metadata_id in plane.event_metadata \
                    else None
                stats = _stats(plane, event.stats)
                corr = _int(stats.get("correlation_id"))
                if what.startswith("Memcpy") or what.startswith("Memset"):
                    size = _SIZE.search(str(stats.get("memcpy_details") or ""))
                    kind = _COPY_KINDS.get(what) or ("DtoD" if name and "DeviceToDevice" in name else None)
                    self.memops.add(device_id=device_id, stream_id=stream, start_ns=start, end_ns=end,
                                    kind="memset" if what.startswith("Memset") else "memcpy", copy_kind=kind,
                                    bytes=int(size.group(1)) if size else None, correlation_id=corr)
                    continue
                dims = {d[0]: d[1:] for d in _DIMS.findall(str(stats.get("kernel_details") or ""))}
                grid, block = dims.get("grid", (None,) * 3), dims.get("block", (None,) * 3)
                self.kernels.add(device_id=device_id, stream_id=stream, start_ns=start, end_ns=end, name=name,
                                 correlation_id=corr,
                                 **{f"grid_{a}": _int(v) for a, v in zip("xyz", grid, strict=True)},
                                 **{f"block_{a}": _int(v) for a, v in zip("xyz", block, strict=True)})
                if stats.get("hlo_op"):
                    self.ranges.add(tid=None, start_ns=start, end_ns=end, name=str(stats["hlo_op"]),
                                    domain=str(stats["hlo_category"]) if stats.get("hlo_category") else None,
                                    source="hlo_op", device_id=device_id, stream_id=stream, kind="gpu_range")

    def _host(self, plane) -> None:
        meta = plane.event_metadata
        for line in plane.lines:
            head = line.name.split("/")[0]
            tid = line.id
            if head == "Host Threads":
                tail = line.name.rsplit("/", 1)[-1]
                tid = int(tail) if tail.isdigit() else line.id
            modules: list[tuple[int, int]] = []
            for event in line.events:
                if event.WhichOneof("data") != "offset_ps" or event.metadata_id not in meta:
                    self.skipped["aggregated events"] += 1
                    continue
                name = meta[event.metadata_id].name
                start, end = self._times(line, event)
                if head == "Host Threads":
                    corr = _int(_stats(plane, event.stats).get("correlation_id"))
                    self.calls.add(tid=tid, start_ns=start, end_ns=end, name=name, correlation_id=corr)
                elif head == "python":
                    self.ranges.add(tid=tid, start_ns=start, end_ns=end, name=name.lstrip("$"), domain=None,
                                    source="python", device_id=None, stream_id=None, kind="python")
                elif _MODULE.search(name):
                    modules.append((start, end))
                    self.ranges.add(tid=tid, start_ns=start, end_ns=end, name=name, domain=None, source="xla_module",
                                    device_id=None, stream_id=None, kind="range")
                elif "::" not in name and any(s <= start and end <= e for s, e in modules[-4:]):
                    self.ranges.add(tid=tid, start_ns=start, end_ns=end, name=name, domain=None, source="xla_op",
                                    device_id=None, stream_id=None, kind="op")
                else:
                    self.skipped["host runtime events"] += 1

    def _insert(self, table: str, rows: _Rows, columns: dict[str, pa.DataType]) -> None:
        if not rows:
            return
        data = pa.table({c: pa.array(rows[c], t) for c, t in columns.items()})
        cols = ", ".join(columns)
        self.con.register("_xp", data)
        try:
            self.con.execute(f"INSERT INTO {table} (pid, dur_ns, {cols}) SELECT {PID}, end_ns - start_ns, {cols} "
                             "FROM _xp")
        finally:
            self.con.unregister("_xp")

    def _write(self, space) -> None:
        i32, i64, s = pa.int32(), pa.int64(), pa.string()
        if self.kernels:
            short = {n: function_name(n) for n in set(self.kernels["name"]) if n}
            self.kernels["short_name"] = [short.get(n) for n in self.kernels["name"]]
        self._insert("kernels", self.kernels, {
            "device_id": i32, "stream_id": i64, "start_ns": i64, "end_ns": i64, "name": s, "short_name": s,
            "correlation_id": i64, **{f"{k}_{a}": i32 for k in ("grid", "block") for a in "xyz"}})
        self._insert("memops", self.memops, {"device_id": i32, "stream_id": i64, "start_ns": i64, "end_ns": i64,
                                             "kind": s, "copy_kind": s, "bytes": i64, "correlation_id": i64})
        if self.calls:
            self.calls["api"] = ["runtime"] * len(self.calls["name"])
            self.calls["raw_name"] = self.calls["name"]
            self.calls["is_duplicate"] = [False] * len(self.calls["name"])
        self._insert("api_calls", self.calls, {"tid": i64, "start_ns": i64, "end_ns": i64, "name": s, "raw_name": s,
                                               "api": s, "correlation_id": i64, "is_duplicate": pa.bool_()})
        self._insert("ranges", self.ranges, {"tid": i64, "start_ns": i64, "end_ns": i64, "name": s, "domain": s,
                                             "source": s, "device_id": i32, "stream_id": i64, "kind": s})
        if self.devices:
            self.con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self.devices)
        self.con.execute("INSERT INTO processes VALUES (NULL, ?, 'jax')", [PID])
        notes = [("skipped_events", n, what) for what, n in sorted(self.skipped.items())]
        if not self.kernels:
            notes.append((NO_GPU_ACTIVITY, 1, "XPlane has no GPU kernels; profile with jax.profiler.trace on a GPU"))
        if notes:
            self.con.executemany("INSERT INTO read_notes VALUES (NULL, ?, ?, ?)", notes)
        start, end = self.con.execute("""SELECT min(s), max(e) FROM (SELECT min(start_ns) s, max(end_ns) e FROM kernels
            UNION ALL SELECT min(start_ns), max(end_ns) FROM memops UNION ALL SELECT min(start_ns), max(end_ns)
            FROM api_calls)""").fetchall()[0]
        self.con.execute("INSERT INTO trace_info VALUES (NULL, ?, 'xplane', NULL, NULL, NULL, ?, ?)",
                         [str(self.path), start, end])
        host = space.hostnames[0] if space.hostnames else None
        write_capture(self.con, None, host=host, wall_clock_base_ns=0 if self.epoch else None)


def _int(value: object) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
