"""The steady-state window of a trial, from its Locust user-count history (the reference's rule).

Samples are (timestamp, users) from stats_history rows named ``""``,
``Aggregated`` or ``Total``. The peak is the observed maximum (not ``-u``);
steady samples have users ≥ 0.9 × peak; the window runs from the first to the
last steady sample, clamped to the run. Without a usable peak, or when the
first steady sample lies outside the run, the window is the whole run.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from substrate_assets.results.readers import read_stats_history
from substrate_assets.results.trial_directory import TOTAL_ROW_NAMES

STEADY_FRACTION = 0.9


def steady_window(samples: Iterable[tuple[int, float]], start_ts: int, end_ts: int) -> tuple[int, int]:
    points = list(samples)
    peak = max((users for _, users in points), default=0.0)
    if peak <= 0:
        return start_ts, end_ts
    steady = [ts for ts, users in points if users >= STEADY_FRACTION * peak]
    first, last = steady[0], steady[-1]
    if start_ts <= first <= end_ts:
        return first, min(max(last, first), end_ts)
    return start_ts, end_ts


def window_from_history(path: Path | None, start_ts: int, end_ts: int) -> tuple[int, int]:
    """The steady window from a stats_history.csv; a missing or unreadable file gives the whole run."""
    if path is None or not path.is_file():
        return start_ts, end_ts
    try:
        samples = history_samples(read_stats_history(path).iter_rows(named=True))
    except Exception:  # a partial read would understate the peak; the reference drops every sample instead
        samples = []
    return steady_window(samples, start_ts, end_ts)


def history_samples(rows: Iterable[dict[str, object]]) -> list[tuple[int, float]]:
    """(timestamp, users) of the total rows; rows that do not parse are skipped."""
    samples = []
    for row in rows:
        if row.get("name") not in TOTAL_ROW_NAMES:
            continue
        try:
            samples.append((int(row["timestamp"]), float(row["user_count"])))  # type: ignore[arg-type]
        except (TypeError, ValueError, KeyError):
            continue
    return samples
