"""A built table's preview shows its newest rows: a person opening a mart in Dagster looks for the trial that just
landed, and a table's scan order is its oldest rows first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.tables import describe_table
from substrate_assets.warehouse.raw_tables import ensure_schema
from tests.support.raw_rows import insert


def started(day: int) -> datetime:
    return datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=day)


def test_rows_of_the_newest_trials_come_first(tmp_path: Path) -> None:
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        # Loaded oldest first, as trials land; "zz-old" sorts last by id but started first.
        insert(connection, "trial_manifests", [{"trial_id": trial_id, "started_at": started(day)}
                                               for day, trial_id in enumerate(["zz-old", "b-mid", "a-new"])])
        connection.execute("CREATE TABLE per_trial AS SELECT * FROM (VALUES ('zz-old', 1), ('b-mid', 2), "
                           "('a-new', 3), ('never-recorded', 4)) AS t(trial_id, n)")
        assert [row["trial_id"] for row in describe_table(connection, "per_trial", 3).preview] == \
            ["a-new", "b-mid", "zz-old"]
        # A table with its own started_at is ordered by it; the manifests themselves too.
        assert [row["trial_id"] for row in describe_table(connection, "trial_manifests", 2).preview] == \
            ["a-new", "b-mid"]
        # Without a trial or a time, the table's own order.
        connection.execute("CREATE TABLE plain AS SELECT * FROM (VALUES (3), (1), (2)) AS t(n)")
        preview = describe_table(connection, "plain", 10)
        assert [row["n"] for row in preview.preview] == [3, 1, 2] and preview.rows == 3
