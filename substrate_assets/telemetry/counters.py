"""Differences of the cumulative counters runtime_samples.parquet records once a second."""

from __future__ import annotations

from typing import Any

from substrate_assets.processes.owner import ticks_per_second


def counter_delta(first: dict[str, Any], last: dict[str, Any], column: str) -> float | None:
    """How much ``column`` grew from the ``first`` sample to the ``last``; None when either did not read it.

    The CPU counters count whole clock ticks, which psutil gives as sums of floats: the difference is rounded to the
    tick, so that two counters that grew by the same ticks grew by the same amount (a busy share over a window with no
    idle tick is 1, not 1 + 4e-13). The PSI totals are whole microseconds, which the rounding keeps."""
    if first.get(column) is None or last.get(column) is None:
        return None
    ticks = ticks_per_second()
    return round(float(last[column] - first[column]) * ticks) / ticks
