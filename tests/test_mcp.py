"""`tracekit mcp`: the tools, driven by the MCP SDK's own client (in process, and over stdio once), give the
CLI's verdict with every figure named by its docs/report-schema.md key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.schema.docs import explain

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

TOOLS = {"analyze", "doctor", "floor", "walls", "kernels", "diff", "explain"}
VLLM_DECODE = "tracelens__inference__vllm_decode_full__graph_execution.json.gz"
CONFIG = "gptoss-20b-vllm-mi300x"


def call_all(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """List the tools and make the calls with the SDK's client; (tools, results)."""

    async def run() -> tuple[list[Any], list[Any]]:
        async with mcp.Client(server) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> dict[str, Any]:
    from tracekit.api.mcp import build_server

    cache = tmp_path_factory.mktemp("mcp-cache")
    trace = shared_traces / "torch" / VLLM_DECODE
    tools, results = call_all(build_server(cache), [
        ("analyze", {"paths": [str(trace)], "config": CONFIG}),
        ("floor", {"config": CONFIG, "measured": "20ms"}),
        ("explain", {"term": "classes.excess_ns"}),
        ("analyze", {"paths": [str(trace.with_name("no_such_trace.json.gz"))]}),
        ("walls", {"config": CONFIG, "tpot_slo": "50ms"}),
        ("doctor", {"paths": [str(trace)]}),
    ])
    cli = CliRunner().invoke(main, ["analyze", str(trace), "--config", CONFIG, "--cache-dir", str(cache),
                                    "--format", "json"])
    assert cli.exit_code == 0, cli.output
    doctor = CliRunner().invoke(main, ["doctor", str(trace), "--cache-dir", str(cache), "--format", "json"])
    assert doctor.exit_code == 0, doctor.output
    return {"tools": tools, "results": results, "cli": json.loads(cli.stdout), "doctor": json.loads(doctor.stdout)}


def test_the_server_lists_every_tool_with_typed_results(session: dict[str, Any]) -> None:
    tools = {t.name: t for t in session["tools"]}
    assert set(tools) == TOOLS
    for name in TOOLS - {"explain"}:
        schema = tools[name].output_schema
        assert {"verdict", "figures", "keys"} <= set(schema["properties"]), name
        assert schema["$defs"]["Figure"]["required"] == ["key", "item", "value"]


def test_analyze_gives_the_cli_verdict_and_names_every_number(session: dict[str, Any]) -> None:
    result, cli = session["results"][0], session["cli"]
    assert not result.is_error
    body = result.structured_content
    assert body["verdict"] == cli["verdict"] == "kernel" and body["reasons"] == cli["reasons"]
    assert body["keys"] == "docs/report-schema.md" and body["schema"] == "tracekit.report/v2"
    figures = {(f["key"], f["item"]): f["value"] for f in body["figures"]}
    assert figures[("steps.step_ns_p50", None)] == cli["steps"]["step_ns_p50"]
    top = cli["classes"][0]
    assert figures[("classes.excess_ns", top["name"])] == top["excess_ns"]
    for key in {k for k, _ in figures}:  # every key is one the schema document defines
        assert explain(key)["key"] == key


def test_floor_walls_explain_and_errors(session: dict[str, Any]) -> None:
    floor, explained, missing, walls, _ = (r for r in session["results"][1:])
    assert floor.structured_content["verdict"] in {"near-floor", "above-floor", "inconclusive"}
    assert any(f["key"] == "t_opt_ns" for f in floor.structured_content["figures"])
    assert explained.structured_content["key"] == "classes.excess_ns"
    assert missing.is_error and "no_such_trace.json.gz" in missing.content[0].text
    assert walls.structured_content["reasons"][0].startswith("wall ordering: ")


def test_doctor_gives_the_cli_findings(session: dict[str, Any]) -> None:
    result, cli = session["results"][5], session["doctor"]
    assert not result.is_error
    body = result.structured_content
    assert body["document"] == cli and body["schema"] == "tracekit.doctor/v1"
    blocking = [f for f in cli["findings"] if f["severity"] in ("unsupported", "blocking")]
    assert body["reasons"] == [f"{f['severity']}: {f['text']}" for f in blocking]


def test_tracekit_mcp_serves_over_stdio() -> None:
    """`tracekit mcp` itself, started by the SDK's stdio client: it lists the tools and answers one."""
    params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "tracekit", "mcp"])
    tools, (result,) = call_all(params, [("explain", {"term": "verdict"})])
    assert {t.name for t in tools} == TOOLS
    assert result.structured_content["key"] == "verdict"


def test_the_skill_names_the_served_tools_and_documented_keys() -> None:
    """floor/SKILL.md tells an agent which tool to call when: each tool it names is served, and each report key
    it quotes is one docs/report-schema.md defines."""
    import re

    skill = (Path(__file__).resolve().parents[1] / "floor" / "SKILL.md").read_text(encoding="utf-8")
    section = skill[skill.index("## The tools"):skill.index("## 1.")]
    called = set(re.findall(r"^\| [^|]+ \| ([^|]+) \|", section, re.M)[1:])
    named = {t for cell in called for t in re.findall(r"`(\w+)`", cell)} & (TOOLS | {"configs"})
    assert named >= TOOLS - {"configs"}
    keys = set(re.findall(r"`((?:steps|floor|host_gaps|exposed_comm|ranks|classes|ncu_targets)(?:\.\w+)+)`",
                          section))
    assert len(keys) >= 6
    for key in keys:
        assert explain(key)["key"] == key
