"""Progress within one input file: a reader says how far it is (``report``); whoever shows progress listens
(``listening``). Nothing listens unless a progress bar is on, so a report costs one check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_listener: Callable[[str, float], None] | None = None


@contextmanager
def listening(listener: Callable[[str, float], None]) -> Iterator[None]:
    """Call ``listener(path, fraction)`` for every report while the block runs."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous


def report(path: str | Path, fraction: float) -> None:
    """The reader of ``path`` is ``fraction`` (0..1) of the way through it."""
    if _listener is not None:
        _listener(str(path), min(max(fraction, 0.0), 1.0))
