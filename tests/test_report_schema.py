"""docs/report-schema.md and the typed report (``tracekit.schema.report.Report``) name the same keys.

The field table is read by ``tracekit.schema.docs`` (its notation is described there). Every documented key
must be a field of the Struct and every field documented, at every depth; a field holding a Struct must have
its keys documented.
"""

from __future__ import annotations

import re

import msgspec
import pytest

from tracekit.analysis.options import GATE_EXIT
from tracekit.errors import InputError
from tracekit.schema.docs import DOC, Tree, documented, explain, parse_group
from tracekit.schema.report import Report
from tracekit.schema.verdict import TRIAGE_VERDICTS, Verdict


def _struct(info: msgspec.inspect.Type) -> msgspec.inspect.StructType | None:
    """The Struct a field holds, through optionals, lists and map values (None for a leaf)."""
    if isinstance(info, msgspec.inspect.StructType):
        return info
    if isinstance(info, msgspec.inspect.UnionType):
        found = [s for t in info.types if (s := _struct(t)) is not None]
        return found[0] if found else None
    if isinstance(info, msgspec.inspect.ListType):
        return _struct(info.item_type)
    if isinstance(info, msgspec.inspect.DictType):
        return _struct(info.value_type)
    return None


def _is_map(info: msgspec.inspect.Type) -> bool:
    if isinstance(info, msgspec.inspect.UnionType):
        return any(_is_map(t) for t in info.types)
    return isinstance(info, msgspec.inspect.DictType)


def mismatches(struct: msgspec.inspect.StructType, doc: Tree, path: str,
               aliases: dict[str, Tree] | None = None) -> list[str]:
    """Every difference between a Struct's fields and a documented key tree; ``aliases``: the keys of a Struct
    (by name) that its document defines once in a sentence, for the keys that hold it without their own group."""
    aliases = aliases or {}
    fields = {f.encode_name: f.type for f in struct.fields}
    out = [f"{path}{k}: documented, not in {struct.cls.__name__}" for k in sorted(set(doc) - set(fields))]
    out += [f"{path}{k}: a field of {struct.cls.__name__}, not documented" for k in sorted(set(fields) - set(doc))]
    for key in sorted(set(doc) & set(fields)):
        inner, sub = _struct(fields[key]), doc[key]
        if inner is None:
            if sub is not None and not _is_map(fields[key]):
                out.append(f"{path}{key}: documented with keys, but a plain value")
            continue
        if sub is None and not _is_map(fields[key]):
            sub = aliases.get(inner.cls.__name__)
        if sub is None:
            out.append(f"{path}{key}: holds {inner.cls.__name__}, whose keys are not documented")
            continue
        if _is_map(fields[key]):  # {CLASS: {...}}: one upper-case placeholder for the map's keys
            (placeholder, sub), = sub.items() if len(sub) == 1 else ((None, None),)
            sub = sub if sub is not None else aliases.get(inner.cls.__name__)
            if placeholder is None or not placeholder.isupper() or sub is None:
                out.append(f"{path}{key}: a map; document it as {{KEY: {{...}}}}")
                continue
        out += mismatches(inner, sub, f"{path}{key}.", aliases)
    return out


def test_parser_reads_nesting_remarks_and_lists() -> None:
    tree = parse_group("{a, b (x, y {z}), c {d, e}, f: [{g (h)}] (i), j ['k'\\|'l'], m: null \\| {n}, "
                       "o: [one, two], P}")
    assert tree == {"a": None, "b": None, "c": {"d": None, "e": None}, "f": {"g": None}, "j": None,
                    "m": {"n": None}, "o": None, "P": None}
    with pytest.raises(ValueError, match="not a key"):
        parse_group("{a, (stray remark)}")


def test_checker_finds_each_kind_of_mismatch() -> None:
    info = msgspec.inspect.type_info(Report)
    doc = documented()
    assert mismatches(info, doc, "") == []
    wrong = {**doc, "extra": None, "floor": {**doc["floor"], "resource_ns": None}}
    del wrong["verdict"]
    found = mismatches(info, wrong, "")
    assert "extra: documented, not in Report" in found
    assert "verdict: a field of Report, not documented" in found
    assert "floor.resource_ns: holds ResourceNs, whose keys are not documented" in found


def test_every_documented_key_is_a_field_and_every_field_documented() -> None:
    assert mismatches(msgspec.inspect.type_info(Report), documented(), "") == []


def test_schema_name_and_verdicts_match_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.startswith("# The analysis report: `tracekit.report/v2`")
    row = next(line for line in text.splitlines() if line.startswith("| `verdict` |"))
    assert re.findall(r"`([a-z-]+)`", re.split(r"(?<!\\)\|", row)[2]) == [str(v) for v in TRIAGE_VERDICTS]
    assert set(GATE_EXIT) == set(TRIAGE_VERDICTS) and Verdict.ABOVE_FLOOR not in GATE_EXIT


def test_an_unknown_section_fails_the_conversion() -> None:
    """The analysis converts its assembled sections once: a section the contract lacks is an error."""
    from tracekit.schema.report import typed_report

    report = documented()  # any dict with an extra key fails before the missing ones are even looked at
    with pytest.raises(msgspec.ValidationError, match="unknown field `no_such_section`"):
        typed_report({"no_such_section": [], **{k: None for k in report}})


def test_the_typed_report_is_the_json_key_for_key_in_order(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The analysis's own report converts (analyze_report runs typed_report) and converts back to the very
    JSON document, key order included: the Structs' field order is the report's."""
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from tracekit.cli import main
    from tracekit.schema.report import typed_report

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "dsv32_ep16_decode.sqlite"
    cache = tmp_path_factory.mktemp("schema-cache")
    out = CliRunner().invoke(main, ["analyze", str(fixture), "--config", "dsv32-ep16", "--cache-dir", str(cache),
                                    "--no-cache", "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    typed = typed_report(doc)
    assert typed.verdict is Verdict.KERNEL and typed.classes[0].name == doc["classes"][0]["name"]
    assert msgspec.json.encode(typed) == msgspec.json.encode(doc)  # same keys, values and order
    import tracekit

    walls = tracekit.walls("dsv32-ep16").data  # the report's walls are the walls command's, less its targets
    assert typed.walls is not None and doc["walls"] == {k: walls[k] for k in doc["walls"]}
    assert doc["walls"]["ordering"] and list(doc)[-1] == "walls"


def test_no_renderer_loads_a_config() -> None:
    """What the HTML page and the plots draw comes from the report: neither loads a config or computes walls."""
    from pathlib import Path

    report = Path(__file__).resolve().parents[1] / "tracekit" / "report"
    for name in ("html.py", "plots.py"):
        text = (report / name).read_text(encoding="utf-8")
        assert "load_config" not in text and "compute_walls" not in text, name


def test_the_packaged_document_is_the_docs_one() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs" / "report-schema.md"
    assert DOC.read_bytes() == docs.read_bytes()


def test_explain_names_a_nested_key_its_row_and_its_definitions() -> None:
    found = explain("exposed_comm.overlap_fraction")
    assert found["key"] == "exposed_comm.overlap_fraction"
    assert found["remark"].startswith("overlap_fraction (1 − exposed / comm")
    assert any(d.startswith("**Overlap**") for d in found["definitions"])
    through_map = explain("exposed_comm.by_collective.exposed_ns")  # CLASS is stepped through
    assert through_map["remark"] == "exposed_ns (its share of exposed_ns)"
    assert explain("host_code")["key"] is None and explain("host_code")["definitions"]  # a cause, by definition


@pytest.mark.parametrize("term", ["steps.no_such_key", "no_such_thing"])
def test_explain_refuses_what_the_document_does_not_define(term: str) -> None:
    with pytest.raises(InputError, match=term.split(".")[-1]):
        explain(term)
