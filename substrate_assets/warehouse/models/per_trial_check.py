"""Whether a per-trial (or partitioned) model truly is one on a warehouse's rows: the model over every trial against
the union of it over each trial (each partition) alone."""

from __future__ import annotations

import duckdb

from substrate_assets.warehouse.models.discovery import Model
from substrate_assets.warehouse.models.narrowing import NARROWED_IDS, narrowed_query
from substrate_assets.warehouse.models.tables import rows_apart


def per_trial_mismatches(connection: duckdb.DuckDBPyConnection, model: Model) -> int:
    """Rows in which ``model`` over every trial differs from ``model`` run over each trial alone (over each
    partition's trials alone, for a partitioned model), both ways: 0 when it is truly per trial (per partition) on
    this warehouse's rows. The tables it reads must be built."""
    trial_ids = sorted({row[0] for name in model.upstream for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {name} WHERE trial_id IS NOT NULL").fetchall()})
    connection.execute(f"CREATE OR REPLACE TEMP TABLE every_trial AS {model.sql}")
    connection.execute("CREATE OR REPLACE TEMP TABLE trial_by_trial AS SELECT * FROM every_trial LIMIT 0")
    if model.partition_by:
        keys = ", ".join(f'"{column}"' for column in model.partition_by)
        groups = [row[0] for row in connection.execute(
            f"SELECT list(trial_id) FROM temp.main.every_trial GROUP BY {keys}").fetchall()]
        # A trial with no row of the model is a partition of its own (its run gives no rows either).
        alone = set(trial_ids) - {trial_id for group in groups for trial_id in group}
        groups += [[trial_id] for trial_id in sorted(alone)]
    else:
        groups = [[trial_id] for trial_id in trial_ids]
    try:
        for group in groups:
            over_group = narrowed_query(connection, model.sql, model.upstream, group)
            connection.execute(f"INSERT INTO trial_by_trial BY NAME {over_group}", {NARROWED_IDS: group})
        return rows_apart(connection, "temp.main.every_trial", "temp.main.trial_by_trial")
    finally:
        connection.execute("DROP TABLE IF EXISTS temp.main.every_trial")
        connection.execute("DROP TABLE IF EXISTS temp.main.trial_by_trial")
