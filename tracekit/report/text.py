"""Untrusted text made safe to show: every renderer passes names that came from a trace through here."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def inert(text: object) -> str:
    """Make untrusted text safe to print: control characters (ANSI escapes, newlines) become escapes."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


def markdown_escape(text: str) -> str:
    """Escape Markdown and HTML markup so the text renders literally in an issue tracker."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return escaped.replace("<", "&lt;").replace(">", "&gt;")
