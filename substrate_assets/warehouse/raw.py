"""Raw tables: one trial's files loaded into DuckDB, keyed by ``trial_id``, replaced in one transaction.

| table | from (as :class:`~substrate_assets.results.trial_directory.TrialDirectory` reads it) |
|---|---|
| ``trial_manifests`` | trial.json and status.json (an upstream run: its path and trial_summary row) |
| ``stats_history`` | stats_history.csv |
| ``locust_stats`` | stats.csv |
| ``request_samples`` | requests.parquet |
| ``cluster_facts`` | trial.json ``cluster_facts``, or the stats.jsonl ``trial_summary`` row; that row's figures |
| ``server_telemetry`` | server_summary.json, or the stats.jsonl ``server_summary`` row, as the 45 flat keys |

Every load — one raw asset's table for one trial, an import, a rebuild — goes
through :func:`load_trials`. Loading a trial again deletes its rows and inserts
the new ones in one transaction per table: never duplicates, never half a table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from substrate_assets.results.readers import (
    REQUESTS_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
)
from substrate_assets.results.server_summary import FLAT_KEYS
from substrate_assets.results.stats_jsonl import REPORTED_FIGURES
from substrate_assets.results.trial_directory import (
    REQUESTS_PARQUET,
    STATS_CSV,
    STATS_HISTORY_CSV,
    TrialDirectory,
)

SMALL_FRAME_ROWS = 1_000_000
MANIFEST_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.Utf8(), "script": pl.Utf8(), "script_sha256": pl.Utf8(), "backend": pl.Utf8(), "tag": pl.Utf8(),
    "run_ts": pl.Int64(), "started_at": pl.Datetime("us", "UTC"), "ended_at": pl.Datetime("us", "UTC"),
    "completed": pl.Boolean(), "locust_exit_code": pl.Int64(), "stats_generated": pl.Boolean(),
    "sessions_started": pl.Int64(), "failure": pl.Utf8(),
    "users": pl.Int64(), "spawn_rate": pl.Float64(), "duration_s": pl.Int64(), "think_scale": pl.Float64(),
    "lifecycle_mode": pl.Utf8(), "resume_mode": pl.Utf8(), "actors_per_user": pl.Int64(), "trial_dir": pl.Utf8(),
    "metadata": pl.Utf8(),
}
CLUSTER_FACTS_SCHEMA: dict[str, pl.DataType] = {
    "machine_type": pl.Utf8(), "node_count": pl.Int64(), "allocatable_cores": pl.Float64(),
    "allocatable_ram_gb": pl.Float64(), "worker_pod_count": pl.Int64(), "gke_version": pl.Utf8(),
    "worker_actor_capacity": pl.Utf8(), "worker_memory_limit_gb": pl.Utf8(), "sandbox_class": pl.Utf8(),
    "run_start": pl.Int64(), "run_end": pl.Int64(),
    # The figures the trial's own trial_summary row reported (kept beside the facts it reported them from).
    "has_trial_summary": pl.Boolean(), **{f"reported_{key}": pl.Float64() for key in REPORTED_FIGURES},
}
SERVER_TELEMETRY_SCHEMA: dict[str, pl.DataType] = {
    key: (pl.Int64() if key == "checkpoints_in_window" else pl.Float64()) for key in FLAT_KEYS
}


def _duckdb_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP WITH TIME ZONE"
    return {pl.Utf8(): "VARCHAR", pl.Int64(): "BIGINT", pl.Int32(): "INTEGER", pl.Float64(): "DOUBLE",
            pl.Boolean(): "BOOLEAN"}[dtype]


def _one_row(values: dict[str, Any], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame([{key: values.get(key) for key in schema}], schema=schema, orient="row", strict=False)


@dataclass(frozen=True)
class RawTable:
    name: str
    schema: dict[str, pl.DataType]
    read: Callable[[TrialDirectory], pl.DataFrame]
    description: str

    @property
    def columns(self) -> dict[str, pl.DataType]:
        return {"trial_id": pl.Utf8(), **self.schema}

    def ddl(self) -> str:
        columns = ", ".join(f'"{name}" {_duckdb_type(dtype)}' for name, dtype in self.columns.items())
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def frame(self, trial: TrialDirectory) -> pl.DataFrame:
        return self.read(trial).select(pl.lit(trial.trial_id).alias("trial_id"), *self.schema)


RAW_TABLES: dict[str, RawTable] = {table.name: table for table in (
    RawTable("trial_manifests", MANIFEST_SCHEMA, lambda trial: _one_row(trial.manifest_fields(), MANIFEST_SCHEMA),
             "One row per trial: suite, script, knobs, status."),
    RawTable("stats_history", STATS_HISTORY_SCHEMA, TrialDirectory.stats_history,
             f"Locust's per-second history ({STATS_HISTORY_CSV})."),
    RawTable("locust_stats", STATS_SCHEMA, TrialDirectory.stats, f"Locust's final per-entry stats ({STATS_CSV})."),
    RawTable("request_samples", REQUESTS_SCHEMA, TrialDirectory.requests,
             f"Every request with its exact latency ({REQUESTS_PARQUET})."),
    RawTable("cluster_facts", CLUSTER_FACTS_SCHEMA,
             lambda trial: _one_row({**trial.cluster_facts(), **trial.reported_figures()}, CLUSTER_FACTS_SCHEMA),
             "What the trial ran on, under the reference's fact keys, and the density figures its own "
             "trial_summary row reported (reported_*)."),
    RawTable("server_telemetry", SERVER_TELEMETRY_SCHEMA,
             lambda trial: _one_row(trial.server_telemetry(), SERVER_TELEMETRY_SCHEMA),
             "The 45 flat server_summary keys; null where nothing was measured."),
)}


def ensure_schema(connection: duckdb.DuckDBPyConnection) -> None:
    """Every raw table, with every column: a warehouse written before a column existed gains it, null for the
    trials already loaded (not measured then), until a rebuild reads their files again."""
    for table in RAW_TABLES.values():
        connection.execute(table.ddl())
    present = set(connection.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall())
    for table in RAW_TABLES.values():
        for name, dtype in table.columns.items():
            if (table.name, name) not in present:
                connection.execute(f'ALTER TABLE {table.name} ADD COLUMN "{name}" {_duckdb_type(dtype)}')


def replace_rows(connection: duckdb.DuckDBPyConnection, table: RawTable, trial_ids: Iterable[str],
                 frame: pl.DataFrame) -> int:
    """Delete ``trial_ids``' rows of ``table`` and insert ``frame``, in one transaction."""
    ids = sorted(set(trial_ids))
    connection.execute("BEGIN TRANSACTION")
    try:
        connection.execute(f"DELETE FROM {table.name} WHERE trial_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
        if frame.height:
            if frame.n_chunks() > 1 and frame.height < SMALL_FRAME_ROWS:
                frame = frame.rechunk()  # DuckDB pays per Arrow chunk: a thousand one-row chunks cost seconds
            # Plain (not view) strings: DuckDB takes them without a conversion pass.
            connection.register("incoming_rows", frame.to_arrow(compat_level=pl.CompatLevel.oldest()))
            connection.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM incoming_rows")
            connection.unregister("incoming_rows")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return frame.height


@dataclass(frozen=True)
class LoadedTable:
    """What one load put into one raw table: its columns, and per trial the rows and the first few of them."""

    name: str
    columns: list[tuple[str, str]]
    rows: dict[str, int]
    previews: dict[str, list[dict[str, Any]]]

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def load_trials(connection: duckdb.DuckDBPyConnection, trials: list[TrialDirectory],
                tables: Collection[str] | None = None, preview_rows: int = 0) -> dict[str, LoadedTable]:
    """Load ``tables`` (default: every raw table) for ``trials``, one insert per table; what each load put in.

    Files are read on a thread pool: polars releases the GIL while it parses.
    """
    ensure_schema(connection)
    chosen = [RAW_TABLES[name] for name in (tables if tables is not None else RAW_TABLES)]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return {table.name: _load_many(connection, table, trials, pool, preview_rows) for table in chosen}


def _load_many(connection: duckdb.DuckDBPyConnection, table: RawTable, trials: list[TrialDirectory],
               pool: ThreadPoolExecutor, preview_rows: int) -> LoadedTable:
    frames = list(pool.map(table.frame, trials))
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=table.columns)
    replace_rows(connection, table, [trial.trial_id for trial in trials], frame)
    columns = [(row[0], row[1]) for row in connection.execute(f"DESCRIBE {table.name}").fetchall()]
    return LoadedTable(table.name, columns,
                       rows={trial.trial_id: part.height for trial, part in zip(trials, frames, strict=True)},
                       previews={trial.trial_id: part.head(preview_rows).rows(named=True)
                                 for trial, part in zip(trials, frames, strict=True)} if preview_rows else {})
