"""The ``tensorflow.profiler.XSpace`` protobuf messages, built at import from the published ``xplane.proto``.

The definitions are those of ``xla/tsl/profiler/protobuf/xplane.proto`` (OpenXLA/TSL, Apache-2.0; package
``tensorflow.profiler``), field for field, written here as a descriptor instead of generated ``_pb2`` code:
generated code pins the protobuf runtime to the generator's version, and no maintained package on PyPI
ships these definitions without TensorFlow or a profiler server. Only ``protobuf`` itself is needed.

``XSpaceRaw`` is the same message with each line's events left undecoded (``XLineRaw`` omits ``events``, so
the parser keeps that field's bytes as an unknown field, and serialising the line gives them back after its
known fields): the reader parses the file's frame (planes, lines, metadata maps) with it in C and decodes the
events in bulk (``parsers.xplane_events``), instead of building one Python object per event and per stat.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_T = {"int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "double": _F.TYPE_DOUBLE, "string": _F.TYPE_STRING,
      "bytes": _F.TYPE_BYTES}

# message -> fields (name, number, type or message name, repeated, oneof index)
_MESSAGES: dict[str, list[tuple[str, int, str, bool, int | None]]] = {
    "XSpace": [("planes", 1, "XPlane", True, None), ("errors", 2, "string", True, None),
               ("warnings", 3, "string", True, None), ("hostnames", 4, "string", True, None)],
    "XPlane": [("id", 1, "int64", False, None), ("name", 2, "string", False, None),
               ("lines", 3, "XLine", True, None), ("event_metadata", 4, "XPlane.EventMetadataEntry", True, None),
               ("stat_metadata", 5, "XPlane.StatMetadataEntry", True, None), ("stats", 6, "XStat", True, None)],
    "XLine": [("id", 1, "int64", False, None), ("display_id", 10, "int64", False, None),
              ("name", 2, "string", False, None), ("display_name", 11, "string", False, None),
              ("timestamp_ns", 3, "int64", False, None), ("duration_ps", 9, "int64", False, None),
              ("events", 4, "XEvent", True, None)],
    "XEvent": [("metadata_id", 1, "int64", False, None), ("offset_ps", 2, "int64", False, 0),
               ("num_occurrences", 5, "int64", False, 0), ("duration_ps", 3, "int64", False, None),
               ("stats", 4, "XStat", True, None)],
    "XStat": [("metadata_id", 1, "int64", False, None), ("double_value", 2, "double", False, 0),
              ("uint64_value", 3, "uint64", False, 0), ("int64_value", 4, "int64", False, 0),
              ("str_value", 5, "string", False, 0), ("bytes_value", 6, "bytes", False, 0),
              ("ref_value", 7, "uint64", False, 0)],
    "XEventMetadata": [("id", 1, "int64", False, None), ("name", 2, "string", False, None),
                       ("display_name", 4, "string", False, None), ("metadata", 3, "bytes", False, None),
                       ("stats", 5, "XStat", True, None), ("child_id", 6, "int64", True, None)],
    "XStatMetadata": [("id", 1, "int64", False, None), ("name", 2, "string", False, None),
                      ("description", 3, "string", False, None)],
}
# The raw frame: planes and lines as above, events undecoded.
_MESSAGES["XLineRaw"] = [f for f in _MESSAGES["XLine"] if f[0] != "events"]  # events: unknown, kept as bytes
_MESSAGES["XPlaneRaw"] = [(n, i, "XLineRaw" if n == "lines" else t, r, o) for n, i, t, r, o in _MESSAGES["XPlane"]]
_MESSAGES["XSpaceRaw"] = [(n, i, "XPlaneRaw" if n == "planes" else t, r, o) for n, i, t, r, o in _MESSAGES["XSpace"]]
_ONEOFS = {"XEvent": "data", "XStat": "value"}
_MAPS = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}  # map<int64, V> in XPlane


def _field(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: str, repeated: bool,
           oneof: int | None) -> None:
    f = message.field.add(name=name, number=number,
                          label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if kind in _T:
        f.type = _T[kind]
    elif kind.startswith("XPlane.") and message.name == "XPlaneRaw":  # XPlaneRaw's own map entries
        f.type, f.type_name = _F.TYPE_MESSAGE, f".tensorflow.profiler.XPlaneRaw.{kind.split('.', 1)[1]}"
    else:
        f.type, f.type_name = _F.TYPE_MESSAGE, f".tensorflow.profiler.{kind}"
    if oneof is not None:
        f.oneof_index = oneof


def _build() -> dict[str, type]:
    file = descriptor_pb2.FileDescriptorProto(name="tracekit/xplane.proto", package="tensorflow.profiler",
                                              syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        if name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[name])
        for spec in fields:
            _field(message, *spec)
        if name in ("XPlane", "XPlaneRaw"):
            for entry, value in _MAPS.items():
                nested = message.nested_type.add(name=entry)
                nested.options.map_entry = True
                _field(nested, "key", 1, "int64", False, None)
                _field(nested, "value", 2, value, False, None)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.profiler.{name}"))
            for name in _MESSAGES}


_CLASSES = _build()
XSpace = _CLASSES["XSpace"]
XPlane = _CLASSES["XPlane"]
XSpaceRaw = _CLASSES["XSpaceRaw"]
