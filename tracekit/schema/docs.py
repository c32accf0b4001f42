"""docs/report-schema.md read as data: the keys its field table documents, and what it says of one key.

The table's cells write each section as ``{key (remark), key {nested}, key: [{nested}], ...}``; an upper-case
key (``CLASS``), or a group's one item ``name: value`` that is no list (``{class: {...}}``), stands for the keys
of a map. ``documented()`` gives that tree (``tests/test_report_schema.py``
checks it against ``tracekit.schema.report.Report``); ``explain(term)`` gives the row, the remark and the
definitions behind a key such as ``exposed_comm.overlap_fraction`` (the MCP server's ``explain`` tool). The
document ships inside the package (``report-schema.md`` here is a link to ``docs/report-schema.md``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracekit.errors import InputError

DOC = Path(__file__).with_name("report-schema.md")
Tree = dict[str, "Tree | None"]
_OPEN, _CLOSE = "{[(", "}])"
_CELL = re.compile(r"(?<!\\)\|")


def group_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``start`` (any of (), [], {} nested)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPEN:
            depth += 1
        elif text[i] in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced brackets in {text[start:start + 80]!r}")


def _items(body: str) -> list[str]:
    """The comma-separated items of a brace group's inside, split at depth 0."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += (ch in _OPEN) - (ch in _CLOSE)
        if ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    return [*items, body[start:]]


def _nested_at(rest: str) -> int | None:
    """Where the first brace group of an item's text after its key starts (outside parenthesised remarks and
    lists of plain values), or None."""
    i = 0
    while i < len(rest):
        if rest[i] == "(":
            i = group_end(rest, i)
            continue
        if rest[i] == "{":
            return i
        if rest[i] == "[" and "{" not in rest[i:group_end(rest, i)]:
            i = group_end(rest, i)  # a list of values ('seq' | 'order', or words): no keys inside
            continue
        i += 1
    return None


def _entries(group: str) -> list[tuple[str, str, str | None]]:
    """(key, the item's text after the key, its nested group or None) for each item of ``{...}``."""
    if not (group.startswith("{") and group.endswith("}")):
        raise ValueError(f"not a brace group: {group[:80]!r}")
    out = []
    for item in _items(group[1:-1]):
        item = item.strip()
        key = re.match(r"[A-Za-z_]\w*", item)
        if not key:
            raise ValueError(f"not a key in the schema doc: {item[:80]!r}")
        rest = item[key.end():]
        at = _nested_at(rest)
        out.append((key.group(0), rest, rest[at:group_end(rest, at)] if at is not None else None))
    return out


def placeholder(entries: list[tuple[str, str, str | None]]) -> str | None:
    """The key standing for a map's keys in a group's entries (``CLASS``, or a lone ``class: ...`` that is not
    a list), or None for a group of fixed keys."""
    upper = next((k for k, _, _ in entries if k.isupper()), None)
    if upper is not None:
        return upper
    if len(entries) == 1:
        key, rest, _ = entries[0]
        value = rest.lstrip()
        if value.startswith(":") and not value[1:].lstrip().startswith("["):
            return key
    return None


def map_key(tree: Tree | None) -> str | None:
    """The placeholder key of a parsed group (``documented()``'s node) that is a map, else None."""
    if not tree:
        return None
    keys = list(tree)
    return keys[0] if len(keys) == 1 and keys[0].isupper() else None


def parse_group(group: str) -> Tree:
    """``{a, b (remark), c {d, e}, f: [{g}], m {class: {h}}}`` -> {a: None, b: None, c: {d, e}, f: {g},
    m: {CLASS: {h}}}."""
    entries = _entries(group)
    mapped = placeholder(entries)  # a map's placeholder is upper-cased in the tree (``{CLASS: ...}``)
    return {key.upper() if key == mapped else key: parse_group(nested) if nested else None
            for key, _, nested in entries}


def rows(text: str | None = None) -> dict[str, str]:
    """The field table's rows: top-level key -> its meaning cell."""
    text = text if text is not None else DOC.read_text(encoding="utf-8")
    table = text[text.index("| field | meaning |"):text.index("\n## ")]
    out = {}
    for line in table.splitlines()[2:]:
        cells = _CELL.split(line)
        key = re.fullmatch(r"\s*`(\w+)`\s*", cells[1])
        if not key:
            raise ValueError(f"a row of docs/report-schema.md names no field: {line[:80]!r}")
        out[key.group(1)] = cells[2].strip()
    return out


def _cell_keys(cell: str) -> list[list[str]]:
    """The key paths a row names: '`before`, `after`' -> [['before'], ['after']]; '`results[].source`' ->
    [['results', 'source']]; '`changes[]`' -> [['changes']]."""
    return [[p for p in name.replace("[]", "").split(".") if p] for name in re.findall(r"`([\w\[\].]+)`", cell)]


def table_tree(text: str, heading: str) -> Tree:
    """The keys of the field table under ``heading`` of a sibling document (docs/reconcile.md's JSON tables):
    a row may name several keys (their meaning is shared) and nested ones (``results[].floor``)."""
    start = text.index("| field | meaning |", text.index(heading))
    end = text.find("\n\n", start)
    tree: Tree = {}
    for line in text[start:end if end >= 0 else len(text)].splitlines()[2:]:
        cells = _CELL.split(line)
        group = _group_of(cells[2])
        for path in _cell_keys(cells[1]):
            node = tree
            for part in path[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]  # type: ignore[assignment]
            node[path[-1]] = parse_group(group) if group else node.get(path[-1])
    return tree


def aliases(text: str, names: dict[str, str]) -> dict[str, Tree]:
    """Groups a document defines once in a sentence (``A delta is `{before, after, ...}```) by the name the
    Structs give them: ``names`` maps a Struct name to the words that open its sentence."""
    out = {}
    for struct, words in names.items():
        at = text.index(words)
        group = _group_of(text[at:])
        if group is None:
            raise ValueError(f"{words!r} defines no group")
        out[struct] = parse_group(group)
    return out


def _group_of(meaning: str) -> str | None:
    start = meaning.find("{")
    return meaning[start:group_end(meaning, start)] if start >= 0 else None


def documented(text: str | None = None) -> Tree:
    """Every key the field table documents, as a tree (None for a leaf)."""
    return {key: parse_group(g) if (g := _group_of(meaning)) else None for key, meaning in rows(text).items()}


def _remark(key: str, rest: str) -> str:
    """An item's own words: its key and remark, without the nested group."""
    at = _nested_at(rest)
    return " ".join(f"{key}{rest[:at] if at is not None else rest}".split()).rstrip(":")


def explain(term: str) -> dict[str, Any]:
    """What docs/report-schema.md says of a key (``steps.step_ns_p50``; list items and map keys are skipped,
    so ``classes.ratio`` and ``exposed_comm.by_collective.exposed_ns`` work), a verdict or a gap cause: the
    top-level row, the key's own remark, and the definitions that name it."""
    text = DOC.read_text(encoding="utf-8")
    table = rows(text)
    parts = [p for p in term.strip().split(".") if p]
    if not parts:
        raise InputError("explain: give a report key (e.g. exposed_comm.overlap_fraction), a verdict or a cause")
    found: dict[str, Any] = {"term": term, "document": "docs/report-schema.md", "key": None, "row": None,
                             "remark": None, "definitions": []}
    if parts[0] in table:
        found["row"] = table[parts[0]]
        group, path, remark = _group_of(table[parts[0]]), [parts[0]], None
        for part in parts[1:]:
            entries = {k: (rest, nested) for k, rest, nested in _entries(group)} if group else {}
            mapped = placeholder(_entries(group)) if group else None
            if part not in entries and mapped is not None:  # a map: step through its placeholder
                _, group = entries[mapped]
                entries = {k: (rest, nested) for k, rest, nested in _entries(group)} if group else {}
            if part not in entries:
                raise InputError(f"explain {term}: {'.'.join(path)} has no key {part!r} in docs/report-schema.md")
            rest, group = entries[part]
            remark = _remark(part, rest)
            path.append(part)
        found["key"], found["remark"] = ".".join(path), remark
    words = re.compile(rf"(?<![\w-]){re.escape(parts[-1])}(?![\w-])")
    tokens = {t.rstrip("s") for p in parts for t in p.lower().split("_")}
    definitions = text[text.index("## Definitions"):]
    for para in re.split(r"\n(?=- \*\*|## )", definitions):
        title = re.match(r"- \*\*([^*]+)\*\*", para)
        if title and (words.search(para) or {w.rstrip("s") for w in title.group(1).lower().split()} <= tokens):
            found["definitions"].append(" ".join(para[2:].split()))
    if found["row"] is None and not found["definitions"]:
        raise InputError(f"explain {term}: not a key, verdict or cause of docs/report-schema.md; its top-level "
                         f"keys are {', '.join(table)}")
    return found
