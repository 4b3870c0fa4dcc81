"""The ``change_points`` table: where each headline metric of a configuration moved to another level, and whether
that was a regression or an improvement.

Every series of ``metric_history`` — one suite, configuration and metric, its measured values in trial order — is
analysed with :func:`substrate_assets.analysis.change_points.find_change_points` (Hunter's algorithm, as Apache
Otava implements it); each change point found is one row. A new trial can move, confirm or remove a change found
before, but only in its own series: :func:`replace_series_change_points` analyses again just the series of the
trials given, and :func:`replace_change_points` replaces the whole table from the whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass, replace
from datetime import datetime
from itertools import groupby

import duckdb

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS, ChangePointParameters, find_change_points
from substrate_assets.analysis.noise import fits_ratio_scale, successive_spread
from substrate_assets.warehouse.connection import transaction

CHANGE_POINTS = "change_points"
METRIC_HISTORY = "metric_history"
# A change point must move its series' level by at least this many times the series' trial-to-trial noise.
NOISE_MULTIPLE = 1.0

COLUMNS: tuple[tuple[str, str], ...] = (
    ("suite", "VARCHAR"),
    ("configuration", "VARCHAR"),
    ("metric", "VARCHAR"),
    ("trial_id", "VARCHAR"),
    ("trial_number", "BIGINT"),
    ("started_at", "TIMESTAMP WITH TIME ZONE"),
    ("sut_version", "VARCHAR"),
    ("previous_trial_id", "VARCHAR"),
    ("mean_before", "DOUBLE"),
    ("mean_after", "DOUBLE"),
    ("change_pct", "DOUBLE"),
    ("p_value", "DOUBLE"),
    ("direction", "VARCHAR"),
    ("unit", "VARCHAR"),
)


@dataclass(frozen=True)
class SeriesTrial:
    """A trial in its series (suite, configuration, metric), numbered as metric_history numbers it: the leading
    columns of metric_history and change_points alike."""

    suite: str | None
    configuration: str
    metric: str
    trial_id: str
    trial_number: int
    started_at: datetime | None
    sut_version: str | None


@dataclass(frozen=True)
class Measurement(SeriesTrial):
    """One row of metric_history."""

    value: float
    unit: str
    better: str


@dataclass(frozen=True)
class MetricChange(SeriesTrial):
    """One row of change_points, its fields in the table's column order: the trial is the first one measured at the
    new level, ``previous_trial_id`` the last one measured at the old."""

    previous_trial_id: str
    mean_before: float
    mean_after: float
    change_pct: float | None
    p_value: float
    direction: str
    unit: str


def direction(better: str, mean_before: float, mean_after: float) -> str:
    """'regressed' when the metric moved away from its better side, else 'improved'."""
    rose = mean_after > mean_before
    return "regressed" if rose == (better == "lower") else "improved"


# The rows (aliased s) of a series (suite, configuration, metric) holding any of the trials given; a null suite is
# a series too, hence IS NOT DISTINCT FROM.
SERIES_OF_TRIALS = f"""EXISTS (
    SELECT 1 FROM {METRIC_HISTORY} AS h
    WHERE list_contains(?, h.trial_id) AND h.suite IS NOT DISTINCT FROM s.suite
        AND h.configuration = s.configuration AND h.metric = s.metric)"""


def _history(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str] | None = None) -> list[Measurement]:
    """metric_history's rows in series order: every series, or the series holding any of ``trial_ids``."""
    where, parameters = ("", []) if trial_ids is None else (f"WHERE {SERIES_OF_TRIALS}", [list(trial_ids)])
    rows = connection.execute(f"""
        SELECT suite, configuration, metric, trial_id, trial_number, started_at, sut_version, value, unit, better
        FROM {METRIC_HISTORY} AS s
        {where}
        ORDER BY suite, configuration, metric, trial_number, trial_id
    """, parameters).fetchall()
    return [Measurement(*row) for row in rows]


def _series(history: Iterable[Measurement]) -> Iterator[list[Measurement]]:
    for _key, measurements in groupby(history, key=lambda m: (m.suite, m.configuration, m.metric)):
        yield list(measurements)


def above_the_noise(values: Sequence[float], parameters: ChangePointParameters) -> ChangePointParameters:
    """The parameters for one series, its smallest change raised to :data:`NOISE_MULTIPLE` times its trial-to-trial
    noise where that is larger: a level that moves by less than trials of one configuration move among themselves
    is not a change. The noise is the series' successive-difference spread (robust to the very steps looked for),
    on the ratio scale — Otava's magnitude is a ratio — so only for a series of positive values."""
    spread = successive_spread(values, "ratio") if fits_ratio_scale(values) else None
    if spread is None or NOISE_MULTIPLE * spread <= parameters.min_magnitude:
        return parameters
    return replace(parameters, min_magnitude=NOISE_MULTIPLE * spread)


def series_changes(series: list[Measurement],
                   parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[MetricChange]:
    """The change points of one series (one suite, configuration and metric, in trial order), each beyond the
    series' noise (:func:`above_the_noise`)."""
    changes = []
    values = [m.value for m in series]
    for point in find_change_points(values, above_the_noise(values, parameters)):
        first, previous = series[point.index], series[point.index - 1]
        changes.append(MetricChange(
            first.suite, first.configuration, first.metric, first.trial_id, first.trial_number, first.started_at,
            first.sut_version, previous.trial_id, point.mean_before, point.mean_after, point.change_pct,
            point.p_value, direction(first.better, point.mean_before, point.mean_after), first.unit))
    return changes


def replace_change_points(connection: duckdb.DuckDBPyConnection,
                          parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[MetricChange]:
    """Replace the change_points table with the change points of every series of metric_history (which must
    exist), in one transaction; the table exists, with its columns, even when no series has any. Its rows."""
    changes = [change for series in _series(_history(connection)) for change in series_changes(series, parameters)]
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    with transaction(connection):
        connection.execute(f"CREATE OR REPLACE TABLE {CHANGE_POINTS} ({columns})")
        _insert(connection, changes)
    return changes


def read_change_points(connection: duckdb.DuckDBPyConnection) -> list[MetricChange]:
    """Every row of change_points (which must exist), in series and trial order."""
    names = ", ".join(name for name, _ in COLUMNS)
    rows = connection.execute(
        f"SELECT {names} FROM {CHANGE_POINTS} ORDER BY suite, configuration, metric, trial_number, trial_id")
    return [MetricChange(*row) for row in rows.fetchall()]


def _insert(connection: duckdb.DuckDBPyConnection, changes: list[MetricChange]) -> None:
    if changes:
        connection.executemany(f"INSERT INTO {CHANGE_POINTS} VALUES ({', '.join('?' * len(COLUMNS))})",
                               [list(astuple(change)) for change in changes])


def replace_series_change_points(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str],
                                 parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[MetricChange]:
    """Analyse again the series of metric_history that hold any of ``trial_ids`` and replace their rows of
    change_points (which must exist), in one transaction; the other series keep theirs. Right when no trial left a
    series since change_points was built (a new trial joins series; only a reloaded one can leave one). The
    series' new rows."""
    changes = [change for series in _series(_history(connection, trial_ids))
               for change in series_changes(series, parameters)]
    with transaction(connection):
        connection.execute(f"DELETE FROM {CHANGE_POINTS} AS s WHERE {SERIES_OF_TRIALS}", [list(trial_ids)])
        _insert(connection, changes)
    return changes
