"""Reader of JAX/XLA profiles: the ``tensorflow.profiler.XSpace`` protobuf (``*.xplane.pb``) into the store.

Decoded with ``protobuf`` and the published ``xplane.proto`` (``parsers.xplane_proto``): the frame (planes,
lines, metadata, plane stats) by protobuf's C parser, the events and their stats in bulk from the lines' bytes
(``parsers.xplane_events``), so no Python runs per event. Times: an event starts ``line.timestamp_ns +
offset_ps / 1000`` and lasts ``duration_ps / 1000`` (picoseconds, rounded half up to ns).

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
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from tracekit.errors import InputError
from tracekit.parsers.kernel_names import function_name
from tracekit.parsers.schema import NO_GPU_ACTIVITY, write_capture
from tracekit.parsers.xplane_events import Events, Stats, Strings, decode, inside_recent_module, pick, plane_codes
from tracekit.parsers.xplane_hlo import kernel_categories
from tracekit.parsers.xplane_proto import XSpaceRaw
from tracekit.parsers.xplane_wire import WireError, text

PID = 0
EPOCH_NS = 10**18
_DEVICE = re.compile(r"^/device:GPU:(\d+)$")
_STREAM = re.compile(r"^Stream #(\d+)\((\w+)\)")
_DIMS = re.compile(r"\b(grid|block):(\d+),(\d+),(\d+)")
_SIZE = re.compile(r"\bsize:(\d+)")
_MODULE = re.compile(r":XLA (GPU )?[Mm]odule$")
_COPY_KINDS = {"MemcpyH2D": "HtoD", "MemcpyD2H": "DtoH", "MemcpyD2D": "DtoD", "MemcpyP2P": "PtoP"}
# Line kinds. Device: a kernel stream, a copy stream, another line (counted, not read). Host: API calls,
# Python functions, the rest (XLA modules and ops, runtime internals).
KERNEL, COPY, SKIP, CALLS, PYTHON, OTHER = range(6)
# Event stats the store keeps: two integers, then texts.
CORR, PROGRAM_ID, DETAILS, HLO_OP, HLO_CATEGORY, HLO_MODULE = range(6)
_STAT_KEYS = {"correlation_id": CORR, "program_id": PROGRAM_ID, "kernel_details": DETAILS,
              "memcpy_details": DETAILS, "hlo_op": HLO_OP, "hlo_category": HLO_CATEGORY, "hlo_module": HLO_MODULE}
_I32, _I64, _S = pa.int32(), pa.int64(), pa.string()


def read_xplane(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Read one XSpace file into the store tables of ``con`` (rank NULL: the store assigns one)."""
    path = Path(path)
    space = XSpaceRaw()
    try:
        space.ParseFromString(path.read_bytes())
    except DecodeError as exc:
        _damaged(path, str(exc).rsplit(": ", 1)[-1])
    if not any(p.name == "/host:CPU" or _DEVICE.match(p.name) for p in space.planes):
        raise InputError(f"{path}: protobuf is not an XSpace profile (no /device:GPU or /host:CPU plane); give the "
                         ".xplane.pb that jax.profiler.trace wrote")
    loader = _Loader(path, con)
    try:
        loader.decode(space)  # everything is decoded before the first row is written
    except WireError as exc:
        _damaged(path, str(exc))
    loader.write(space)


def _damaged(path: Path, why: str) -> None:
    raise InputError(f"{path}: truncated or damaged XPlane protobuf ({why}); copy the file again") from None


def _value(plane, stat) -> object:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        meta = plane.stat_metadata.get(stat.ref_value)
        return meta.name if meta is not None else None
    return getattr(stat, kind) if kind else None


def _stats(plane, stats) -> dict[str, object]:
    names = plane.stat_metadata
    return {names[s.metadata_id].name: _value(plane, s) for s in stats if s.metadata_id in names}


@dataclass
class _Lines:
    """Per line read: its plane, kind, stream (device), copy kind and copy flavour, clock base, thread id."""

    plane: list[int]
    kind: list[int]
    stream: list[int | None]
    what: list[str]
    base: list[int]
    tid: list[int]


class _Loader:
    def __init__(self, path: Path, con: duckdb.DuckDBPyConnection) -> None:
        self.path, self.con = path, con
        self.devices: list[tuple] = []
        self.skipped: Counter[str] = Counter()
        self.epoch = False
        self.strings = Strings()
        self.tables: dict[str, pa.Table] = {}

    def decode(self, space) -> None:
        lines = _Lines([], [], [], [], [], [])
        regions: list[bytes] = []
        skip_names: list[str] = []
        plane_device: list[int | None] = []
        for pi, plane in enumerate(space.planes):
            m = _DEVICE.match(plane.name)
            plane_device.append(int(m.group(1)) if m else None)
            if m:
                self._device(plane, int(m.group(1)))
            elif plane.name != "/host:CPU":
                continue
            for line in plane.lines:
                raw = line.SerializeToString()  # known fields first, then the events left undecoded
                line.DiscardUnknownFields()
                known = line.SerializeToString()
                if not raw.startswith(known):
                    raise WireError("a line's fields are out of the expected order")
                regions.append(raw[len(known):])
                self._line(lines, skip_names, pi, m is not None, line)
        kinds = np.array(lines.kind, np.int8)
        buf, counts, ev, st = decode(regions, kinds != SKIP)
        for name, count in zip(skip_names, counts[kinds == SKIP], strict=True):
            self.skipped[f"device line {name}"] += int(count)
        self._rows(space, lines, plane_device, buf, ev, st)

    def _line(self, lines: _Lines, skip_names: list[str], pi: int, device: bool, line) -> None:
        lines.plane.append(pi)
        lines.base.append(line.timestamp_ns)
        if device:
            match = _STREAM.match(line.name)
            what = match.group(2) if match else ""
            kind = SKIP if match is None else COPY if what.startswith(("Memcpy", "Memset")) else KERNEL
            if match is None:
                skip_names.append(line.name.split("/")[0])
            else:
                self.epoch |= line.timestamp_ns >= EPOCH_NS
            lines.stream.append(int(match.group(1)) if match else None)
            lines.tid.append(0)
        else:
            head, _, tail = line.name.partition("/")
            kind, what = {"Host Threads": CALLS, "python": PYTHON}.get(head, OTHER), ""
            lines.stream.append(None)
            lines.tid.append(int(tail) if head == "Host Threads" and tail.isdigit() else line.id)
        lines.kind.append(kind)
        lines.what.append(what)

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

    def _rows(self, space, lines: _Lines, plane_device: list[int | None], buf: np.ndarray, ev: Events,
              st: Stats) -> None:
        strings, n = self.strings, ev.line.size
        plane = np.array(lines.plane, np.int64)[ev.line]
        kind = np.array(lines.kind, np.int8)[ev.line]
        stream = np.array([-1 if s is None else s for s in lines.stream], np.int64)[ev.line]
        start = np.array(lines.base, np.int64)[ev.line] + (ev.offset_ps + 500) // 1000  # ps to ns, rounded
        end = start + (ev.duration_ps + 500) // 1000
        name, key, texts = self._names(space, buf, ev, st, plane)

        def stat(which: int, last: bool = True) -> tuple[np.ndarray, np.ndarray]:
            """(text code, correlation id) of each event's last (first) stat of kind ``which``; -1 / masked."""
            idx = pick(st, key, which, n, last)
            has = idx >= 0
            at = np.where(has, idx, 0)
            integer = np.isin(st.kind[at], (3, 4)) if st.kind.size else np.zeros(n, bool)
            corr = np.where(has & integer, st.value.view(np.int64)[at] if st.kind.size else 0, 0)
            return np.where(has, texts[at] if texts.size else -1, -1), np.ma.masked_array(corr, ~has)

        aggregated = ev.num_occurrences != 0
        device = (kind == KERNEL) | (kind == COPY)
        self._skip("aggregated events", device & aggregated)
        details, _ = stat(DETAILS)
        hlo, _ = stat(HLO_OP)
        category, _ = stat(HLO_CATEGORY)
        _, corr = stat(CORR)
        module, program = stat(HLO_MODULE)[0], stat(PROGRAM_ID)[1]
        device_id = np.array([-1 if d is None else d for d in plane_device], np.int64)[plane]
        kernels = np.flatnonzero((kind == KERNEL) & ~aggregated)
        copies = np.flatnonzero((kind == COPY) & ~aggregated)
        self._kernels(kernels, device_id, stream, start, end, name, corr, details)
        if kernels.size:
            self._categories(space, kernels, program, module, hlo, category)
        self._memops(copies, lines, ev, device_id, stream, start, end, name, corr, details)

        host = kind >= CALLS
        valid = (name >= 0) & ~aggregated
        self._skip("aggregated or unnamed events", host & ~valid)
        calls = np.flatnonzero((kind == CALLS) & valid)
        _, first_corr = stat(CORR, last=False)
        tid = np.array(lines.tid, np.int64)[ev.line]
        if calls.size:
            names = strings.column(name[calls])
            self.tables["api_calls"] = pa.table({
                "tid": tid[calls], "start_ns": start[calls], "end_ns": end[calls], "name": names, "raw_name": names,
                "api": pa.array(["runtime"] * calls.size, _S), "correlation_id": _masked(first_corr, calls),
                "is_duplicate": pa.array(np.zeros(calls.size, bool))})
        other = (kind == OTHER) & valid
        module = other & strings.test(name, _MODULE.search)
        op = other & ~module & strings.test(name, lambda s: "::" not in s)  # op names: no C++ scope
        op[op] = inside_recent_module(np.flatnonzero(op), module, ev.line, start, end)
        self._skip("host runtime events", other & ~module & ~op)
        gpu = np.zeros(n, bool)
        gpu[kernels] = strings.test(hlo[kernels], bool)
        python = (kind == PYTHON) & valid
        self._ranges(gpu, python, module, op, tid, start, end, name, hlo, category, device_id, stream)

    def _names(self, space, buf: np.ndarray, ev: Events, st: Stats, plane: np.ndarray):
        """(name code of each event, key of each stat, text code of each text stat), plane by plane."""
        strings = self.strings
        name = np.full(ev.line.size, -1, np.int64)
        key = np.full(st.event.size, -1, np.int8)
        texts = np.full(st.event.size, -1, np.int64)
        stat_plane = plane[st.event]
        for pi in np.unique(plane).tolist():
            p = space.planes[pi]
            a, b = np.searchsorted(plane, [pi, pi + 1])  # a plane's events lie together
            name[a:b] = plane_codes(strings, ev.metadata_id[a:b], {k: v.name for k, v in p.event_metadata.items()})
            snames = {k: v.name for k, v in p.stat_metadata.items()}
            here = np.flatnonzero(stat_plane == pi)  # its stats do not (they come round by round)
            mids, keys = st.metadata_id[here], key[here]
            for sid, sname in snames.items():
                if sname in _STAT_KEYS:
                    keys[mids == sid] = _STAT_KEYS[sname]
            key[here] = keys
            rows = here[keys >= DETAILS]  # a text: the name a ref value points at, or the string
            kinds, values = st.kind[rows], st.value[rows]
            ref = (kinds == 7) & (values != 0)
            texts[rows[ref]] = plane_codes(strings, values[ref].view(np.int64), snames)
            inline = rows[kinds == 5]
            texts[inline] = [strings.code(text(buf, int(st.start[i]), int(st.length[i]))) for i in inline]
            texts[rows[~ref & (kinds != 5)]] = strings.code("")
        return name, key, texts

    def _skip(self, what: str, mask: np.ndarray) -> None:
        if count := int(mask.sum()):
            self.skipped[what] += count

    def _kernels(self, rows, device_id, stream, start, end, name, corr, details) -> None:
        if not rows.size:
            return
        strings = self.strings
        uniq, inverse = np.unique(details[rows], return_inverse=True)
        dims = np.array([_dims(strings.values[c] if c >= 0 else "") for c in uniq], np.int64).reshape(-1, 6)[inverse]
        short = strings.map(name[rows], lambda s: function_name(s.removesuffix(".kd")) if s else None)  # AMD .kd
        self.tables["kernels"] = pa.table({
            "device_id": pa.array(device_id[rows], _I32), "stream_id": stream[rows], "start_ns": start[rows],
            "end_ns": end[rows], "name": strings.column(name[rows]), "short_name": strings.column(short),
            "correlation_id": _masked(corr, rows),
            **{f"{k}_{a}": pa.array(dims[:, i], _I32, mask=dims[:, i] < 0)
               for i, (k, a) in enumerate((k, a) for k in ("grid", "block") for a in "xyz")}})

    def _categories(self, space, rows, program, module, hlo, category) -> None:
        """The kernels' ``op_category``: what their HLO op computes (``parsers.xplane_hlo``)."""
        strings = self.strings
        prog = np.where(np.ma.getmaskarray(program)[rows], -1, program.data[rows])
        keys = np.stack([prog, module[rows], hlo[rows], category[rows]], axis=1)
        size = len(strings.values) + 1
        if prog.min() >= -1 and (int(prog.max()) + 1) * size**3 < 1 << 62:  # one integer per combination
            flat = (((prog + 1) * size + keys[:, 1] + 1) * size + keys[:, 2] + 1) * size + keys[:, 3] + 1
            _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
            uniq = keys[first]
        else:
            uniq, inverse = np.unique(keys, axis=0, return_inverse=True)

        def text(c: int) -> str | None:
            return strings.values[c] if c >= 0 else None

        found = kernel_categories([(None if p < 0 else p, text(m), text(o), text(c)) for p, m, o, c in uniq.tolist()],
                                  space)
        codes = np.array([strings.code(f) for f in found], np.int64)[inverse.reshape(-1)]
        self.tables["kernels"] = self.tables["kernels"].append_column("op_category", strings.column(codes))

    def _memops(self, rows, lines: _Lines, ev: Events, device_id, stream, start, end, name, corr, details) -> None:
        if not rows.size:
            return
        strings = self.strings
        what = np.array([strings.code(w) for w in lines.what], np.int64)[ev.line[rows]]
        copy_kind = strings.map(what, _COPY_KINDS.get)
        by_name = strings.test(name[rows], lambda s: "DeviceToDevice" in s)
        copy_kind[(copy_kind < 0) & by_name] = strings.code("DtoD")
        size = strings.map(details[rows], lambda s: (m := _SIZE.search(s)) and m.group(1))
        size_bytes = np.array([int(strings.values[c]) if c >= 0 else -1 for c in size.tolist()], np.int64)
        self.tables["memops"] = pa.table({
            "device_id": pa.array(device_id[rows], _I32), "stream_id": stream[rows], "start_ns": start[rows],
            "end_ns": end[rows], "kind": strings.column(strings.map(what, lambda w: "memset" if w.startswith(
                "Memset") else "memcpy")), "copy_kind": strings.column(copy_kind),
            "bytes": pa.array(size_bytes, _I64, mask=size_bytes < 0), "correlation_id": _masked(corr, rows)})

    def _ranges(self, gpu, python, module, op, tid, start, end, name, hlo, category, device_id, stream) -> None:
        strings = self.strings
        which = np.select([gpu, python, module, op], [1, 2, 3, 4], 0)
        rows = np.flatnonzero(which)
        if not rows.size:
            return
        which = which[rows]
        on_gpu = which == 1
        names = np.where(on_gpu, hlo[rows], name[rows])
        names[which == 2] = strings.map(names[which == 2], lambda s: s.lstrip("$"))
        domain = np.where(on_gpu, category[rows], -1)
        domain[domain >= 0] = strings.map(domain[domain >= 0], lambda s: s or None)
        labels = np.array([[None, None], ["hlo_op", "gpu_range"], ["python", "python"], ["xla_module", "range"],
                           ["xla_op", "op"]], object)[which]
        self.tables["ranges"] = pa.table({
            "tid": pa.array(tid[rows], _I64, mask=on_gpu), "start_ns": start[rows], "end_ns": end[rows],
            "name": strings.column(names), "domain": strings.column(domain), "source": pa.array(labels[:, 0], _S),
            "device_id": pa.array(device_id[rows], _I32, mask=~on_gpu),
            "stream_id": pa.array(stream[rows], _I64, mask=~on_gpu), "kind": pa.array(labels[:, 1], _S)})

    def _insert(self, table: str, data: pa.Table) -> None:
        cols = ", ".join(data.column_names)
        self.con.register("_xp", data)
        try:
            self.con.execute(f"INSERT INTO {table} (pid, dur_ns, {cols}) SELECT {PID}, end_ns - start_ns, {cols} "
                             "FROM _xp")
        finally:
            self.con.unregister("_xp")

    def write(self, space) -> None:
        for table in ("kernels", "memops", "api_calls", "ranges"):
            if table in self.tables:
                self._insert(table, self.tables[table])
        if self.devices:
            self.con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self.devices)
        self.con.execute("INSERT INTO processes VALUES (NULL, ?, 'jax')", [PID])
        notes = [("skipped_events", n, what) for what, n in sorted(self.skipped.items())]
        if "kernels" not in self.tables:
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


def _masked(values: np.ma.MaskedArray, rows: np.ndarray) -> pa.Array:
    return pa.array(values.data[rows], _I64, mask=np.ma.getmaskarray(values)[rows])


def _dims(details: str) -> tuple[int, ...]:
    """(grid x, y, z, block x, y, z) of a kernel_details text; -1 for what it does not give."""
    found = {d[0]: tuple(int(x) for x in d[1:]) for d in _DIMS.findall(details)}
    return found.get("grid", (-1,) * 3) + found.get("block", (-1,) * 3)
