"""The raw tables: each one's columns, how it reads one trial's files into rows, and its DDL.

| table | from (as :class:`~substrate_assets.results.trial_directory.TrialDirectory` reads it) |
|---|---|
| ``trial_manifests`` | trial.json and status.json (an upstream run: its path and trial_summary row) |
| ``stats_history`` | stats_history.csv |
| ``locust_stats`` | stats.csv |
| ``request_samples`` | requests.parquet |
| ``cluster_facts`` | trial.json ``cluster_facts``, or the stats.jsonl ``trial_summary`` row; that row's figures |
| ``server_telemetry`` | server_summary.json, or the stats.jsonl ``server_summary`` row, as the 45 flat keys |
| ``load_steps`` | load_steps.json (a ladder's steps); an upstream ladder run's steps from stats_history.csv; else |
|  | one step: the steady window and server_telemetry |

Every raw table is keyed by ``trial_id``. :data:`FILE_READERS` reads each file a table reads on its own, to say
which one does not read. :func:`ensure_schema` creates them (and the bookkeeping of loads,
:mod:`~substrate_assets.warehouse.changes`) in a warehouse, and adds the columns a warehouse written earlier lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from substrate_assets.results.load_steps import LoadStep, read_load_steps
from substrate_assets.results.readers import (
    REQUESTS_SCHEMA,
    RUNTIME_EVENTS_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    last_rows_by_metric,
    read_json,
    read_requests,
    read_runtime_events,
    read_stats,
    read_stats_history,
)
from substrate_assets.results.run_log import log_lines, read_run_log
from substrate_assets.results.server_summary import FLAT_KEYS, flatten
from substrate_assets.results.stats_jsonl import REPORTED_FIGURES
from substrate_assets.results.trial_directory import (
    LOAD_STEPS_JSON,
    LOGS_TXT,
    REQUESTS_PARQUET,
    RUNTIME_EVENTS_PARQUET,
    SERVER_SUMMARY_JSON,
    STATS_CSV,
    STATS_HISTORY_CSV,
    STATS_JSONL,
    STATUS_JSON,
    TRIAL_JSON,
    TrialDirectory,
    telemetry_figures,
)
from substrate_assets.telemetry.window import (
    history_load_steps,
    history_samples,
    window_from_history,
    window_from_samples,
)
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.changes import ensure_bookkeeping, ensure_copy

MANIFEST_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.Utf8(), "script": pl.Utf8(), "script_sha256": pl.Utf8(), "backend": pl.Utf8(), "tag": pl.Utf8(),
    "run_ts": pl.Int64(), "started_at": pl.Datetime("us", "UTC"), "ended_at": pl.Datetime("us", "UTC"),
    "completed": pl.Boolean(), "locust_exit_code": pl.Int64(), "stats_generated": pl.Boolean(),
    "sessions_started": pl.Int64(), "failure": pl.Utf8(),
    "users": pl.Int64(), "spawn_rate": pl.Float64(), "duration_s": pl.Int64(), "think_scale": pl.Float64(),
    "lifecycle_mode": pl.Utf8(), "resume_mode": pl.Utf8(), "actors_per_user": pl.Int64(),
    "actor_memory": pl.Utf8(), "ladder": pl.Utf8(), "planned_steps": pl.Int64(), "sut_version": pl.Utf8(),
    "slo_wake_p99_ms": pl.Float64(),
    "slo_failure_ratio": pl.Float64(), "trial_dir": pl.Utf8(),
    "metadata": pl.Utf8(), "family": pl.Utf8(),
    # What the local trial's own driver cost over the steady window (trial.json's driver_load); null elsewhere.
    "driver_cpu_s": pl.Float64(), "driver_core_share": pl.Float64(), "machine_cpu_saturation": pl.Float64(),
    # How busy the machine was with other work over the steady window (trial.json's machine_load), and whether the
    # suite's limits call the trial disturbed; null where not measured.
    "foreign_cpu_share": pl.Float64(), "steal_share": pl.Float64(), "cpu_pressure": pl.Float64(),
    "disturbed": pl.Boolean(), "disturbed_because": pl.Utf8(),
    # The group of repeated trials it is one of, and the wake delay injected into the embedded runtime.
    "group_id": pl.Utf8(), "inject_wake_delay_ms": pl.Int64(),
    # How long a local trial waited for the machine before its load started; null where there is no queue.
    "machine_wait_s": pl.Float64(),
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
LOAD_STEPS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64(), "target_users": pl.Int64(), "hold_s": pl.Int64(), "started_at": pl.Float64(),
    "ended_at": pl.Float64(), "window_start_ts": pl.Int64(), "window_end_ts": pl.Int64(),
    "whole_step_because": pl.Utf8(), "complete": pl.Boolean(), "recorded": pl.Boolean(), **SERVER_TELEMETRY_SCHEMA,
}


def duckdb_type(dtype: pl.DataType) -> str:
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
    # The trial files ``read`` opens: where to look when it fails.
    files: tuple[str, ...]

    @property
    def columns(self) -> dict[str, pl.DataType]:
        return {"trial_id": pl.Utf8(), **self.schema}

    def ddl(self) -> str:
        columns = ", ".join(f'"{name}" {duckdb_type(dtype)}' for name, dtype in self.columns.items())
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def frame(self, trial: TrialDirectory) -> pl.DataFrame:
        return self.read(trial).select(pl.lit(trial.trial_id).alias("trial_id"), *self.schema)


def _flat_step(trial: TrialDirectory, history: pl.DataFrame | None = None) -> LoadStep | None:
    """The one load point of a trial that recorded no steps (flat, or an upstream run): its steady window, as
    server_summary.json was measured over it or else from its user-count history; None without a run window.
    ``history``: the trial's stats_history.csv as read already (a rebuild reads it once for both tables), when the
    file is there."""
    facts, manifest = trial.cluster_facts(), trial.manifest_fields()
    start = facts["run_start"] if facts["run_start"] is not None else manifest["run_ts"]
    end = facts["run_end"]
    if end is None:  # an upstream run that recorded no run window: its history's last row ends it
        history = trial.stats_history() if history is None else history
        end = history["timestamp"].max() if history.height else None
    if start is None or end is None:
        return None
    window = trial.steady_window() or (
        window_from_history(trial.file(STATS_HISTORY_CSV), start, end) if history is None
        else window_from_samples(history_samples(history.iter_rows(named=True)), start, end)).span
    # The one step is the whole run: complete when the trial ran to its end.
    return LoadStep(1, manifest["users"], manifest["duration_s"], float(start), float(end), *window,
                    complete=manifest["completed"])


def _imported_ladder_steps(trial: TrialDirectory, history: pl.DataFrame | None) -> list[LoadStep] | None:
    """An upstream ladder run's steps, read off its user-count history by the native ladder's steady-window rule
    (:func:`~substrate_assets.telemetry.window.history_load_steps`); None for a run that is no ladder, a native
    trial (its steps are recorded, or it is flat), or a run without history."""
    if trial.manifest:
        return None
    history = trial.stats_history() if history is None else history
    samples = history_samples(history.iter_rows(named=True))
    if not samples:
        return None
    return history_load_steps(samples, trial.planned_ladder(), source=f"{trial.trial_id}: {STATS_HISTORY_CSV}",
                              ran_to_end=trial.manifest_fields()["completed"])


def load_step_rows(trial: TrialDirectory, history: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    recorded = trial.recorded_load_steps()
    imported = None if recorded is not None else _imported_ladder_steps(trial, history)
    if imported is not None:
        # Upstream measured its server telemetry over the whole run only: per step it was not measured.
        points: list[tuple[LoadStep, dict[str, Any]]] = [(step, {}) for step in imported]
    elif recorded is None:
        flat = _flat_step(trial, history)
        # A flat trial's one point is its steady window: the trial's own telemetry is measured over it.
        points = [] if flat is None else [(flat, trial.server_telemetry())]
    else:
        points = [(step, {} if step.server_summary is None else telemetry_figures(flatten(step.server_summary)))
                  for step in recorded]
    rows = [{"step": step.step, "target_users": step.target_users, "hold_s": step.hold_s,
             "started_at": step.started_at, "ended_at": step.ended_at, "window_start_ts": step.window_start,
             "window_end_ts": step.window_end, "whole_step_because": step.whole_step_because,
             "complete": step.complete, "recorded": recorded is not None or imported is not None, **telemetry}
            for step, telemetry in points]
    return rows


def rows_frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row", strict=False) if rows else pl.DataFrame(schema=schema)


def _load_steps(trial: TrialDirectory) -> pl.DataFrame:
    return rows_frame(load_step_rows(trial), LOAD_STEPS_SCHEMA)


# The tables of one row per trial, each row's values as the trial's files give them.
ONE_ROW_VALUES: dict[str, Callable[[TrialDirectory], dict[str, Any]]] = {
    "trial_manifests": TrialDirectory.manifest_fields,
    "cluster_facts": lambda trial: {**trial.cluster_facts(), **trial.reported_figures()},
    "server_telemetry": TrialDirectory.server_telemetry,
}

RAW_TABLES: dict[str, RawTable] = {table.name: table for table in (
    RawTable("trial_manifests", MANIFEST_SCHEMA,
             lambda trial: _one_row(ONE_ROW_VALUES["trial_manifests"](trial), MANIFEST_SCHEMA),
             "One row per trial: suite, family, script, knobs, status.",
             (TRIAL_JSON, STATUS_JSON, STATS_JSONL, LOGS_TXT, STATS_CSV)),
    RawTable("stats_history", STATS_HISTORY_SCHEMA, TrialDirectory.stats_history,
             f"Locust's per-second history ({STATS_HISTORY_CSV}).", (STATS_HISTORY_CSV,)),
    RawTable("locust_stats", STATS_SCHEMA, TrialDirectory.stats, f"Locust's final per-entry stats ({STATS_CSV}).",
             (STATS_CSV,)),
    RawTable("request_samples", REQUESTS_SCHEMA, TrialDirectory.requests,
             f"Every request with its exact latency ({REQUESTS_PARQUET}).", (REQUESTS_PARQUET,)),
    RawTable("runtime_events", RUNTIME_EVENTS_SCHEMA, TrialDirectory.runtime_events,
             f"The embedded runtime's events ({RUNTIME_EVENTS_PARQUET}): every restore (on a warm or a cold host), "
             "unpause, checkpoint, pause and crash, with exact timings; none for other backends.",
             (RUNTIME_EVENTS_PARQUET,)),
    RawTable("cluster_facts", CLUSTER_FACTS_SCHEMA,
             lambda trial: _one_row(ONE_ROW_VALUES["cluster_facts"](trial), CLUSTER_FACTS_SCHEMA),
             "What the trial ran on, under the reference's fact keys, and the density figures its own "
             "trial_summary row reported (reported_*).", (TRIAL_JSON, STATS_JSONL)),
    RawTable("server_telemetry", SERVER_TELEMETRY_SCHEMA,
             lambda trial: _one_row(ONE_ROW_VALUES["server_telemetry"](trial), SERVER_TELEMETRY_SCHEMA),
             "The 45 flat server_summary keys; null where nothing was measured.", (SERVER_SUMMARY_JSON, STATS_JSONL)),
    RawTable("load_steps", LOAD_STEPS_SCHEMA, _load_steps,
             f"Each step of a ladder trial ({LOAD_STEPS_JSON}, or an upstream ladder run's {STATS_HISTORY_CSV}): "
             "its span, steady window and server telemetry; a trial that recorded none is one step over its "
             "steady window.",
             (LOAD_STEPS_JSON, TRIAL_JSON, SERVER_SUMMARY_JSON, STATS_HISTORY_CSV, STATS_JSONL, LOGS_TXT)),
)}


# Each file a raw table reads, with the reader TrialDirectory reads it with: run alone, it says which file broke.
FILE_READERS: dict[str, Callable[[Path], Any]] = {
    TRIAL_JSON: read_json, STATUS_JSON: read_json, SERVER_SUMMARY_JSON: read_json, STATS_JSONL: last_rows_by_metric,
    STATS_CSV: read_stats, STATS_HISTORY_CSV: read_stats_history, REQUESTS_PARQUET: read_requests,
    LOGS_TXT: lambda path: read_run_log(log_lines(path)),
    LOAD_STEPS_JSON: read_load_steps, RUNTIME_EVENTS_PARQUET: read_runtime_events,
}



def _catalog(connection: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(schema, table) -> its columns and their types, in order, for the schemas main and changes: one query."""
    catalog: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for schema, table, column, kind in connection.execute(
            "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name IN ('main', ?) "
            "ORDER BY schema_name, table_name, column_index", [changes.SCHEMA]).fetchall():
        catalog.setdefault((schema, table), []).append((column, kind))
    return catalog


def ensure_schema(connection: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """Every raw table, with every column, the bookkeeping of loads (:mod:`changes`) and a (maybe empty) copy table
    per raw table: a warehouse written before a column existed gains it, null for the trials already loaded (not
    measured then), until a rebuild reads their files again. Each raw table's columns and their types, in order.
    Asks the catalog once when nothing is missing (every load asks)."""
    catalog = _catalog(connection)
    changed = False
    for table in RAW_TABLES.values():
        if ("main", table.name) not in catalog:
            connection.execute(table.ddl())
            changed = True
    if (changes.SCHEMA, "loads") not in catalog:
        ensure_bookkeeping(connection, RAW_TABLES)
        changed = True
    for table in RAW_TABLES.values():
        for schema in ("main", changes.SCHEMA):
            have = {name for name, _ in catalog.get((schema, table.name), [])}
            for name, dtype in table.columns.items():
                if have and name not in have:
                    connection.execute(f'ALTER TABLE {schema}.{table.name} ADD COLUMN "{name}" {duckdb_type(dtype)}')
                    changed = True
        if (changes.SCHEMA, table.name) not in catalog:
            ensure_copy(connection, table.name)
            changed = True
    if changed:
        catalog = _catalog(connection)
    return {name: catalog["main", name] for name in RAW_TABLES}
