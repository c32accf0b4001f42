"""Kernel classes: ordered regex rules (first match wins) from ``classes.toml``.

Rules are applied to the distinct kernel names only, then joined back, so classifying millions of
kernels costs as much as classifying a few hundred names. Time matching no rule stays visible as
class ``other``; memory operations are the classes ``memcpy`` and ``memset``.

A name no rule claims takes the class of its op category where the store has one (``kernels.op_category``:
what the trace records the kernel to compute, in the store's neutral words, mapped to a class by
``[op_category]`` in ``classes.toml``): the name is the first signal, the recorded op the second.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import duckdb
import polars as pl

from tracekit.parsers.schema import OP_CATEGORIES

OTHER = "other"


@dataclass(frozen=True)
class Rule:
    """Kernels whose name matches ``pattern`` belong to ``cls``."""

    cls: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class ClassRules:
    """The ordered rules, each class's floor parts, which classes are communication, and the class of each op
    category (for names no rule claims)."""

    rules: tuple[Rule, ...]
    floor_parts: dict[str, tuple[str, ...]]
    communication: frozenset[str]
    op_classes: dict[str, str] = field(default_factory=dict)

    def classify(self, name: str, op_category: str | None = None) -> str:
        for rule in self.rules:
            if rule.pattern.search(name):
                return rule.cls
        return self.op_classes.get(op_category, OTHER) if op_category else OTHER


def _parse(doc: dict) -> tuple[tuple[Rule, ...], dict[str, tuple[str, ...]], frozenset[str], dict[str, str]]:
    rules = tuple(Rule(r["class"], re.compile(r["pattern"], re.IGNORECASE)) for r in doc.get("rule", []))
    floor = {k: tuple(v) for k, v in doc.get("floor", {}).items()}
    comm = frozenset(doc.get("kinds", {}).get("communication", []))
    op_classes = dict(doc.get("op_category", {}))
    unknown = sorted(set(op_classes) - set(OP_CATEGORIES)) + sorted(set(op_classes.values()) - set(floor))
    if unknown:
        raise ValueError(f"classes.toml [op_category]: not an op category or class: {unknown}")
    return rules, floor, comm, op_classes


@lru_cache(maxsize=1)
def load_rules() -> ClassRules:
    """The rules of ``classes.toml`` (documented in docs/classes.md)."""
    text = (resources.files("tracekit.budgets") / "classes.toml").read_text(encoding="utf-8")
    return ClassRules(*_parse(tomllib.loads(text)))


def class_table(names: Iterable[str], rules: ClassRules, categories: dict[str, str] | None = None) -> pl.DataFrame:
    """A (name, class) frame for the given distinct kernel names (``categories``: a name's op category)."""
    distinct = sorted(set(names))
    categories = categories or {}
    return pl.DataFrame({"name": distinct, "class": [rules.classify(n, categories.get(n)) for n in distinct]},
                        schema={"name": pl.String, "class": pl.String})


def name_categories(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each kernel name's op category: the one holding most of its time, where the store records any."""
    return dict(con.execute("""
        SELECT name, arg_max(op_category, total_ns) FROM (
            SELECT name, op_category, sum(dur_ns) AS total_ns FROM kernels WHERE op_category IS NOT NULL GROUP BY ALL)
        GROUP BY name""").fetchall())


def register_classes(con: duckdb.DuckDBPyConnection, rules: ClassRules) -> None:
    """Create the temp view ``kernel_class(name, class)`` over the store's distinct kernel names."""
    names = [r[0] for r in con.execute("SELECT DISTINCT name FROM kernels").fetchall()]
    frame = class_table(names, rules, name_categories(con))  # noqa: F841 - read by DuckDB's replacement scan
    con.execute("CREATE OR REPLACE TEMP TABLE kernel_class AS SELECT * FROM frame")


def class_summary(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Time per class over the whole store: instances, total, share, distinct kernels (memops included)."""
    rules = load_rules()
    register_classes(con, rules)
    frame = con.sql("""
        WITH ops AS (
            SELECT c.class, k.name, k.dur_ns FROM kernels k JOIN kernel_class c USING (name)
            UNION ALL
            SELECT m.kind AS class, m.kind AS name, m.dur_ns FROM memops m
        )
        SELECT class, count(*) AS instances, sum(dur_ns)::BIGINT AS total_ns,
               round(100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER (), 1) AS time_pct,
               count(DISTINCT name) AS kernels
        FROM ops GROUP BY class ORDER BY total_ns DESC, class
    """).pl()
    comm = rules.communication
    return frame.with_columns(pl.col("class").is_in(list(comm)).alias("communication"))


#: Classes of memory operations (copies and sets): GPU time, but no kernel a class rule could claim.
MEMOP_CLASSES = frozenset({"memcpy", "memset"})


def other_share_pct(summary: pl.DataFrame) -> float:
    """Percent of the kernel time in ``summary`` (a ``class_summary`` frame) that no rule classifies: memory
    copies and sets are left out of the total, as no rule could claim them."""
    total = int(summary.filter(~pl.col("class").is_in(list(MEMOP_CLASSES)))["total_ns"].sum() or 0)
    other = int(summary.filter(pl.col("class") == OTHER)["total_ns"].sum() or 0)
    return 100.0 * other / total if total else 0.0
