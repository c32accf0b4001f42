"""The floor's error for a bad config, option or catalog entry (ConfigError).

floor/ stands alone (standard library only, nothing of tracekit), so it has its own error type; the tracekit CLI
turns a ConfigError into a one-line usage error with exit status 2, as it does tracekit.errors.InputError.
"""


class ConfigError(ValueError):
    """A configuration problem; the message is one line: what is wrong (key, option, file) and what to do."""
