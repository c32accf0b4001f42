"""Duration strings <-> int nanoseconds."""

from __future__ import annotations

import re

from .errors import ConfigError

_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAX_DURATION_NS = 10**15  # 11.6 days: far above any step or token time, far inside int64
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)\s*$")


def parse_duration_ns(text: str) -> int:
    """'41ms', '350us', '1.2s', '41000000ns' -> int ns. A unit is required."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(
            f"duration '{text}' not understood; write a number and a unit: 41ms, 350us, 1.2s, 900ns"
        )
    number = float(match.group(1)) * _UNITS_NS[match.group(2)]
    if not number < MAX_DURATION_NS:  # also catches 1e400 (infinity)
        raise ConfigError(f"duration '{text[:60]}' is too long; give at most {MAX_DURATION_NS / 1e9:.0f} s")
    value = round(number)
    if value <= 0:
        raise ConfigError(f"duration '{text}' must be > 0")
    return value


def format_ns(ns: float) -> str:
    """Human form with 3 significant digits: 41.2 ms, 350 us, 1.20 s."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"
