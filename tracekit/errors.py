"""tracekit's error for a bad input file or option (InputError): the CLI prints it as one line and exits 2.

The standalone floor model raises its own tracekit.floor.ConfigError for configs; the CLI treats both alike.
"""

from __future__ import annotations


class InputError(Exception):
    """A bad input file or option. The message is one line naming the file or option and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
