"""Per-class budgets: each kernel class's share of the floor, from the floor parts it maps to.

A budget is a lower bound for its class, as t_opt is for the step: each part's floor_ns is its own roofline
at physical peaks, so no real kernel of the class is faster (docs/lower-bounds.md checks that against
published kernels). The calibrated per-part expected_ns never enters a budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from tracekit.budgets.classify import ClassRules


class FloorPart(Protocol):
    """What a budget needs of one floor part (``tracekit.floor.ClassPart``)."""

    name: str
    floor_ns: int


def class_budgets(parts: Iterable[FloorPart], rules: ClassRules) -> dict[str, int]:
    """Budget in ns per step per GPU for every class that maps to at least one floor part.

    A class's budget is the sum of its parts' own roofline floors (each part's max over resources, at
    physical peaks).
    """
    by_part = {p.name: int(p.floor_ns) for p in parts}
    budgets: dict[str, int] = {}
    for cls, names in rules.floor_parts.items():
        present = [by_part[n] for n in names if n in by_part]
        if present:
            budgets[cls] = sum(present)
    return budgets
