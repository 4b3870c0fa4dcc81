"""The steady-state window of a trial, from its Locust user-count history (the reference's rule).

Samples are (timestamp, users) from stats_history rows named ``""``,
``Aggregated`` or ``Total``. The peak is the observed maximum (not ``-u``);
steady samples have users ≥ 0.9 × peak; the window runs from the first to the
last steady sample, clamped to the run. Without a usable peak, or when the
first steady sample lies outside the run, the window is the whole run: that
changes every windowed figure, so the window says why, and it is logged.

Under a step ladder the whole run's window is the top step (the reference's
choice); each step's own steady part — its ramp cut by the same rule — is
:func:`step_window`. A native ladder knows when each step began from its ladder
log; an upstream ladder run keeps no such log, so :func:`history_load_steps`
reads the steps off its user counts: a step is a count held for
``SETTLED_SAMPLES`` rows in a row, and it begins where the step before it ended
(its ramp is part of it, as a native step's is), before :func:`step_window` cuts
the ramp off.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.results.landing import LocustCsv
from substrate_assets.results.load_steps import LoadStep
from substrate_assets.results.readers import read_stats_history
from substrate_assets.results.trial_directory import STATS_HISTORY_CSV, TOTAL_ROW_NAMES

STEADY_FRACTION = 0.9
# Locust writes a history row a second and a ramp moves the count at least once a second (upstream's ladder: 5
# users/s; headless Locust: 1), so a count seen in three rows in a row is a step's level, not a ramp passing by.
SETTLED_SAMPLES = 3
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
    understate the peak, so the reference drops every sample). The file is typed as it is read, never held as text
    (an imported history may be hundreds of MiB)."""
    if path is None or not path.is_file():
        return [], f"no {STATS_HISTORY_CSV}"
    return _samples(path.name, lambda: read_stats_history(path))


def samples_of(history: LocustCsv | None) -> tuple[list[tuple[int, float]], str | None]:
    """:func:`read_history` of a stats_history.csv already read (a landing trial's)."""
    if history is None:
        return [], f"no {STATS_HISTORY_CSV}"
    return _samples(history.path.name, lambda: history.history)


@dataclass(frozen=True)
class TrialWindows:
    """A landing trial's steady windows, from its stats_history.csv read once: the run's, and each ladder step's in
    the order the steps were given; ``unread`` says why there were no samples (each window is then whole)."""

    run: SteadyWindow
    steps: list[SteadyWindow]
    unread: str | None


def trial_windows(history: LocustCsv | None, start_ts: int, end_ts: int,
                  steps: Iterable[tuple[float, float]] = ()) -> TrialWindows:
    """The steady window of the run ``[start_ts, end_ts]`` and of each step (its start and end), from ``history``."""
    samples, unread = samples_of(history)
    return TrialWindows(window_from_samples(samples, start_ts, end_ts, unread),
                        [step_window(samples, started_at, ended_at) for started_at, ended_at in steps], unread)


def _samples(name: str, typed: Callable[[], pl.DataFrame]) -> tuple[list[tuple[int, float]], str | None]:
    try:
        return history_samples(typed().iter_rows(named=True)), None
    except Exception as error:
        return [], f"{name} could not be read ({error})"


def window_from_history(path: Path | None, start_ts: int, end_ts: int) -> SteadyWindow:
    """The steady window from a trial's Locust user-count history; a missing or unreadable file gives the whole run."""
    samples, unread = read_history(path)
    return window_from_samples(samples, start_ts, end_ts, unread)


def window_from_samples(samples: list[tuple[int, float]], start_ts: int, end_ts: int,
                        unread: str | None = None) -> SteadyWindow:
    """:func:`window_from_history` over a history already read (:func:`history_samples` of its rows); the whole run
    when it could ``not be read`` (why)."""
    return _told(SteadyWindow(start_ts, end_ts, unread) if unread else locate_steady_window(samples, start_ts, end_ts))


def _told(window: SteadyWindow) -> SteadyWindow:
    """``window``, with a warning when it is the whole run."""
    if window.whole_run_because is not None:
        log.warning("steady window: the whole run [%d, %d], because %s", window.start, window.end,
                    window.whole_run_because)
    return window


def history_samples(rows: Iterable[dict[str, Any]]) -> list[tuple[int, float]]:
    """(timestamp, users) of the total rows; rows that do not parse are skipped."""
    samples = []
    for row in rows:
        if row.get("name") not in TOTAL_ROW_NAMES:
            continue
        try:
            samples.append((int(row["timestamp"]), float(row["user_count"])))
        except (TypeError, ValueError, KeyError):
            continue
    return samples


@dataclass(frozen=True)
class Plateau:
    """A user count held over consecutive history rows ``first``..``last``."""

    users: float
    first: int
    last: int


def plateaus(samples: Iterable[tuple[int, float]]) -> list[Plateau]:
    """The counts above 0 held for at least ``SETTLED_SAMPLES`` rows in a row, in time order; two in a row at the
    same count (a row between them said otherwise) are one."""
    held: list[Plateau] = []
    run: list[tuple[int, float]] = []
    for ts, users in sorted(samples):
        if run and users != run[-1][1]:
            held.extend(_settled(run))
            run = []
        run.append((ts, users))
    held.extend(_settled(run))
    merged: list[Plateau] = []
    for plateau in held:
        if merged and merged[-1].users == plateau.users:
            merged[-1] = Plateau(plateau.users, merged[-1].first, plateau.last)
        else:
            merged.append(plateau)
    return merged


def _settled(run: list[tuple[int, float]]) -> list[Plateau]:
    if len(run) < SETTLED_SAMPLES or run[0][1] <= 0:
        return []
    return [Plateau(run[0][1], run[0][0], run[-1][0])]


def history_load_steps(samples: Sequence[tuple[int, float]], planned: Sequence[tuple[int, int]] | None,
                       *, source: str, ran_to_end: bool | None) -> list[LoadStep] | None:
    """The load steps of a ladder run from its user counts (``samples``), each with its steady window by the rule
    of :func:`step_window`, and no server telemetry (the run measured it over the whole run only). ``planned``:
    the ladder's (users, hold_s) steps where the run says, matched in order to the counts it settled at; a planned
    step the count never settled at has no window (null, with the reason in ``whole_step_because``), none is made
    up. Unplanned, a history that settles at fewer than two counts is no ladder: None. A ValueError naming
    ``source`` when a ladder was planned and the counts never settle. ``ran_to_end``: whether the run ended as
    planned, which is whether its last step is complete."""
    held = plateaus(samples)
    if planned is None:
        if len(held) < 2:
            return None
        levels: list[Plateau | None] = list(held)
        plan: list[tuple[int | None, int | None]] = [(None, None)] * len(held)
    else:
        if not held:
            raise ValueError(f"{source}: the user count never settles (no count above 0 is held for "
                             f"{SETTLED_SAMPLES} rows in a row), though the run planned a ladder of "
                             f"{len(planned)} steps: its steps cannot be told apart")
        levels, plan, index = [], list(planned), 0
        for wanted, _ in planned:
            found = next((i for i in range(index, len(held)) if held[i].users == wanted), None)
            levels.append(None if found is None else held[found])
            index = index if found is None else found + 1
    last_settled = max(number for number, level in enumerate(levels, start=1) if level is not None)
    steps, step_start = [], min(ts for ts, _ in samples)
    for number, (level, (users, hold_s)) in enumerate(zip(levels, plan, strict=True), start=1):
        if level is None:
            steps.append(LoadStep(number, users, hold_s, None, None, None, None,
                                  f"the user count never held {users} users for {SETTLED_SAMPLES} rows in a row "
                                  f"in {source}: the step has no steady window", complete=None))
            continue
        # A row stamped ts covers [ts, ts + 1): the step runs to the end of its level's last row, and the next
        # step (its ramp first) from there.
        started, ended = step_start, level.last + 1
        step_start = ended
        window = step_window(samples, started, ended)
        steps.append(LoadStep(number, users, hold_s, float(started), float(ended), window.start, window.end,
                              window.whole_run_because, complete=True if number < last_settled else ran_to_end))
    return steps
