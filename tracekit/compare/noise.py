"""Is a change between two captures real? A bootstrap confidence interval on the difference of medians of
the per-step samples of both sides, plus a practical threshold (docs/reconcile.md, "Noise").

A change reads ``regression`` (or ``improvement``) only when the whole interval lies on one side of zero
and the point estimate moves the step by at least the practical threshold; otherwise ``within noise``.
With fewer than ``MIN_SAMPLES`` steps on a side there is no spread to test against: the change is
``untested`` and judged by the practical threshold alone, which the verdict says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.schema.diff import Tested

RESAMPLES = 4_000  # bootstrap resamples per comparison
CONFIDENCE = 0.95  # two-sided interval
MIN_SAMPLES = 3  # steps per side below which no interval is computed
PRACTICAL_THRESHOLD = 0.01  # a change under 1% of BEFORE's step median is no change, however certain
SEED = 0  # a fixed seed: the same inputs give the same interval


@dataclass(frozen=True)
class Change:
    """The change of one quantity's median between BEFORE and AFTER, relative to a scale (BEFORE's step)."""

    verdict: str  # 'regression' | 'improvement' | 'within noise' | 'untested'
    delta_ns: int  # median(AFTER) - median(BEFORE)
    low_ns: int | None  # the interval on delta_ns (None when untested)
    high_ns: int | None
    scale_ns: int  # what the fractions divide by: BEFORE's step median
    n_before: int
    n_after: int

    def fraction(self, ns: int | None) -> float | None:
        return None if ns is None or not self.scale_ns else ns / self.scale_ns

    @property
    def supported(self) -> bool:
        """The interval excludes zero (a change the samples support, whatever its size)."""
        return self.low_ns is not None and self.high_ns is not None and (self.low_ns > 0 or self.high_ns < 0)

    def section(self) -> Tested:
        """The tested change as the diff document holds it (``tracekit.schema.diff.Tested``)."""
        return Tested(verdict=self.verdict, delta_ns=self.delta_ns, low_ns=self.low_ns,  # type: ignore[arg-type]
                      high_ns=self.high_ns, delta_fraction=self.fraction(self.delta_ns),
                      low_fraction=self.fraction(self.low_ns), high_fraction=self.fraction(self.high_ns),
                      samples=[self.n_before, self.n_after],
                      confidence=CONFIDENCE if self.low_ns is not None else None)

    def text(self) -> str:
        """'+4.2% [+3.1%, +5.0%] (95% bootstrap interval, 16 vs 16 steps)', or the untested form."""
        point = f"{self.fraction(self.delta_ns) or 0:+.1%}"
        if self.low_ns is None:
            return f"{point} (untested: {self.n_before} vs {self.n_after} steps, fewer than {MIN_SAMPLES} a side)"
        return (f"{point} [{self.fraction(self.low_ns) or 0:+.1%}, {self.fraction(self.high_ns) or 0:+.1%}] "
                f"({CONFIDENCE:.0%} bootstrap interval, {self.n_before} vs {self.n_after} steps)")


def _medians(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """Medians of ``RESAMPLES`` resamples (with replacement) of ``x``."""
    return np.median(x[rng.integers(0, x.size, size=(RESAMPLES, x.size))], axis=1)


def compare(before: list[int], after: list[int], scale_ns: int,
            threshold: float = PRACTICAL_THRESHOLD) -> Change:
    """The change of the median from ``before`` to ``after`` samples, judged against ``threshold × scale_ns``."""
    b, a = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    if b.size == 0 or a.size == 0:
        return Change("untested", 0, None, None, scale_ns, int(b.size), int(a.size))
    delta = int(round(float(np.median(a) - np.median(b))))
    big = scale_ns > 0 and abs(delta) >= threshold * scale_ns
    if b.size < MIN_SAMPLES or a.size < MIN_SAMPLES:
        return Change("untested", delta, None, None, scale_ns, int(b.size), int(a.size))
    rng = np.random.default_rng(SEED)
    diffs = _medians(rng, a) - _medians(rng, b)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = (int(round(float(v))) for v in np.percentile(diffs, [tail, 100 - tail]))
    change = Change("within noise", delta, low, high, scale_ns, int(b.size), int(a.size))
    if change.supported and big:
        return Change("regression" if delta > 0 else "improvement", delta, low, high, scale_ns,
                      int(b.size), int(a.size))
    return change
