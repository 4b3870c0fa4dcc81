"""A suite's primary figures trial by trial, for the benchmark site's history: every trial of the suite drawn where
it ran in time, those that cannot count (disturbed, stopped early) marked rather than hidden, with each series'
change points and noise band computed as the marts compute them.

The primary figures of a trial are the ones its verdicts weigh most: its wake row's geometric mean, named as a
comparison names it (``WakeFirstTouch gmean`` for an agent session; wake_latency_distribution's ``gmean_ms``), and
the geometric mean of each request row answering its family's question
(:data:`~substrate_assets.families.QUESTION_ROWS`: ``ResumeActor gmean`` for glutton), from the exact successful
samples as ``compare`` judges them.

A **series** is one suite, configuration and figure, over its *judged* trials (completed, not disturbed), in trial
order — metric_history's rule. Its change points are :func:`~substrate_assets.warehouse.change_points.series_changes`
over that series; its noise band the spread of its last :data:`~noise.HISTORY_WINDOW` judged trials since its latest
change point (three at least), on the log scale around their geometric mean — how noise_floor measures a window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

import duckdb
import numpy as np

from substrate_assets.analysis.figure_spec import RequestFigure
from substrate_assets.analysis.noise import HISTORY_WINDOW, MIN_HISTORY
from substrate_assets.families import QUESTION_ROWS, WAKE_ROWS
from substrate_assets.warehouse.change_points import Measurement, MetricChange, series_changes
from substrate_assets.warehouse.introspection import has_table

READS = ("capacity_history", "trial_manifests", "wake_latency_distribution", "request_samples")


@dataclass(frozen=True)
class HistoryPoint:
    """One trial's value of one primary figure."""

    suite: str
    configuration: str
    figure: str
    trial_id: str
    trial_number: int
    started_at: datetime | None
    sut_version: str | None
    group_id: str | None
    disturbed: bool
    completed: bool | None
    value: float

    @property
    def judged(self) -> bool:
        """Whether the trial counts in its series: it ran to its end (or its end is unknown) and was not disturbed."""
        return not self.disturbed and self.completed is not False


@dataclass(frozen=True)
class NoiseBand:
    """A series' level and trial-to-trial spread over its window, from its first to its last trial's start."""

    configuration: str
    figure: str
    level: float
    noise: float
    low: float
    high: float
    trials: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class SuiteHistory:
    points: list[HistoryPoint]
    changes: list[MetricChange]
    bands: list[NoiseBand]

    @property
    def figures(self) -> list[str]:
        return list(dict.fromkeys(point.figure for point in self.points))


def wake_figure(family: str) -> str:
    """The wake row's geometric mean as a comparison names it (``GluttonPing gmean``)."""
    return f"{WAKE_ROWS.get(family) or 'wake'} gmean"


def _trials(connection: duckdb.DuckDBPyConnection, suite: str) -> list[tuple[Any, ...]]:
    return connection.execute("""
        SELECT h.configuration, h.trial_id, h.trial_number, h.started_at, h.sut_version, t.group_id,
               coalesce(t.disturbed, false), t.completed, t.family
        FROM capacity_history AS h JOIN trial_manifests AS t USING (trial_id)
        WHERE h.suite = ? ORDER BY h.configuration, h.trial_number""", [suite]).fetchall()


def _wake_gmeans(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> dict[str, float]:
    return {str(trial): float(value) for trial, value in connection.execute(
        "SELECT trial_id, gmean_ms FROM wake_latency_distribution WHERE list_contains(?::VARCHAR[], trial_id) "
        "AND gmean_ms IS NOT NULL AND isfinite(gmean_ms)", [list(trial_ids)]).fetchall()}


def _row_gmeans(connection: duckdb.DuckDBPyConnection, rows: dict[str, list[str]]) -> dict[tuple[str, str], float]:
    """Each (trial, request row)'s geometric mean of its successful counted samples; none for a row with a latency
    that is not positive (no logarithm), as a comparison's gmean is not measured then."""
    wanted = [[trial, row] for trial, names in rows.items() for row in names]
    if not wanted:
        return {}
    found = connection.execute("""
        SELECT trial_id, name, exp(avg(ln(CASE WHEN latency_ms > 0 THEN latency_ms END))), min(latency_ms) > 0
        FROM request_samples
        WHERE list_contains(?::VARCHAR[][], [trial_id, name]) AND success AND locust_counted IS NOT FALSE
          AND latency_ms IS NOT NULL
        GROUP BY ALL""", [wanted]).fetchall()
    return {(str(trial), str(name)): float(value) for trial, name, value, positive in found if positive}


def _band(series: list[HistoryPoint], changes: list[MetricChange]) -> NoiseBand | None:
    since = max((change.trial_number for change in changes), default=1)
    window = [point for point in series if point.trial_number >= since][-HISTORY_WINDOW:]
    values = np.array([point.value for point in window], dtype=float)
    dated = [point.started_at for point in window if point.started_at is not None]
    if len(window) < MIN_HISTORY or not len(dated) or float(values.min()) <= 0:
        return None
    logs = np.log(values)
    level, noise = float(np.exp(logs.mean())), float(logs.std(ddof=1))
    return NoiseBand(series[0].configuration, series[0].figure, level, noise, level * math.exp(-noise),
                     level * math.exp(noise), len(window), min(dated), max(dated))


def suite_history(connection: duckdb.DuckDBPyConnection, suite: str) -> SuiteHistory:
    """The suite's primary figures for every trial that measured them, each series' change points (of its judged
    trials) and noise band. Empty when the warehouse's models are not built yet."""
    if not all(has_table(connection, table) for table in READS):
        return SuiteHistory([], [], [])
    trials = _trials(connection, suite)
    wakes = _wake_gmeans(connection, [row[1] for row in trials])
    asked = {row[1]: list(QUESTION_ROWS.get(row[8] or "agentsession", ())) for row in trials}
    rows = _row_gmeans(connection, asked)
    points = []
    for configuration, trial_id, number, started_at, version, group_id, disturbed, completed, family in trials:
        values = {wake_figure(family or "agentsession"): wakes.get(trial_id),
                  **{RequestFigure(row).figure: rows.get((trial_id, row)) for row in asked[trial_id]}}
        points += [HistoryPoint(suite, configuration, figure, trial_id, int(number), started_at, version, group_id,
                                bool(disturbed), completed, value)
                   for figure, value in values.items() if value is not None]
    wake = {wake_figure(family) for family in WAKE_ROWS}
    points.sort(key=lambda point: (point.figure not in wake, point.figure, point.configuration, point.trial_number))
    changes: list[MetricChange] = []
    bands: list[NoiseBand] = []
    for _key, together in groupby(points, key=lambda point: (point.figure, point.configuration)):
        series = [point for point in together if point.judged]
        if not series:
            continue
        found = series_changes([Measurement(suite, point.configuration, point.figure, point.trial_id,
                                            point.trial_number, point.started_at, point.sut_version, point.value,
                                            "ms", "lower") for point in series])
        changes += found
        band = _band(series, found)
        if band is not None:
            bands.append(band)
    return SuiteHistory(points, changes, bands)
