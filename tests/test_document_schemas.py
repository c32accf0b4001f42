"""The diff, reconcile and info documents' Structs (tracekit/schema/diff.py, reconcile.py, info.py) name the keys
their documents' tables name (docs/reconcile.md, docs/schema.md), at every depth, and convert the CLI's own JSON
back to the very bytes; an unknown key fails the conversion. Cheap: the fixture reports and small captures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from tests.test_report_schema import mismatches
from tracekit.cli import main
from tracekit.schema.diff import Diff, typed_diff
from tracekit.schema.docs import aliases, table_tree
from tracekit.schema.info import Info, typed_info
from tracekit.schema.reconcile import Reconcile, typed_reconcile

ROOT = Path(__file__).resolve().parents[1]
RECONCILE_DOC = (ROOT / "docs" / "reconcile.md").read_text(encoding="utf-8")
SCHEMA_DOC = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
SAMPLE = ROOT / "fixtures" / "sample_decode.sqlite"
PLANTED = ROOT / "fixtures" / "dsv32_ep16_decode.sqlite"
BENCH = ROOT / "fixtures" / "bench_results"

DOCUMENTS = {  # struct, its document, the table's heading, the groups defined once in a sentence
    "diff": (Diff, RECONCILE_DOC, "### JSON: `tracekit.diff/v1`",
             {"Delta": "A delta is", "Tested": "A tested change is", "TestedClass": "A tested class change is"}),
    "reconcile": (Reconcile, RECONCILE_DOC, "### JSON: `tracekit.reconcile/v1`", {"Placement": "A placement is"}),
    "info": (Info, SCHEMA_DOC, "## `tracekit info --format json`", {}),
}


def _json(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.startswith("{") else {}, result.output


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_documented_key_is_a_field_and_every_field_documented(name: str) -> None:
    struct, text, heading, groups = DOCUMENTS[name]
    found = mismatches(msgspec.inspect.type_info(struct), table_tree(text, heading), "", aliases(text, groups))
    assert found == []


def test_the_checker_sees_a_key_missing_from_a_table_and_from_a_sentence() -> None:
    struct, text, heading, groups = DOCUMENTS["diff"]
    tree, named = table_tree(text, heading), aliases(text, groups)
    del tree["gate"]
    named["Delta"] = {k: v for k, v in named["Delta"].items() if k != "delta_fraction"}
    found = mismatches(msgspec.inspect.type_info(struct), tree, "", named)
    assert "gate: a field of Diff, not documented" in found
    assert "step.p50_ns.delta_fraction: a field of Delta, not documented" in found


def test_the_table_reader_takes_shared_and_nested_rows() -> None:
    tree = table_tree("## T\n\n| field | meaning |\n|---|---|\n| `a`, `b` | `{x, y {z}}` |\n| `r[]` | rows |\n"
                      "| `r[].s` | `{t}` |\n| `r[].u`, `r[].v` | words |\n\nafter", "## T")
    assert tree == {"a": {"x": None, "y": {"z": None}}, "b": {"x": None, "y": {"z": None}},
                    "r": {"s": {"t": None}, "u": None, "v": None}}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The planted fixture's report (one analysis, reused by every diff below), and a copy that ran on
    another GPU (so the two do not compare)."""
    root = tmp_path_factory.mktemp("documents")
    out = {"planted": root / "planted.json", "other_gpu": root / "other_gpu.json"}
    code, _, output = _json("analyze", str(PLANTED), "--no-cache", "--config", "dsv32-ep16",
                            "--out", str(out["planted"]))
    assert code == 0, output
    doc = json.loads(out["planted"].read_text())
    for i in doc["inputs"]:
        i["gpus"] = ["NVIDIA H100 80GB HBM3"]
    out["other_gpu"].write_text(json.dumps(doc))
    return out


def test_diff_json_is_the_typed_diff_byte_for_byte(reports: dict[str, Path]) -> None:
    code, doc, output = _json("diff", str(reports["planted"]), str(reports["planted"]), "--gate")
    assert code == 11, output  # AFTER's verdict is kernel
    typed = typed_diff(doc)
    assert typed.gate is not None and typed.gate.exit_status == 11 and typed.verdict.after == "kernel"
    assert typed.conclusive and all(c.delta_ns == 0 for c in typed.changes)
    assert msgspec.json.encode(typed) == msgspec.json.encode(doc)  # same keys, values, types and order
    code, doc, _ = _json("diff", str(reports["other_gpu"]), str(reports["planted"]), "--fail-if-slower", "5%")
    assert code == 12 and typed_diff(doc).gate_basis is None  # the sides do not compare: every gate fails
    assert msgspec.json.encode(typed_diff(doc)) == msgspec.json.encode(doc)
    with pytest.raises(msgspec.ValidationError, match="unknown field `no_such_key`"):
        typed_diff({**doc, "no_such_key": 1})


def test_a_report_that_breaks_the_contract_is_one_line(reports: dict[str, Path], tmp_path: Path) -> None:
    bad = json.loads(reports["planted"].read_text())
    bad["steps"]["no_such_key"] = 1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    code, _, output = _json("diff", str(reports["planted"]), str(path))
    assert code == 2 and "Traceback" not in output and "no_such_key" in output and str(path) in output
    assert len(output.strip().splitlines()) == 1


def test_reconcile_json_is_the_typed_document_byte_for_byte() -> None:
    files = sorted(str(p) for p in BENCH.iterdir())
    code, doc, output = _json("reconcile", *files, "--config", "qwen3-8b-tp1-h100")
    assert code == 0, output
    typed = typed_reconcile(doc)
    assert len(typed.results) == len(doc["results"]) > len(files)  # a sweep file holds several runs
    assert typed.sweep is not None and typed.sweep.points and {str(r.verdict) for r in typed.results}
    assert msgspec.json.encode(typed) == msgspec.json.encode(doc)
    with pytest.raises(msgspec.ValidationError, match="unknown field `extra`"):
        typed_reconcile({**doc, "config": {**doc["config"], "extra": 1}})


def test_info_json_is_the_typed_document_byte_for_byte() -> None:
    code, doc, output = _json("info", str(SAMPLE), "--no-cache")
    assert code == 0, output
    typed = typed_info(doc)
    assert typed.files[0].file == str(SAMPLE) and typed.streams and typed.events[0].kernels > 0
    assert msgspec.json.encode(typed) == msgspec.json.encode(doc)
