"""A config draft (``tracekit.analysis.config_draft``) as TOML text, each field commented with how it was found."""

from __future__ import annotations

from typing import Any

from tracekit.analysis.config_draft import Draft


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    text = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text) + '"'


def _comment(text: str) -> str:
    return " ".join(text.split()).replace("\n", " ")


def draft_toml(draft: Draft) -> str:
    """The TOML text: the config's keys, then ``[model_spec]``; ``inferred:`` or ``assumed:`` after each."""
    lines = ["# A config drafted from a trace by `tracekit config-draft`. Every field says how it was found:",
             "# 'inferred' from the trace, or 'assumed' (check it).",
             "# Use it with: tracekit analyze FILE --config THIS.toml",
             ""]
    width = max(len(k) for k, _, _ in draft.config + draft.model)
    lines += [f"{k.ljust(width)} = {_value(v)}  # {_comment(how)}" for k, v, how in draft.config]
    lines += ["", "[model_spec]"]
    lines += [f"{k.ljust(width)} = {_value(v)}  # {_comment(how)}" for k, v, how in draft.model]
    return "\n".join(lines) + "\n"
