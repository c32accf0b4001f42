"""The one error type that the CLI turns into a one-line message and exit status 2."""

from __future__ import annotations


class InputError(Exception):
    """A bad input file or option. The message is one line naming the file or option and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
