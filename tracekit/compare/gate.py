"""The exit status of `tracekit diff` and why: a gate passes or fails only on what the diff supports.

``--fail-if-slower PCT`` fails (13) on a regression the noise test supports (the bootstrap interval on the
step median's change lies above zero, the change is past the practical threshold) that is also beyond PCT;
a change within noise passes, however large its point estimate. A side with too few steps to test is judged
by its point estimate, and the reason says it was untested. Two whole captures (no step markers) that
otherwise compare are gated on the kernel figure (``tracekit.compare.kernels``), never on the captures'
lengths. Sides that do not compare fail every gate option with 12 (never a silent pass).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from tracekit.analysis.options import GATE_EXIT
from tracekit.compare.kernels import kernel_figure
from tracekit.errors import InputError
from tracekit.schema.diff import Diff, Gate, Tested
from tracekit.schema.report import Report

SLOWER_EXIT = 13  # --fail-if-slower: the AFTER step is slower than BEFORE by more than the allowance
NOT_FASTER_EXIT = 14  # --expect-faster CLASS: the class's per-step time did not fall by EXPECT_FASTER_MIN
INCONCLUSIVE_EXIT = GATE_EXIT["inconclusive"]  # a gate option on sides that do not compare
EXPECT_FASTER_MIN = 0.01  # a class must lose at least 1% of its BEFORE time to count as faster


def parse_percent(text: str, option: str = "--fail-if-slower") -> float:
    """'5%' or '5' -> 0.05; a bad value is an InputError naming the option."""
    value = text.strip().removesuffix("%")
    try:
        out = float(value) / 100
    except ValueError:
        raise InputError(f"{option} {text!r}: not a percentage; write e.g. 5%") from None
    if not math.isfinite(out):
        raise InputError(f"{option} {text[:40]!r}: not a finite percentage; write e.g. 5%")
    if out < 0:
        raise InputError(f"{option} {text!r}: must be >= 0%")
    return out


def _interval(change: Tested) -> str:
    point = f"{change.delta_fraction or 0:+.1%}"
    n_b, n_a = change.samples
    if change.low_fraction is None:
        return f"{point} (untested: {n_b} vs {n_a} steps)"
    return (f"{point} [{change.low_fraction:+.1%}, {change.high_fraction:+.1%}] "
            f"({change.confidence:.0%} bootstrap interval, {n_b} vs {n_a} steps)")


def _slower(doc: Diff, allowance: float) -> tuple[bool, str]:
    """Whether AFTER is slower than allowed, and the sentence that says so either way."""
    if doc.gate_basis == "kernels":
        fig = doc.kernel_figure
        assert fig is not None, "a kernel gate has its figure"
        frac = fig.delta_fraction or 0.0
        head = (f"no step markers on either side: gated on the kernel figure ({fig.kernels} kernels both ran, "
                f"BEFORE's launches at AFTER's time per launch) {frac:+.1%} (untested: no per-step samples)")
        return frac > allowance, f"{head}, {'beyond' if frac > allowance else 'within'} the allowed +{allowance:.1%}"
    step = doc.noise.step
    frac = step.delta_fraction or 0.0
    blamed = doc.noise.regressions
    named = f"; regressed: {', '.join(blamed)}" if blamed else ""
    if step.verdict == "untested":
        over = frac > allowance
        return over, (f"step median {_interval(step)}: too few steps for a noise test, judged by the point "
                      f"estimate: {'beyond' if over else 'within'} the allowed +{allowance:.1%}{named}")
    if step.verdict == "regression" and frac > allowance:
        return True, f"step median regression {_interval(step)}, beyond the allowed +{allowance:.1%}{named}"
    why = "within noise" if step.verdict == "within noise" else f"a {step.verdict}"
    return False, f"step median {_interval(step)}: {why}, so --fail-if-slower {allowance:.1%} passes{named}"


def _expect_faster(doc: Diff, report_b: Report | None, report_a: Report | None, cls: str) -> tuple[bool, str]:
    if doc.gate_basis == "kernels" and report_b is not None and report_a is not None:
        fig = kernel_figure(report_b, report_a, cls)
        if fig is None:
            raise InputError(f"--expect-faster {cls}: no kernel of that class on both sides; see the kernels table")
        frac = fig.delta_fraction or 0.0
        return frac <= -EXPECT_FASTER_MIN, f"{cls} time per launch {frac:+.1%} (kernel figure)"
    row = next((c for c in doc.classes if c.name == cls), None)
    if row is None or not row.measured_ns.before:
        raise InputError(f"--expect-faster {cls}: no such class in BEFORE; see its classes table")
    m = row.measured_ns
    ok = m.after <= m.before * (1 - EXPECT_FASTER_MIN)
    if not ok:
        return False, (f"{cls} measured {m.after / 1e6:.3f} ms per step against {m.before / 1e6:.3f} ms: "
                       f"not faster by at least {EXPECT_FASTER_MIN:.0%}")
    return True, f"{cls} is {m.delta_fraction:+.1%} per step"


def gate(doc: Diff, use_gate: bool, fail_if_slower: float | None, expect_faster: str | None,
         reports: tuple[Report, Report] | None = None) -> tuple[int, list[str]]:
    """Exit status and why: 12 when any gate option is asked of sides that do not compare, else 13 slower
    than allowed (a supported regression), else 14 expected class not faster, else the AFTER verdict's analyze
    --gate code (with --gate), else 0. ``reports``: both sides' reports (the kernel-figure gate reads them)."""
    reasons: list[str] = []
    asked = use_gate or fail_if_slower is not None or expect_faster is not None
    if asked and doc.gate_basis is None:
        return INCONCLUSIVE_EXIT, [f"the diff is inconclusive: {r}" for r in doc.inconclusive]
    if fail_if_slower is not None:
        slower, why = _slower(doc, fail_if_slower)
        reasons.append(why)
        if slower:
            return SLOWER_EXIT, reasons
    if expect_faster is not None:
        ok, why = _expect_faster(doc, *(reports or (None, None)), expect_faster)
        reasons.append(why)
        if not ok:
            return NOT_FASTER_EXIT, reasons
    if use_gate:
        verdict = doc.verdict.after
        reasons.append(f"AFTER verdict {verdict}")
        return GATE_EXIT[verdict], reasons
    return 0, reasons


def gated_diff(sides: list[Any], threshold: float, use_gate: bool, fail_if_slower: float | None,
               expect_faster: str | None, options_given: bool, against: str | None = None) -> dict[str, Any]:
    """The ``tracekit.diff/v1`` document of two loaded sides (``tracekit.compare.diff.Side``) with its ``gate``
    section: what `tracekit diff` prints and `tracekit.diff` returns (``against``: BEFORE's baseline name), as
    JSON's builtins (``msgspec.to_builtins`` of the typed ``tracekit.schema.diff.Diff``)."""
    from tracekit.compare.diff import diff

    doc = diff(*sides, threshold=threshold)
    if against is not None:
        doc.before.baseline = against
    if any(s.kind == "report" for s in sides) and options_given:
        doc.caveats.append("analysis options apply to traces only; reports are compared as they were written")
    code, reasons = gate(doc, use_gate, fail_if_slower, expect_faster, (sides[0].typed, sides[1].typed))
    doc.gate = Gate(gate=use_gate, fail_if_slower=fail_if_slower, expect_faster=expect_faster, exit_status=code,
                    reasons=reasons)
    return msgspec.to_builtins(doc)
