"""Before/after comparison of two analyses (``tracekit diff``): per-class time, host gaps by cause, exposed
communication and floor position, with the change that explains most of the step-time difference first,
and the exit status for gating.

Inputs are ``tracekit.report/v2`` JSON documents or traces (analysed here with the same options). The
result is the ``tracekit.diff/v1`` document (docs/reconcile.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.analysis.options import GATE_EXIT, REPORT_SCHEMA, AnalyzeOptions
from tracekit.errors import InputError

DIFF_SCHEMA = "tracekit.diff/v1"
SLOWER_EXIT = 13  # --fail-if-slower: the AFTER step p50 is slower than BEFORE by more than the allowance
NOT_FASTER_EXIT = 14  # --expect-faster CLASS: the class's per-step time did not fall by EXPECT_FASTER_MIN
INCONCLUSIVE_EXIT = GATE_EXIT["inconclusive"]  # a gate option on sides that do not compare
EXPECT_FASTER_MIN = 0.01  # a class must lose at least 1% of its BEFORE time to count as faster
SIGNIFICANT_STEP_CHANGE = 0.01  # a step change under 1% of BEFORE's p50 is noise: no shares of it are given
SNIFF_BYTES = 4096


@dataclass
class Side:
    """One input: where it came from and its v1 report."""

    path: str
    kind: str  # 'report' or 'trace'
    report: dict[str, Any]


def json_schema(path: Path) -> str | None:
    """The ``schema`` of a tracekit JSON document (its first key), None for anything else (traces included:
    a Kineto trace starts with ``schemaVersion``, an Nsight export is SQLite)."""
    if not path.is_file() or path.suffix == ".gz":
        return None
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES).decode("utf-8", errors="replace").lstrip()
    if not head.startswith("{") or '"schema"' not in head[:200]:
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable tracekit report ({type(exc).__name__}); "
                         "write it with `tracekit analyze --format json --out FILE`") from None
    return str(doc.get("schema")) if isinstance(doc, dict) else None


def load_side(path: Path, opts: AnalyzeOptions, cache_dir: Path | None, use_cache: bool, jobs: int) -> Side:
    """A report file as is, or a trace (file or per-rank directory) analysed with ``opts``."""
    schema = json_schema(path)
    if schema == REPORT_SCHEMA:
        return Side(str(path), "report", json.loads(path.read_text(encoding="utf-8")))
    if schema is not None:
        raise InputError(f"{path}: a {schema} document; give a {REPORT_SCHEMA} report "
                         "(`tracekit analyze --format json`) or a trace")
    from tracekit.analysis.analyze import analyze
    from tracekit.store.ingest import open_store

    with open_store([path], cache_dir=cache_dir, use_cache=use_cache, jobs=jobs) as store:
        return Side(str(path), "trace", analyze(store, opts))


def _delta(before: int | float | None, after: int | float | None) -> dict[str, Any]:
    d = None if before is None or after is None else after - before
    return {"before": before, "after": after, "delta": d,
            "delta_fraction": (d / before) if d is not None and before else None}


def _classes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["classes"]}


def significant(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether the step p50 changed by at least ``SIGNIFICANT_STEP_CHANGE`` of BEFORE's."""
    b, a = before["steps"]["step_ns_p50"], after["steps"]["step_ns_p50"]
    return bool(b) and abs(a - b) >= SIGNIFICANT_STEP_CHANGE * b


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The step partitioned into owners (host-gap causes and each class's attributed time, communication
    classes by their exposed time), each owner's change, the one that explains most of the step change first.
    Shares of the step change are given only when that change is significant (else None: 5 us of a 100 ms
    step is noise, and a share of it says nothing); the absolute deltas always."""
    step_delta = after["steps"]["step_ns_p50"] - before["steps"]["step_ns_p50"]
    shares = significant(before, after)
    rows = []
    for cause in sorted(set(before["host_gaps"]["by_cause"]) | set(after["host_gaps"]["by_cause"])):
        b, a = before["host_gaps"]["by_cause"].get(cause, 0), after["host_gaps"]["by_cause"].get(cause, 0)
        rows.append({"component": f"host gap: {cause}", "kind": "host_gap", "name": cause,
                     "before_ns": b, "after_ns": a, "delta_ns": a - b})
    cb, ca = _classes(before), _classes(after)
    for name in sorted(set(cb) | set(ca)):
        comm = (cb.get(name) or ca.get(name) or {}).get("communication", False)
        b = (cb.get(name) or {}).get("attributed_ns", 0)
        a = (ca.get(name) or {}).get("attributed_ns", 0)
        rows.append({"component": f"{'exposed comm' if comm else 'class'}: {name}",
                     "kind": "exposed_comm" if comm else "class", "name": name,
                     "before_ns": b, "after_ns": a, "delta_ns": a - b})
    sign = 1 if step_delta >= 0 else -1
    for r in rows:
        r["share_of_step_delta"] = (r["delta_ns"] / step_delta + 0.0) if shares else None  # no -0.0
    if shares:
        rows.sort(key=lambda r: (-sign * r["delta_ns"], -abs(r["delta_ns"]), r["component"]))
    else:  # no direction to explain: the largest changes either way first
        rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["component"]))
    return rows


def _gpus(report: dict[str, Any]) -> set[str] | None:
    """The GPU models the side's capture ran on (None for a report that does not record them)."""
    if any("gpus" not in i for i in report["inputs"]):
        return None
    return {g for i in report["inputs"] for g in i["gpus"]}


def inconclusive(b: dict[str, Any], a: dict[str, Any]) -> list[str]:
    """Why the two sides do not compare (empty when they do): other hardware, another config, steps found
    another way, a side that is one whole capture rather than steps, or a graph-capture trace (graphs captured,
    almost nothing run: it holds no step, so its "step" against a real one is no speed-up or slow-down)."""
    reasons = [f"{side} is a graph-capture trace (graphs captured, almost nothing run): no step to compare"
               for side, report in (("BEFORE", b), ("AFTER", a)) if report["steps"].get("capture_only")]
    gb, ga = _gpus(b), _gpus(a)
    if gb is not None and ga is not None and gb != ga:
        reasons.append(f"the captures ran on different GPUs ({', '.join(sorted(gb)) or 'none'} vs "
                       f"{', '.join(sorted(ga)) or 'none'}): step times do not compare")
    hb, ha = (b["floor"] or {}).get("hardware"), (a["floor"] or {}).get("hardware")
    if hb and ha and hb != ha:
        reasons.append(f"the configs describe different hardware ({hb} vs {ha}): budgets and floors differ")
    if (b["config"]["name"], b["config"].get("effective")) != (a["config"]["name"], a["config"].get("effective")):
        reasons.append(f"BEFORE and AFTER use different configs ({b['config']['name']} vs {a['config']['name']}): "
                       "budgets and floors differ; analyse both with one config")
    if b["steps"]["source"] != a["steps"]["source"]:
        reasons.append(f"steps were found differently ({', '.join(b['steps']['source'])} vs "
                       f"{', '.join(a['steps']['source'])}): the step is not the same unit; give both one --step")
    for side, report in (("BEFORE", b), ("AFTER", a)):
        if "whole_capture" in report["steps"]["source"]:
            reasons.append(f"{side} has no step markers: its step is the whole capture, whose length is the "
                           "capture's, not the program's; give --step REGEX")
    return reasons


def parse_percent(text: str) -> float:
    """'5%' or '5' -> 0.05; a bad value is an InputError naming the option."""
    value = text.strip().removesuffix("%")
    try:
        out = float(value) / 100
    except ValueError:
        raise InputError(f"--fail-if-slower {text!r}: not a percentage; write e.g. 5%") from None
    if out < 0:
        raise InputError(f"--fail-if-slower {text!r}: must be >= 0%")
    return out



def gate(doc: dict[str, Any], use_gate: bool, fail_if_slower: float | None,
         expect_faster: str | None) -> tuple[int, list[str]]:
    """Exit status and why: 12 when any gate option is asked of sides that do not compare (never a silent
    pass), else 13 slower than allowed, else 14 expected class not faster, else the AFTER verdict's analyze
    --gate code (with --gate), else 0."""
    reasons = []
    step = doc["step"]["p50_ns"]
    if (use_gate or fail_if_slower is not None or expect_faster is not None) and doc["inconclusive"]:
        reasons += [f"the diff is inconclusive: {r}" for r in doc["inconclusive"]]
        return INCONCLUSIVE_EXIT, reasons
    if fail_if_slower is not None and step["before"] and step["after"] > step["before"] * (1 + fail_if_slower):
        reasons.append(f"step p50 {step['after']} ns is {step['delta_fraction']:+.1%} against {step['before']} ns, "
                       f"beyond the allowed +{fail_if_slower:.1%}")
        return SLOWER_EXIT, reasons
    if expect_faster is not None:
        row = next((c for c in doc["classes"] if c["name"] == expect_faster), None)
        if row is None or not row["measured_ns"]["before"]:
            raise InputError(f"--expect-faster {expect_faster}: no such class in BEFORE; see its classes table")
        m = row["measured_ns"]
        if m["after"] > m["before"] * (1 - EXPECT_FASTER_MIN):
            reasons.append(f"{expect_faster} measured {m['after']} ns per step against {m['before']} ns: not "
                           f"faster by at least {EXPECT_FASTER_MIN:.0%}")
            return NOT_FASTER_EXIT, reasons
        reasons.append(f"{expect_faster} is {m['delta_fraction']:+.1%} per step")
    if use_gate:
        verdict = doc["verdict"]["after"]
        reasons.append(f"AFTER verdict {verdict}")
        return GATE_EXIT[verdict], reasons
    return 0, reasons


def diff(before: Side, after: Side) -> dict[str, Any]:
    """The ``tracekit.diff/v1`` document of two analysed sides."""
    b, a = before.report, after.report
    cb, ca = _classes(b), _classes(a)
    caveats = [f"BEFORE: {c}" for c in b["caveats"]] + [f"AFTER: {c}" for c in a["caveats"]]
    fb, fa = b["floor"] or {}, a["floor"] or {}
    gaps_b, gaps_a = b["host_gaps"]["by_cause"], a["host_gaps"]["by_cause"]
    coll_b, coll_a = b["exposed_comm"]["by_collective"], a["exposed_comm"]["by_collective"]
    return {
        "schema": DIFF_SCHEMA,
        "before": {"path": before.path, "kind": before.kind, "config": b["config"]["name"]},
        "after": {"path": after.path, "kind": after.kind, "config": a["config"]["name"]},
        "step": {"p50_ns": _delta(b["steps"]["step_ns_p50"], a["steps"]["step_ns_p50"]),
                 "p99_ns": _delta(b["steps"]["step_ns_p99"], a["steps"]["step_ns_p99"]),
                 "count": {"before": b["steps"]["count"], "after": a["steps"]["count"]},
                 "significant": significant(b, a)},
        "conclusive": not inconclusive(b, a),
        "inconclusive": inconclusive(b, a),
        "floor": {k: _delta(fb.get(k), fa.get(k)) for k in ("t_opt_ns", "t_sum_ns", "residual_ratio", "position")},
        "verdict": {"before": b["verdict"], "after": a["verdict"]},
        "changes": changes(b, a),
        "classes": [{"name": n, "communication": (cb.get(n) or ca.get(n))["communication"],
                     **{k: _delta((cb.get(n) or {}).get(k, 0), (ca.get(n) or {}).get(k, 0))
                        for k in ("measured_ns", "attributed_ns")},
                     "budget_ns": (ca.get(n) or cb.get(n) or {}).get("budget_ns")}
                    for n in sorted(set(cb) | set(ca))],
        "host_gaps": {"total_ns": _delta(b["host_gaps"]["total_ns"], a["host_gaps"]["total_ns"]),
                      "by_cause": {c: _delta(gaps_b.get(c, 0), gaps_a.get(c, 0))
                                   for c in sorted(set(gaps_b) | set(gaps_a))}},
        "exposed_comm": {"exposed_ns": _delta(b["exposed_comm"]["exposed_ns"], a["exposed_comm"]["exposed_ns"]),
                         "by_collective": {c: _delta((coll_b.get(c) or {}).get("exposed_ns", 0),
                                                     (coll_a.get(c) or {}).get("exposed_ns", 0))
                                           for c in sorted(set(coll_b) | set(coll_a))}},
        "reasons": [f"BEFORE: {r}" for r in b["reasons"]] + [f"AFTER: {r}" for r in a["reasons"]],
        "caveats": caveats,
    }
