"""The reference's percentile method: floor-index nearest rank over exact samples, no interpolation.

``pXX = sorted[min(floor(n * XX / 100), n - 1)]`` — the method upstream's
cluster facts and server telemetry use. Empty input gives nulls, never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction


def floor_index(ordered: Sequence[float], fraction: float | Fraction) -> float | None:
    """The value at rank ``floor(n * fraction)`` (0-based, clamped) of an ascending sequence."""
    n = len(ordered)
    if n == 0:
        return None
    # Fraction keeps n * p exact (0.29 * 100 is 28.999999999999996 in floats).
    index = min(math.floor(n * Fraction(str(fraction))), n - 1)
    return ordered[index]


def summarize(values: Iterable[float],
              percentiles: Sequence[str] = ("p50", "p90", "p95", "p99")) -> dict[str, float | None]:
    """n, min, the named percentiles (``p99_9`` is 99.9), max and mean of the finite values."""
    ordered = sorted(v for v in values if v is not None and math.isfinite(v))
    summary: dict[str, float | None] = {"min": ordered[0] if ordered else None}
    for name in percentiles:
        summary[name] = floor_index(ordered, Fraction(name[1:].replace("_", ".")) / 100)
    summary["max"] = ordered[-1] if ordered else None
    summary["mean"] = sum(ordered) / len(ordered) if ordered else None
    summary["n"] = len(ordered)
    return summary
