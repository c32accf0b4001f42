"""Per-class budgets: each kernel class's share of the floor, from the floor parts it maps to."""

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

    A class's budget is the sum of its parts' own roofline floors (each part's max over resources).
    """
    by_part = {p.name: int(p.floor_ns) for p in parts}
    budgets: dict[str, int] = {}
    for cls, names in rules.floor_parts.items():
        present = [by_part[n] for n in names if n in by_part]
        if present:
            budgets[cls] = sum(present)
    return budgets
