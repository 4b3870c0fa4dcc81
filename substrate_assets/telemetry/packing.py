"""The ``cluster_packing`` block, whatever measured the worker pool (per-second samples of the embedded runtime, or
``ate_workerpool_workers`` from Prometheus): each point's share of busy workers, summarised inside the steady
window."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from substrate_assets.analysis.statistics import TELEMETRY_DIGITS, percentile_stats, reference_round


def packing_block(points: Iterable[tuple[float, float, float]], steady: tuple[int, int],
                  timestamp_digits: int | None = None) -> dict[str, Any]:
    """From (timestamp, busy workers, total workers) in time order: the time series of ratios busy / total (4 dp,
    null with no workers) and the reference's figures over the points inside ``steady``."""
    timeseries, ratios = [], []
    for at, busy, total in points:
        ratio = reference_round(busy / total, TELEMETRY_DIGITS) if total > 0 else None
        shown = at if timestamp_digits is None else round(at, timestamp_digits)
        timeseries.append({"timestamp": shown, "busy_workers": busy, "total_workers": total, "packing_ratio": ratio})
        if ratio is not None and steady[0] <= at <= steady[1]:
            ratios.append(ratio)
    return {"summary": percentile_stats(ratios), "timeseries": timeseries}
