"""The one exception the floor raises for bad input."""


class ConfigError(ValueError):
    """A configuration problem; the message is one line: what is wrong (key, option, file) and what to do."""
