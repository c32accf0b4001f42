"""Text from a trace made safe and short for people: control characters escaped, Markdown and HTML markup
escaped, long names cut in the middle. Shared by every renderer (``render``, the HTML page, the plots)."""

from __future__ import annotations

import re
import unicodedata

from tracekit.files import printable

# Markdown and GitHub markup: emphasis, code, links and images, tables, strike-through, headings, math ($),
# HTML entities; '<', '>' and '&' become entities below. Autolinks are broken after their scheme or www.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#!$])")
_AUTOLINK = re.compile(r"(?i)(://|(?<=www)\.|@)")
# What a spreadsheet reads as the start of a formula, once spaces are trimmed and full-width forms folded.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def inert(text: object) -> str:
    """Make untrusted text safe to print: control characters and the characters that change how the text
    around them displays (bidi controls, line separators, zero-width: ``tracekit.files.DISPLAY_CONTROLS``)
    become visible escapes; a name holding one could otherwise display as another name."""
    return printable(text)


def inert_lines(text: object) -> str:
    """``inert`` per line: a verbatim block keeps its line breaks, every other control character is escaped."""
    return "\n".join(inert(line) for line in str(text).split("\n"))


def starts_formula(text: str) -> bool:
    """Whether a spreadsheet could take the cell ``text`` as a formula: after leading spaces (any Unicode
    space) and with full-width and compatibility forms folded (NFKC: '＝' is '='), it starts with = + - @ or
    a tab or line break."""
    folded = unicodedata.normalize("NFKC", text[:64]).lstrip(" \t\u00a0\u2000\u2001\u2002\u2003\u2009\u3000")
    return folded[:1] in FORMULA_STARTS or text[:1] in FORMULA_STARTS


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, keeping more of the tail (where kernel names
    carry their template arguments and signature, the part that tells one from another)."""
    if len(text) <= width:
        return text
    head = max(1, (width - 1) * 2 // 5)
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def markdown_escape(text: str) -> str:
    """Escape Markdown and HTML markup so the text renders literally in an issue tracker: markup characters
    backslash-escaped, '&', '<' and '>' as entities, autolinks (``http://``, ``www.``, ``a@b``) broken."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)
    return _AUTOLINK.sub(lambda m: {"://": r":\/\/", ".": r"\.", "@": r"\@"}[m.group(1)], escaped)
