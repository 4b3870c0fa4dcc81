"""The steady-state window of a trial, from its Locust user-count history (the reference's rule).

Samples are (timestamp, users) from stats_history rows named ``""``,
``Aggregated`` or ``Total``. The peak is the observed maximum (not ``-u``);
steady samples have users ≥ 0.9 × peak; the window runs from the first to the
last steady sample, clamped to the run. Without a usable peak, or when the
first steady sample lies outside the run, the window is the whole run: that
changes every windowed figure, so the window says why, and it is logged.

Under a step ladder the whole run's window is the top step (the reference's
choice); each step's own steady part — its ramp cut by the same rule — is
:func:`step_window`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.results.readers import read_stats_history
from substrate_assets.results.trial_directory import STATS_HISTORY_CSV, TOTAL_ROW_NAMES

STEADY_FRACTION = 0.9
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SteadyWindow:
    """The window the telemetry is summarised over; ``whole_run_because`` says why it fell back to the run."""

    start: int
    end: int
    whole_run_because: str | None = None

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


def locate_steady_window(samples: Iterable[tuple[int, float]], start_ts: int, end_ts: int) -> SteadyWindow:
    points = list(samples)
    peak = max((users for _, users in points), default=0.0)
    if peak <= 0:
        reason = "no user count above 0" if points else "no user-count samples"
        return SteadyWindow(start_ts, end_ts, reason)
    steady = [ts for ts, users in points if users >= STEADY_FRACTION * peak]
    first, last = steady[0], steady[-1]
    if start_ts <= first <= end_ts:
        return SteadyWindow(first, min(max(last, first), end_ts))
    return SteadyWindow(start_ts, end_ts, f"the first steady sample ({first}) lies outside the run")


def step_window(samples: Iterable[tuple[int, float]], started_at: float, ended_at: float) -> SteadyWindow:
    """The steady part of one step of a ladder: the same rule over the samples taken inside the step.

    Locust stamps a history row with the whole second it was written in, so a row stamped ``ts`` is inside the
    step only when ``[ts, ts + 1)`` is: a row of the second the step began in may still show the step before."""
    start, end = math.ceil(started_at), math.floor(ended_at)
    inside = [(ts, users) for ts, users in samples if started_at <= ts and ts + 1 <= ended_at]
    window = locate_steady_window(inside, start, max(end, start))
    if window.whole_run_because is not None:
        log.warning("steady window of the step [%d, %d]: the whole step, because %s", start, end,
                    window.whole_run_because)
    return window


def read_history(path: Path | None) -> tuple[list[tuple[int, float]], str | None]:
    """A trial's user-count samples, or none and why: no file, or one that does not read (a partial read would
    understate the peak, so the reference drops every sample)."""
    if path is None or not path.is_file():
        return [], f"no {STATS_HISTORY_CSV}"
    try:
        return history_samples(read_stats_history(path).iter_rows(named=True)), None
    except Exception as error:
        return [], f"{path.name} could not be read ({error})"


def window_from_history(path: Path | None, start_ts: int, end_ts: int) -> SteadyWindow:
    """The steady window from a trial's Locust user-count history; a missing or unreadable file gives the whole run."""
    samples, unread = read_history(path)
    return _told(SteadyWindow(start_ts, end_ts, unread) if unread else locate_steady_window(samples, start_ts, end_ts))


def window_from_samples(samples: list[tuple[int, float]], start_ts: int, end_ts: int) -> SteadyWindow:
    """:func:`window_from_history` over a history already read (:func:`history_samples` of its rows)."""
    return _told(locate_steady_window(samples, start_ts, end_ts))


def _told(window: SteadyWindow) -> SteadyWindow:
    """``window``, with a warning when it is the whole run."""
    if window.whole_run_because is not None:
        log.warning("steady window: the whole run [%d, %d], because %s", window.start, window.end,
                    window.whole_run_because)
    return window


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
