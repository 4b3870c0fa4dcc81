"""The statistics every figure of the platform is computed with, in one place (in the spirit of Locust's
``stats.py``). The warehouse's SQL macros of the same names mirror these functions; a property test keeps the
two equal.

- **Floor-index percentile**, the reference's method: ``sorted[min(floor(n * permille / 1000), n - 1)]`` over
  exact samples, no interpolation. Permilles are whole numbers (p99.9 is 999), so the index is exact integer
  arithmetic (``0.29 * 100`` would be 28.999999999999996 in floats). No samples give null, never 0.
- **The reference's rounding**: Python's ``round`` (half-to-even on the exact binary value).
- **Locust's response-time buckets**: the value Locust files a response time under (1 ms below 100 ms, 10 ms
  below 1 s, 100 ms below 10 s, then 1 s; half-to-even), so histograms merge with Locust's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# The figures of the server_summary blocks (packing, PSI): at 4 dp.
TELEMETRY_STATS = ("min", "p50", "p90", "p95", "p99", "max", "avg")
TELEMETRY_DIGITS = 4


def permille(name: str) -> int:
    """``p50`` → 500, ``p99_9`` → 999: a percentile's name as the whole permille the index is computed with."""
    value = Fraction(name.removeprefix("p").replace("_", ".")) * 10
    if value.denominator != 1 or not 0 <= value <= 1000:
        raise ValueError(f"{name!r} is not a percentile in whole permille (p0 … p100, p99_9)")
    return int(value)


def floor_index(ordered: Sequence[float] | npt.NDArray[np.floating[Any]], per_mille: int) -> float | None:
    """The value at rank ``min(n * per_mille // 1000, n - 1)`` (0-based) of an ascending sequence; None if empty."""
    n = len(ordered)
    if n == 0:
        return None
    return ordered[min(n * per_mille // 1000, n - 1)]


def finite_sorted(values: Iterable[float | None]) -> list[float]:
    """The measured values, ascending: nulls, NaN and ±Inf are not measurements."""
    return sorted(v for v in values if v is not None and math.isfinite(v))


def measured(value: Any) -> float | int | None:
    """A figure as a number, from a number or its text (files and APIs give both); null, junk, NaN and ±Inf are
    not measurements and give None. Whole numbers stay whole."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def reference_round(value: float, digits: int) -> float:
    """The reference's rounding (Python's ``round``); DuckDB's own ``round`` goes half away from zero."""
    return round(value, digits)


def summarize(values: Iterable[float | None],
              percentiles: Sequence[str] = ("p50", "p90", "p95", "p99")) -> dict[str, float | None]:
    """n_samples (how many values were measured), min, the named floor-index percentiles, max and mean of the
    measured values, unrounded."""
    ordered = finite_sorted(values)
    summary: dict[str, float | None] = {"min": ordered[0] if ordered else None}
    for name in percentiles:
        summary[name] = floor_index(ordered, permille(name))
    summary["max"] = ordered[-1] if ordered else None
    summary["mean"] = sum(ordered) / len(ordered) if ordered else None
    summary["n_samples"] = len(ordered)
    return summary


def percentile_stats(values: Iterable[float | None]) -> dict[str, float | None]:
    """The reference's block of min, p50, p90, p95, p99, max and avg, each rounded to 4 dp; empty → all null."""
    figures = summarize(values, TELEMETRY_STATS[1:5])
    figures["avg"] = figures["mean"]
    return {name: None if (value := figures[name]) is None else reference_round(value, TELEMETRY_DIGITS)
            for name in TELEMETRY_STATS}


def locust_bucket(response_time_ms: float) -> int:
    """The response time Locust files ``response_time_ms`` under in its histogram."""
    if response_time_ms < 100:
        digits = 0
    elif response_time_ms < 1000:
        digits = -1
    elif response_time_ms < 10_000:
        digits = -2
    else:
        digits = -3
    return int(round(response_time_ms, digits))
