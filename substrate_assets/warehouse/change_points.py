"""The ``change_points`` table: where each headline metric of a configuration moved to another level, and whether
that was a regression or an improvement.

Every series of ``metric_history`` — one suite, configuration and metric, its measured values in trial order — is
analysed with :func:`substrate_assets.analysis.change_points.find_change_points` (Hunter's algorithm, as Apache
Otava implements it); each change point found is one row. The table is replaced whole, in one transaction, from
the whole history: a new trial can move, confirm or remove a change found before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass
from datetime import datetime
from itertools import groupby

import duckdb

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS, ChangePointParameters, find_change_points
from substrate_assets.warehouse.connection import transaction

CHANGE_POINTS = "change_points"
METRIC_HISTORY = "metric_history"

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
class Measurement:
    """One row of metric_history."""

    suite: str | None
    configuration: str
    metric: str
    trial_id: str
    trial_number: int
    started_at: datetime | None
    sut_version: str | None
    value: float
    unit: str
    better: str


@dataclass(frozen=True)
class MetricChange:
    """One row of change_points, its fields in the table's column order."""

    suite: str | None
    configuration: str
    metric: str
    # The first trial measured at the new level, and the last one measured at the old.
    trial_id: str
    trial_number: int
    started_at: datetime | None
    sut_version: str | None
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


def _history(connection: duckdb.DuckDBPyConnection) -> list[Measurement]:
    rows = connection.execute(f"""
        SELECT suite, configuration, metric, trial_id, trial_number, started_at, sut_version, value, unit, better
        FROM {METRIC_HISTORY}
        ORDER BY suite, configuration, metric, trial_number, trial_id
    """).fetchall()
    return [Measurement(*row) for row in rows]


def _series(history: Iterable[Measurement]) -> Iterator[list[Measurement]]:
    for _key, measurements in groupby(history, key=lambda m: (m.suite, m.configuration, m.metric)):
        yield list(measurements)


def series_changes(series: list[Measurement],
                   parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[MetricChange]:
    """The change points of one series (one suite, configuration and metric, in trial order)."""
    changes = []
    for point in find_change_points([m.value for m in series], parameters):
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
        if changes:
            connection.executemany(f"INSERT INTO {CHANGE_POINTS} VALUES ({', '.join('?' * len(COLUMNS))})",
                                   [list(astuple(change)) for change in changes])
    return changes
