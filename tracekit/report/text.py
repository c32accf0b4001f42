"""Text from a trace made safe and short for people: control characters escaped, Markdown and HTML markup
escaped, long names cut in the middle. Shared by every renderer (``render``, the HTML page, the plots)."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def inert(text: object) -> str:
    """Make untrusted text safe to print: control characters (ANSI escapes, newlines) become escapes."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


def inert_lines(text: object) -> str:
    """``inert`` per line: a verbatim block keeps its line breaks, every other control character is escaped."""
    return "\n".join(inert(line) for line in str(text).split("\n"))


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, keeping more of the tail (where kernel names
    carry their template arguments and signature, the part that tells one from another)."""
    if len(text) <= width:
        return text
    head = max(1, (width - 1) * 2 // 5)
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def markdown_escape(text: str) -> str:
    """Escape Markdown and HTML markup so the text renders literally in an issue tracker."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return escaped.replace("<", "&lt;").replace(">", "&gt;")
