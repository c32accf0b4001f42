"""What every API result shares: it renders itself to any format, writes itself, and shows in a notebook."""

from __future__ import annotations

import re
from pathlib import Path

from tracekit.errors import InputError
from tracekit.files import write_atomically
from tracekit.floor import NEAR_FLOOR_THRESHOLD, ConfigError
from tracekit.floor import parse_sets as floor_parse_sets
from tracekit.report.document import Document
from tracekit.report.render import FORMATS, render

#: --format by the suffix of an output path.
SUFFIX_FORMATS = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".csv": "csv", ".html": "html",
                  ".htm": "html", ".txt": "table"}

__all__ = ["FORMATS", "NEAR_FLOOR_THRESHOLD", "Rendered", "available_cores", "check_step_regex", "overrides_of"]


def available_cores() -> int:
    """The cores this process may run on (``jobs`` unless given is ``store.inputs.auto_jobs``, as the CLI's)."""
    from tracekit.store.inputs import available_cores as cores

    return cores()


class Rendered:
    """A result that renders itself: ``render(fmt)`` in any of ``FORMATS``, ``write(path)`` atomically (the
    format from the suffix unless given), and Markdown in a notebook."""

    def document(self) -> Document:
        raise NotImplementedError

    def render(self, fmt: str = "markdown", width: int | None = None) -> str:
        """The result as the CLI prints it with ``--format fmt`` (``table`` fits ``width`` columns)."""
        if fmt not in FORMATS:
            raise InputError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
        return render(self.document(), fmt, width)

    def write(self, path: str | Path, fmt: str | None = None) -> Path:
        """Write the rendered result to ``path`` atomically; the format from its suffix unless given."""
        path = Path(path)
        fmt = fmt or SUFFIX_FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise InputError(f"{path}: give fmt=, or a suffix of {', '.join(SUFFIX_FORMATS)}")
        write_atomically(path, self.render(fmt))
        return path

    def _repr_markdown_(self) -> str:  # Jupyter shows the Markdown rendering
        return self.render("markdown")


def overrides_of(config: str | None, batch: int | None = None, context: int | None = None,
                 sets: dict[str, object] | list[str] | tuple[str, ...] | None = None) -> dict[str, str]:
    """The config overrides as the CLI's ``--batch``, ``--context`` and ``--set KEY=VALUE`` give them."""
    if isinstance(sets, dict):
        overrides = {str(k): str(v) for k, v in sets.items()}
    else:
        try:
            overrides = floor_parse_sets(tuple(sets or ()))
        except ConfigError as exc:
            raise InputError(f"sets: {exc}") from None
    for name, value in (("batch", batch), ("context_tokens", context)):
        if value is not None:
            if not isinstance(value, int) or value < 1:
                raise InputError(f"{'context' if name == 'context_tokens' else name}={value!r}: an integer >= 1")
            overrides[name] = str(value)
    if overrides and not config:
        raise InputError("batch, context and sets need a config")
    return overrides


def check_step_regex(step: str | None) -> None:
    """A ``--step`` regex that does not compile is a usage error naming it."""
    if step is not None:
        try:
            re.compile(step)
        except re.error as exc:
            raise InputError(f"step {step!r} is not a regex ({exc})") from None
