"""Reader of JAX/XLA profiles: the ``tensorflow.profiler.XSpace`` protobuf (``*.xplane.pb``) into the store.

Decoded with ``protobuf`` and the published ``xplane.proto`` (``parsers.xplane_proto``). Times: an event
starts ``line.timestamp_ns + offset_ps / 1000`` and lasts ``duration_ps / 1000`` (picoseconds, rounded to ns).

- Device planes ``/device:GPU:<n>`` (device id n, its ``core_count``, ``memory_size``, ``compute_cap_*``,
  ``device_vendor`` stats into ``devices``): events of a ``Stream #<s>(Kernel)`` line are kernels on stream s
  (grid and block from the ``kernel_details`` stat; the short name drops the AMD symbol suffix ``.kd``), of a
  ``(Memcpy...)`` line memops (bytes from ``memcpy_details``). The ``correlation_id`` stat joins a kernel to its
  host launch.
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
_TEXT_STATS = frozenset({"kernel_details", "memcpy_details", "hlo_op", "hlo_category"})
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


class _Rows:
    """Rows of one table, as tuples of ``columns`` (built row by row, turned into columns once)."""

    def __init__(self, *columns: str) -> None:
        self.columns, self.rows = columns, []
        self.add = self.rows.append

    def __bool__(self) -> bool:
        return bool(self.rows)

    def table(self, types: dict[str, pa.DataType], extra: dict[str, list] | None = None) -> pa.Table:
        data = dict(zip(self.columns, zip(*self.rows, strict=True), strict=True))
        data.update(extra or {})
        return pa.table({c: pa.array(list(data[c]), types[c]) for c in types})


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
        self.kernels = _Rows("device_id", "stream_id", "start_ns", "end_ns", "name", "correlation_id", "grid_x",
                             "grid_y", "grid_z", "block_x", "block_y", "block_z")
        self.memops = _Rows("device_id", "stream_id", "start_ns", "end_ns", "kind", "copy_kind", "bytes",
                            "correlation_id")
        self.calls = _Rows("tid", "start_ns", "end_ns", "name", "correlation_id")
        self.ranges = _Rows("tid", "start_ns", "end_ns", "name", "domain", "source", "device_id", "stream_id", "kind")
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
        names = {k: v.name for k, v in plane.event_metadata.items()}
        snames = {k: v.name for k, v in plane.stat_metadata.items()}
        dims_of: dict[str, tuple] = {}
        k, m, r = self.kernels, self.memops, self.ranges
        for line in plane.lines:
            match = _STREAM.match(line.name)
            if match is None:
                self.skipped[f"device line {line.name.split('/')[0]}"] += len(line.events)
                continue
            stream, what = int(match.group(1)), match.group(2)
            copies = what.startswith("Memcpy") or what.startswith("Memset")
            base = line.timestamp_ns
            self.epoch |= base >= EPOCH_NS
            for event in line.events:
                if event.num_occurrences:
                    self.skipped["aggregated events"] += 1
                    continue
                start = base + (event.offset_ps + 500) // 1000  # ps to ns, rounded, in integers
                end = start + (event.duration_ps + 500) // 1000
                corr = details = hlo = category = None
                for st in event.stats:  # only the stats the store keeps; a ref value names a stat metadata
                    key = snames.get(st.metadata_id)
                    if key == "correlation_id":
                        corr = st.int64_value or st.uint64_value
                    elif key in _TEXT_STATS:
                        text = snames.get(st.ref_value) if st.ref_value else st.str_value
                        if key == "hlo_op":
                            hlo = text
                        elif key == "hlo_category":
                            category = text
                        else:
                            details = text
                name = names.get(event.metadata_id)
                if copies:
                    size = _SIZE.search(details or "")
                    m.add((device_id, stream, start, end, "memset" if what.startswith("Memset") else "memcpy",
                           _COPY_KINDS.get(what) or ("DtoD" if name and "DeviceToDevice" in name else None),
                           int(size.group(1)) if size else None, corr))
                    continue
                if details not in dims_of:
                    found = {d[0]: tuple(int(x) for x in d[1:]) for d in _DIMS.findall(details or "")}
                    dims_of[details] = found.get("grid", (None,) * 3) + found.get("block", (None,) * 3)
                k.add((device_id, stream, start, end, name, corr, *dims_of[details]))
                if hlo:
                    r.add((None, start, end, hlo, category or None, "hlo_op", device_id, stream, "gpu_range"))

    def _host(self, plane) -> None:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        modules_ids = {k for k, n in names.items() if _MODULE.search(n)}
        op_ids = {k for k, n in names.items() if "::" not in n} - modules_ids  # op names: no C++ scope
        corr_ids = {k for k, v in plane.stat_metadata.items() if v.name == "correlation_id"}
        for line in plane.lines:
            head, _, tail = line.name.partition("/")
            tid = int(tail) if head == "Host Threads" and tail.isdigit() else line.id
            base = line.timestamp_ns
            modules: list[tuple[int, int]] = []
            for event in line.events:
                mid = event.metadata_id
                name = names.get(mid)
                if event.num_occurrences or name is None:
                    self.skipped["aggregated or unnamed events"] += 1
                    continue
                start = base + (event.offset_ps + 500) // 1000  # ps to ns, rounded, in integers
                end = start + (event.duration_ps + 500) // 1000
                if head == "Host Threads":
                    corr = next((st.int64_value or st.uint64_value for st in event.stats if st.metadata_id in corr_ids),
                                None)
                    self.calls.add((tid, start, end, name, corr))
                elif head == "python":
                    self.ranges.add((tid, start, end, name.lstrip("$"), None, "python", None, None, "python"))
                elif mid in modules_ids:
                    modules.append((start, end))
                    self.ranges.add((tid, start, end, name, None, "xla_module", None, None, "range"))
                elif mid in op_ids and modules and any(s <= start and end <= e for s, e in modules[-4:]):
                    self.ranges.add((tid, start, end, name, None, "xla_op", None, None, "op"))
                else:
                    self.skipped["host runtime events"] += 1

    def _insert(self, table: str, data: pa.Table) -> None:
        cols = ", ".join(data.column_names)
        self.con.register("_xp", data)
        try:
            self.con.execute(f"INSERT INTO {table} (pid, dur_ns, {cols}) SELECT {PID}, end_ns - start_ns, {cols} "
                             "FROM _xp")
        finally:
            self.con.unregister("_xp")

    def _write(self, space) -> None:
        i32, i64, s = pa.int32(), pa.int64(), pa.string()
        times = {"start_ns": i64, "end_ns": i64}
        if self.kernels:
            names = [row[4] for row in self.kernels.rows]
            short = {n: function_name(n.removesuffix(".kd")) for n in set(names) if n}  # .kd: the AMD symbol suffix
            self._insert("kernels", self.kernels.table(
                {"device_id": i32, "stream_id": i64, **times, "name": s, "short_name": s, "correlation_id": i64,
                 **{f"{k}_{a}": i32 for k in ("grid", "block") for a in "xyz"}},
                {"short_name": [short.get(n) for n in names]}))
        if self.memops:
            self._insert("memops", self.memops.table({"device_id": i32, "stream_id": i64, **times, "kind": s,
                                                      "copy_kind": s, "bytes": i64, "correlation_id": i64}))
        if self.calls:
            n = len(self.calls.rows)
            self._insert("api_calls", self.calls.table(
                {"tid": i64, **times, "name": s, "raw_name": s, "api": s, "correlation_id": i64,
                 "is_duplicate": pa.bool_()},
                {"raw_name": [row[3] for row in self.calls.rows], "api": ["runtime"] * n, "is_duplicate": [False] * n}))
        if self.ranges:
            self._insert("ranges", self.ranges.table({"tid": i64, **times, "name": s, "domain": s, "source": s,
                                                      "device_id": i32, "stream_id": i64, "kind": s}))
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
