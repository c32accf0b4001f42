"""``tracekit mcp``: the Python API as MCP tools over stdio, for agents (floor/SKILL.md says which tool when).

Tools: ``analyze``, ``doctor``, ``floor``, ``walls``, ``kernels``, ``diff`` and ``explain``. Each returns a
``ToolResult``: the verdict and its reasons where there is one, and ``figures``, every number of the document
named by its key in the document that defines it (``keys``: docs/report-schema.md for ``analyze``, so
``steps.step_ns_p50`` or ``classes.excess_ns`` with ``item`` naming the row), which ``explain`` looks up. ``full``
adds the whole JSON document. The MCP SDK is an optional extra (``pip install 'tracekit[mcp]'``), imported only
here.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations, which name classes made
# inside build_server (pydantic wants typing_extensions' TypedDict on Python 3.11, a dependency of the SDK).
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracekit.api import configs as api_configs
from tracekit.api import traces as api_traces
from tracekit.errors import InputError, TracekitError
from tracekit.floor import ConfigError
from tracekit.schema.docs import Tree, documented, map_key
from tracekit.schema.docs import explain as explain_key

INSTRUCTIONS = ("Floor-first triage of GPU traces of LLM serving and training. Start with analyze (a trace and a "
                "config); its verdict says what to do next: near-floor stop, pipeline look at host gaps and exposed "
                "communication, kernel profile the named ncu/rocprofv3 targets, inconclusive read the reasons "
                "(doctor says what the capture lacks and how to re-capture). floor and walls need only a config; "
                "diff compares two captures; explain defines any figure's key.")


def _label(row: Any, index: int) -> str:
    if isinstance(row, dict):
        for name in ("name", "collective", "component", "rule", "label"):
            if isinstance(row.get(name), str):
                return row[name]
        if isinstance(row.get("rank"), int):
            return f"rank {row['rank']}" + (f" device {row['device']}" if isinstance(row.get("device"), int) else "")
    return str(index)


def figures(value: Any, tree: Tree | None = None, key: str = "",
            item: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Every number in ``value`` with its documented key: a document's fields extend the key; list rows and
    the entries of a map (a ``documented()`` node with one upper-case key, ``{CLASS: ...}``) name the ``item``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        yield {"key": key, "item": "/".join(item) or None, "value": value}
    elif isinstance(value, list):
        for i, row in enumerate(value):
            yield from figures(row, tree, key, (*item, _label(row, i)))
    elif isinstance(value, dict):
        mapped = map_key(tree)
        if mapped is not None:  # a map: its keys are items, not documented keys
            for k, v in value.items():
                yield from figures(v, tree[mapped], key, (*item, str(k)))
            return
        for k, v in value.items():
            yield from figures(v, (tree or {}).get(k), f"{key}.{k}" if key else k, item)


def _result(tool: str, document: dict[str, Any], keys: str, tree: Tree | None = None,
            verdict: str | None = None, reasons: list[str] | None = None, caveats: list[str] | None = None,
            skip: tuple[str, ...] = (), full: bool = False) -> dict[str, Any]:
    """A tool's result (``ToolResult`` in build_server: its fields are documented there)."""
    body = {k: v for k, v in document.items() if k not in skip}
    return {"tool": tool, "schema": document.get("schema"), "keys": keys, "verdict": verdict,
            "reasons": reasons or [], "caveats": caveats or [], "figures": list(figures(body, tree)),
            "document": document if full else None}


def analyze_tool(paths: list[str], config: str | None = None, step: str | None = None, skip_steps: int = 0,
                 batch: int | None = None, context: int | None = None, sets: list[str] | None = None,
                 full: bool = False, cache_dir: Path | None = None) -> dict[str, Any]:
    result = api_traces.analyze(paths, config, step=step, skip_steps=skip_steps, batch=batch, context=context,
                                 sets=sets, detail=False, cache_dir=cache_dir)
    report = result.report
    # The config's inputs and its walls (the walls tool gives them) are not measurements, and the per-step
    # samples (up to 2,000 rows) are what the figures summarise: full=True has them all.
    return _result("analyze", report, "docs/report-schema.md", documented(), report["verdict"],
                   report["reasons"], report["caveats"], skip=("config", "samples", "walls"), full=full)


def doctor_tool(paths: list[str], cache_dir: Path | None = None) -> dict[str, Any]:
    result = api_traces.doctor(paths, cache_dir=cache_dir)
    doc = json.loads(result.render("json"))
    findings = result.health.findings
    return _result("doctor", doc, "docs/doctor.md (tracekit doctor --format json)",
                   reasons=[f"{f.severity}: {f.text}" for f in findings if f.severity in ("unsupported", "blocking")],
                   caveats=[f"{f.severity}: {f.text}" for f in findings if f.severity == "warning"], full=True)


def floor_tool(config: str, batch: int | None = None, context: int | None = None, sets: list[str] | None = None,
               measured: str | None = None, full: bool = False) -> dict[str, Any]:
    report = api_configs.floor(config, batch=batch, context=context, sets=sets, measured=measured)
    placement = report.placement
    return _result("floor", report.data, "docs/floor.md (tracekit floor --format json)",
                   verdict=placement.verdict if placement else None,
                   reasons=[placement.reason] if placement else [], caveats=list(report.result.notes),
                   skip=("config",), full=full)


def walls_tool(config: str, vs: str | None = None, tpot_slo: str | None = None, batch: int | None = None,
               context: int | None = None, sets: list[str] | None = None, full: bool = False) -> dict[str, Any]:
    report = api_configs.walls(config, vs=vs, tpot_slo=tpot_slo, batch=batch, context=context, sets=sets)
    return _result("walls", report.data, "docs/floor.md (tracekit walls --format json)",
                   reasons=[f"wall ordering: {', '.join(report.result.ordering)}"], full=full)


def kernels_tool(paths: list[str], by: str = "name", limit: int = 20, cache_dir: Path | None = None) -> dict[str, Any]:
    result = api_traces.kernels(paths, by=by, limit=limit, cache_dir=cache_dir)
    return _result("kernels", {"kernels": result.frame.to_dicts()}, "docs/schema.md (nsys stats definitions)",
                   caveats=result.notes, full=True)


def diff_tool(before: str, after: str, config: str | None = None, step: str | None = None,
              fail_if_slower: str | None = None, expect_faster: str | None = None, full: bool = False,
              cache_dir: Path | None = None) -> dict[str, Any]:
    result = api_traces.diff(before, after, config, step=step, fail_if_slower=fail_if_slower,
                              expect_faster=expect_faster, cache_dir=cache_dir)
    doc = result.report
    reasons = [f"verdict {doc['verdict']['before']} -> {doc['verdict']['after']}; exit status {result.exit_status}",
               *[f"inconclusive: {r}" for r in doc["inconclusive"]], *doc["gate"]["reasons"]]
    return _result("diff", doc, "docs/reconcile.md (tracekit.diff/v1)", verdict=doc["verdict"]["after"],
                   reasons=reasons, caveats=doc["caveats"], full=full)


def explain_tool(term: str) -> dict[str, Any]:
    return explain_key(term)


def build_server(cache_dir: Path | None = None) -> Any:
    """The MCP server with every tool (``cache_dir``: where traces are ingested, as ``--cache-dir``)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from typing_extensions import TypedDict
    except ImportError:
        raise InputError("tracekit mcp: needs the MCP SDK (mcp >= 2); pip install 'tracekit[mcp]'") from None

    class Figure(TypedDict):
        key: str  # its key in the document that defines it (docs/report-schema.md for analyze)
        item: str | None  # the row or map entry it belongs to (a class, a collective, a rank), or None
        value: int | float

    class ToolResult(TypedDict):
        tool: str
        schema: str | None  # the document's schema name
        keys: str  # where the figures' keys are defined
        verdict: str | None
        reasons: list[str]
        caveats: list[str]
        figures: list[Figure]
        document: dict[str, Any] | None  # the whole JSON document, with full=True

    server = MCPServer("tracekit", instructions=INSTRUCTIONS)

    def call(fn: Any, *args: Any) -> Any:
        """A tool's bad input as the CLI's one-line error, which the agent reads (not a bare failure)."""
        try:
            return fn(*args)
        except (TracekitError, ConfigError) as exc:
            raise ToolError(f"tracekit: error: {exc}") from None

    @server.tool()
    def analyze(paths: list[str], config: str | None = None, step: str | None = None, skip_steps: int = 0,
                batch: int | None = None, context: int | None = None, sets: list[str] | None = None,
                full: bool = False) -> ToolResult:
        """Floor-first triage of one capture (trace files or a folder of rank files): the verdict (near-floor,
        pipeline, kernel, inconclusive), its reasons, caveats and every figure by its docs/report-schema.md key.
        config: a named config (see floor) or TOML path; without it the floor and class budgets are not judged."""
        return call(analyze_tool, paths, config, step, skip_steps, batch, context, sets, full, cache_dir)

    @server.tool()
    def doctor(paths: list[str]) -> ToolResult:
        """The capture's health before any number: dropped events, missing shapes or stacks, graphs without node
        tracing, late start, step markers, the device, clocks; each finding with the re-capture fix for the
        engine that wrote the trace (reasons: blocking findings; caveats: warnings; document: all)."""
        return call(doctor_tool, paths, cache_dir)

    @server.tool()
    def floor(config: str, batch: int | None = None, context: int | None = None, sets: list[str] | None = None,
              measured: str | None = None, full: bool = False) -> ToolResult:
        """The analytical floor of a config at physical peaks (t_opt, t_sum, binding resource, expected_ns);
        with measured (e.g. '41ms') where that step sits against it (near-floor: stop tuning kernels)."""
        return call(floor_tool, config, batch, context, sets, measured, full)

    @server.tool()
    def walls(config: str, vs: str | None = None, tpot_slo: str | None = None, batch: int | None = None,
              context: int | None = None, sets: list[str] | None = None, full: bool = False) -> ToolResult:
        """Which limit binds first as concurrency grows (KV capacity, KV bandwidth, weights, compute,
        network), the goodput frontier, the crossover with vs, and TPOT-SLO reachability."""
        return call(walls_tool, config, vs, tpot_slo, batch, context, sets, full)

    @server.tool()
    def kernels(paths: list[str], by: str = "name", limit: int = 20) -> ToolResult:
        """Per-kernel (or per-class with by='class') instances and times of a capture, largest first."""
        return call(kernels_tool, paths, by, limit, cache_dir)

    @server.tool()
    def diff(before: str, after: str, config: str | None = None, step: str | None = None,
             fail_if_slower: str | None = None, expect_faster: str | None = None, full: bool = False) -> ToolResult:
        """Two reports or traces compared: what changed, the largest explanation of the step change first,
        and the CI gate's exit status (fail_if_slower e.g. '5%')."""
        return call(diff_tool, before, after, config, step, fail_if_slower, expect_faster, full, cache_dir)

    @server.tool()
    def explain(term: str) -> dict[str, Any]:
        """What a report key (e.g. exposed_comm.overlap_fraction, classes.excess_ns), a verdict or a host-gap
        cause means: its row and definitions in docs/report-schema.md."""
        return call(explain_tool, term)

    return server


def serve(cache_dir: Path | None = None) -> None:
    """Serve the tools over stdio until the client closes the stream."""
    build_server(cache_dir).run("stdio")
