"""The base of every error tracekit reports as one line and exit status 2 (the CLI catches it).

``floor/`` stands alone and has its own ``ConfigError`` (floor/errors.py); the CLI catches both.
"""

from __future__ import annotations


class TracekitError(Exception):
    """An expected failure caused by the user's input; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class InputError(TracekitError):
    """A bad input file or option. The message names the file or option and the problem."""
