"""Whether two analysed sides compare, as a figure: each check (GPU, config hardware, config, step source,
step markers, graph capture, capture settings) passed, failed or unknown, and the share of the known ones
that passed. A failed blocking check makes the diff ``inconclusive`` with its reason."""

from __future__ import annotations

from typing import Any

from tracekit.schema.diff import Check, Comparability
from tracekit.schema.report import Report

SIDES = ("BEFORE", "AFTER")


def _gpus(report: Report) -> set[str] | None:
    """The GPU models the side's capture ran on (None for a report that does not record them)."""
    if any(i.gpus is None for i in report.inputs):
        return None
    return {g for i in report.inputs for g in i.gpus or ()}


def _check(name: str, before: Any, after: Any, same: bool | None, blocking: bool, reason: str) -> Check:
    return Check(name=name, before=before, after=after, same=same, blocking=blocking,
                 reason=reason if same is False else None)


def _list(values: Any) -> str:
    return ", ".join(sorted(values)) if values else "none"


def checks(b: Report, a: Report) -> list[Check]:
    """Every comparability check of BEFORE ``b`` against AFTER ``a`` (``same`` None: not recorded)."""
    out = []
    cap = [r.steps.capture_only for r in (b, a)]
    out.append(_check("graph_capture", cap[0], cap[1], not any(cap), True, "; ".join(
        f"{side} is a graph-capture trace (graphs captured, almost nothing run): no step to compare"
        for side, c in zip(SIDES, cap, strict=True) if c)))
    gb, ga = _gpus(b), _gpus(a)
    out.append(_check("gpu", sorted(gb) if gb is not None else None, sorted(ga) if ga is not None else None,
                      None if gb is None or ga is None else gb == ga, True,
                      f"the captures ran on different GPUs ({_list(gb)} vs {_list(ga)}): step times do not compare"))
    hb, ha = (b.floor.hardware if b.floor else None), (a.floor.hardware if a.floor else None)
    out.append(_check("config_hardware", hb, ha, None if not (hb and ha) else hb == ha, True,
                      f"the configs describe different hardware ({hb} vs {ha}): budgets and floors differ"))
    cb, ca = (b.config.name, b.config.effective), (a.config.name, a.config.effective)
    out.append(_check("config", cb[0], ca[0], cb == ca, True,
                      f"BEFORE and AFTER use different configs ({cb[0]} vs {ca[0]}): budgets and floors differ; "
                      "analyse both with one config"))
    sb, sa = b.steps.source, a.steps.source
    out.append(_check("step_source", sb, sa, sb == sa, True,
                      f"steps were found differently ({', '.join(sb)} vs {', '.join(sa)}): the step is not the "
                      "same unit; give both one --step"))
    whole = ["whole_capture" in r.steps.source for r in (b, a)]
    out.append(_check("step_markers", not whole[0], not whole[1], not any(whole), True, "; ".join(
        f"{side} has no step markers: its step is the whole capture, whose length is the capture's, not the "
        "program's; give --step REGEX" for side, w in zip(SIDES, whole, strict=True) if w)))
    rb, ra = len({r for i in b.inputs for r in i.ranks}), len({r for i in a.inputs for r in i.ranks})
    out.append(_check("ranks", rb, ra, rb == ra, True,
                      f"the captures hold {rb} vs {ra} ranks: not the same job layout"))
    fb, fa = sorted({i.format for i in b.inputs}), sorted({i.format for i in a.inputs})
    out.append(_check("capture_format", fb, fa, fb == fa, False,
                      f"the captures come from different profilers ({_list(fb)} vs {_list(fa)}): kernel times "
                      "compare, host-side timings may not"))
    kb = (b.config.step_regex, b.config.skip_steps)
    ka = (a.config.step_regex, a.config.skip_steps)
    out.append(_check("step_options", list(kb), list(ka), kb == ka, False,
                      f"the sides were analysed with other --step/--skip-steps ({kb} vs {ka})"))
    return out


def comparability(b: Report, a: Report) -> Comparability:
    """``{fraction (passed / known checks), checks}``."""
    rows = checks(b, a)
    known = [r for r in rows if r.same is not None]
    return Comparability(fraction=sum(r.same for r in known) / len(known) if known else None, checks=rows)


def blocking_reasons(section: Comparability, skip: frozenset[str] = frozenset()) -> list[str]:
    """The reasons of the failed blocking checks (those named in ``skip`` left out)."""
    return [r.reason or "" for r in section.checks if r.same is False and r.blocking and r.name not in skip]


def notes(section: Comparability) -> list[str]:
    """The failed non-blocking checks' reasons."""
    return [r.reason or "" for r in section.checks if r.same is False and not r.blocking]
