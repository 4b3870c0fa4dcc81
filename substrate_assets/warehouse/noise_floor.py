"""The ``noise_floor`` table: how much each headline figure of a configuration moves from one trial to the next.

One row per series of ``metric_history`` (suite, configuration, metric), over the configuration's *window*: its
trials since its latest change point (``change_points``, any metric), the last :data:`~noise.HISTORY_WINDOW` of
them — the trials a new trial of the configuration is judged against (:func:`comparison.history_window`). The
spread is the trials' standard deviation on the metric's scale (:mod:`substrate_assets.analysis.noise`): of the
logarithms for a metric whose values are all positive (it reads as a coefficient of variation), of the values
themselves for the failure ratio or a metric the window measured as 0. Beside it, the robust spread
(``1.4826 · MAD / median``, or ``1.4826 · MAD``): far below the spread, one outlying trial widens the floor. Both are
null with fewer than three trials: a floor is not measured from one or two.

The table is built whole, in SQL, every time change_points is: it is small (a row per series), and a new trial can
move a window's start (a new change point) as well as its end.
"""

from __future__ import annotations

import duckdb

from substrate_assets.analysis.noise import HISTORY_WINDOW, MAD_TO_SD, MIN_HISTORY
from substrate_assets.warehouse.change_points import CHANGE_POINTS, METRIC_HISTORY
from substrate_assets.warehouse.connection import transaction

NOISE_FLOOR = "noise_floor"

# Each column's description is in dbt_like_sql/schema.yml.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("suite", "VARCHAR"),
    ("configuration", "VARCHAR"),
    ("metric", "VARCHAR"),
    ("unit", "VARCHAR"),
    ("scale", "VARCHAR"),
    ("trials_used", "BIGINT"),
    ("since_trial_number", "BIGINT"),
    ("first_trial_id", "VARCHAR"),
    ("last_trial_id", "VARCHAR"),
    ("last_started_at", "TIMESTAMP WITH TIME ZONE"),
    ("median", "DOUBLE"),
    ("level", "DOUBLE"),
    ("noise", "DOUBLE"),
    ("noise_df", "BIGINT"),
    ("robust_noise", "DOUBLE"),
)

# Every series' window: its configuration's trials from the latest change point of any of its metrics, the last
# HISTORY_WINDOW of them (by trial number, over every trial of the configuration metric_history holds).
_WINDOWS = f"""
WITH since AS (
    SELECT suite, configuration, max(trial_number) AS since_trial_number
    FROM {CHANGE_POINTS} GROUP BY ALL
),
configuration_trials AS (
    SELECT DISTINCT h.suite, h.configuration, h.trial_number
    FROM {METRIC_HISTORY} AS h
    LEFT JOIN since AS s ON s.suite IS NOT DISTINCT FROM h.suite AND s.configuration = h.configuration
    WHERE h.trial_number >= coalesce(s.since_trial_number, 1)
),
windows AS (
    SELECT suite, configuration, min(trial_number) AS since_trial_number
    FROM (SELECT *, row_number() OVER (PARTITION BY suite, configuration ORDER BY trial_number DESC) AS recent
          FROM configuration_trials)
    WHERE recent <= {HISTORY_WINDOW}
    GROUP BY ALL
),
windowed AS (
    SELECT h.*, w.since_trial_number,
           h.unit NOT IN ('ratio', 'share') AND min(h.value) OVER series > 0 AS on_ratio
    FROM {METRIC_HISTORY} AS h
    JOIN windows AS w ON w.suite IS NOT DISTINCT FROM h.suite AND w.configuration = h.configuration
    WHERE h.trial_number >= w.since_trial_number
    WINDOW series AS (PARTITION BY h.suite, h.configuration, h.metric)
)
SELECT
    suite,
    configuration,
    metric,
    any_value(unit) AS unit,
    CASE WHEN bool_and(on_ratio) THEN 'ratio' ELSE 'difference' END AS scale,
    count(*) AS trials_used,
    any_value(since_trial_number) AS since_trial_number,
    arg_min(trial_id, trial_number) AS first_trial_id,
    arg_max(trial_id, trial_number) AS last_trial_id,
    max(started_at) AS last_started_at,
    median(value) AS median,
    -- An aggregate runs over every row whichever branch is taken, and ln(0) is an error: only a series of
    -- positive values is on the ratio scale, so the guard never drops a value the ratio branch reads. The sums
    -- run in trial order, so a warehouse loaded trial by trial and one rebuilt whole agree to the last bit.
    CASE WHEN bool_and(on_ratio) THEN exp(avg(ln(CASE WHEN value > 0 THEN value END) ORDER BY trial_number))
         ELSE avg(value ORDER BY trial_number) END AS level,
    CASE WHEN count(*) >= {MIN_HISTORY} THEN
        CASE WHEN bool_and(on_ratio) THEN stddev_samp(ln(CASE WHEN value > 0 THEN value END) ORDER BY trial_number)
             ELSE stddev_samp(value ORDER BY trial_number) END END AS noise,
    CASE WHEN count(*) >= {MIN_HISTORY} THEN count(*) - 1 END AS noise_df,
    CASE WHEN count(*) >= {MIN_HISTORY} THEN
        CASE WHEN bool_and(on_ratio) THEN {MAD_TO_SD} * mad(value) / median(value)
             ELSE {MAD_TO_SD} * mad(value) END END AS robust_noise
FROM windowed
GROUP BY suite, configuration, metric
ORDER BY suite, configuration, metric
"""


def replace_noise_floor(connection: duckdb.DuckDBPyConnection) -> int:
    """Replace the noise_floor table from metric_history and change_points (both must exist), in one transaction;
    its row count."""
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    names = ", ".join(name for name, _ in COLUMNS)
    with transaction(connection):
        connection.execute(f"CREATE OR REPLACE TABLE {NOISE_FLOOR} ({columns})")
        connection.execute(f"INSERT INTO {NOISE_FLOOR} ({names}) {_WINDOWS}")
    counted = connection.execute(f"SELECT count(*) FROM {NOISE_FLOOR}").fetchone()
    assert counted is not None  # a count is one row
    return int(counted[0])
