"""Raw tables: one trial's files loaded into DuckDB, keyed by ``trial_id``, replaced in one transaction.

| table | from |
|---|---|
| ``trial_manifests`` | trial.json and status.json |
| ``stats_history`` | stats_history.csv |
| ``locust_stats`` | stats.csv |
| ``request_samples`` | requests.parquet |
| ``cluster_facts`` | trial.json ``cluster_facts`` (local) or the stats.jsonl ``trial_summary`` row (imported) |
| ``server_telemetry`` | server_summary.json, or the stats.jsonl ``server_summary`` row, as the 45 flat keys |

Loading a trial again deletes its rows and inserts the new ones in one
transaction: never duplicates, never half a trial.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from substrate_assets.facts import FACT_KEYS
from substrate_assets.results import layout
from substrate_assets.results.layout import TrialKey
from substrate_assets.results.readers import (
    REQUESTS_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    read_requests,
    read_stats,
    read_stats_history,
    read_stats_jsonl,
)
from substrate_assets.telemetry.summary import FLAT_KEYS, flatten

SMALL_FRAME_ROWS = 1_000_000
MANIFEST_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.Utf8(), "script": pl.Utf8(), "script_sha256": pl.Utf8(), "backend": pl.Utf8(), "tag": pl.Utf8(),
    "run_ts": pl.Int64(), "started_at": pl.Datetime("us", "UTC"), "ended_at": pl.Datetime("us", "UTC"),
    "completed": pl.Boolean(), "locust_exit_code": pl.Int64(), "stats_generated": pl.Boolean(),
    "users": pl.Int64(), "spawn_rate": pl.Float64(), "duration_s": pl.Int64(), "think_scale": pl.Float64(),
    "lifecycle_mode": pl.Utf8(), "resume_mode": pl.Utf8(), "actors_per_user": pl.Int64(), "trial_dir": pl.Utf8(),
    "metadata": pl.Utf8(),
}
CLUSTER_FACTS_SCHEMA: dict[str, pl.DataType] = {
    "machine_type": pl.Utf8(), "node_count": pl.Int64(), "allocatable_cores": pl.Float64(),
    "allocatable_ram_gb": pl.Float64(), "worker_pod_count": pl.Int64(), "gke_version": pl.Utf8(),
    "worker_actor_capacity": pl.Utf8(), "worker_memory_limit_gb": pl.Utf8(), "sandbox_class": pl.Utf8(),
    "run_start": pl.Int64(), "run_end": pl.Int64(),
}
SERVER_TELEMETRY_SCHEMA: dict[str, pl.DataType] = {
    key: (pl.Int64() if key == "checkpoints_in_window" else pl.Float64()) for key in FLAT_KEYS
}


def _duckdb_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP WITH TIME ZONE"
    return {pl.Utf8(): "VARCHAR", pl.Int64(): "BIGINT", pl.Int32(): "INTEGER", pl.Float64(): "DOUBLE",
            pl.Boolean(): "BOOLEAN"}[dtype]


class TrialFiles:
    """One trial directory and the few documents every loader needs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.manifest: dict[str, Any] = self._json(layout.TRIAL_JSON) or {}
        self.status: dict[str, Any] = self._json(layout.STATUS_JSON) or {}
        self._jsonl: list[dict[str, Any]] | None = None

    def _json(self, name: str) -> Any:
        path = self.directory / name
        return json.loads(path.read_text()) if path.is_file() else None

    @property
    def trial_id(self) -> str:
        return self.manifest.get("trial_id") or TrialKey.parse(self.directory.as_posix()).trial_id

    def path(self, name: str) -> Path | None:
        """``name`` in the trial directory, or upstream's local form ``<test name>_<name>``."""
        path = self.directory / name
        if path.is_file():
            return path
        prefixed = sorted(self.directory.glob(f"*_{name}"))
        return prefixed[0] if prefixed else None

    def jsonl_row(self, metric: str) -> dict[str, Any] | None:
        """The last stats.jsonl row with ``metric`` (``trial_summary``, ``server_summary``), if any."""
        if self._jsonl is None:
            path = self.path(layout.STATS_JSONL)
            self._jsonl = read_stats_jsonl(path) if path else []
        rows = [row for row in self._jsonl if row.get("metric") == metric]
        return rows[-1] if rows else None


def _empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def _one_row(values: dict[str, Any], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame([{key: values.get(key) for key in schema}], schema=schema, orient="row", strict=False)


def _timestamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _from_unix(value: Any) -> datetime | None:
    """Upstream's run_start/run_end: Unix seconds, as a string or a number."""
    seconds = _number(value)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def read_manifest(trial: TrialFiles) -> pl.DataFrame:
    manifest, status = trial.manifest, trial.status
    knobs = manifest.get("knobs", {})
    script = manifest.get("script", {})
    key = TrialKey.parse(trial.directory.as_posix()) if "runs/" in trial.directory.as_posix() else None
    exit_code = status.get("locust_exit_code", manifest.get("locust_exit_code"))
    window = ((trial.jsonl_row("trial_summary") or {}).get("measurements") or {}) if not manifest else {}
    generated = status.get("stats_generated")
    completed = manifest.get("completed")
    if completed is None and exit_code is not None:
        completed = exit_code == 0 and bool(generated)
    return _one_row({
        "suite": manifest.get("suite") or (key.suite if key else None),
        "script": script.get("name"), "script_sha256": script.get("sha256"),
        "backend": manifest.get("backend", "import"), "tag": manifest.get("tag") or (key.tag if key else None),
        "run_ts": manifest.get("run_ts") or (key.run_ts if key else None),
        "started_at": _timestamp(manifest.get("started_at")) or _from_unix(window.get("run_start")),
        "ended_at": _timestamp(manifest.get("ended_at")) or _from_unix(window.get("run_end")),
        "completed": completed, "locust_exit_code": exit_code, "stats_generated": generated,
        "users": knobs.get("users"), "spawn_rate": knobs.get("spawn_rate"), "duration_s": knobs.get("duration_s"),
        "think_scale": knobs.get("think_scale"), "lifecycle_mode": knobs.get("lifecycle_mode"),
        "resume_mode": knobs.get("resume_mode"), "actors_per_user": knobs.get("actors_per_user", 1),
        "trial_dir": str(trial.directory),
        "metadata": json.dumps(manifest.get("metadata", {}), sort_keys=True),
    }, MANIFEST_SCHEMA)


def _number(value: Any) -> Any:
    """Facts arrive as numbers (trial.json) or strings (stats.jsonl); null stays null."""
    if value is None or isinstance(value, int | float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def read_cluster_facts(trial: TrialFiles) -> pl.DataFrame:
    facts = trial.manifest.get("cluster_facts")
    values: dict[str, Any]
    if facts is not None:
        values = {**facts, "run_start": trial.manifest.get("run_start"), "run_end": trial.manifest.get("run_end")}
    else:
        row = trial.jsonl_row("trial_summary") or {}
        # Newest runners write flat string measurements; the oldest nested native numbers under
        # raw_configuration (five facts only).
        measurements = row.get("measurements") or row.get("raw_configuration") or {}
        values = {key: measurements.get(key) for key in (*FACT_KEYS, "run_start", "run_end")}
    for key in ("node_count", "worker_pod_count", "run_start", "run_end", "allocatable_cores", "allocatable_ram_gb"):
        values[key] = _number(values.get(key))
    for key in ("node_count", "worker_pod_count", "run_start", "run_end"):
        values[key] = None if values[key] is None else int(values[key])
    for key in ("worker_actor_capacity", "worker_memory_limit_gb"):
        values[key] = None if values.get(key) is None else str(values[key])
    return _one_row(values, CLUSTER_FACTS_SCHEMA)


def read_server_telemetry(trial: TrialFiles) -> pl.DataFrame:
    summary_path = trial.path(layout.SERVER_SUMMARY_JSON)
    if summary_path is not None:
        flat = flatten(json.loads(summary_path.read_text()))
    else:
        row = trial.jsonl_row("server_summary")
        flat = {key: ((row or {}).get("measurements") or {}).get(key) for key in FLAT_KEYS}
    values = {key: _number(value) for key, value in flat.items()}
    if values["checkpoints_in_window"] is not None:
        values["checkpoints_in_window"] = int(values["checkpoints_in_window"])
    return _one_row(values, SERVER_TELEMETRY_SCHEMA)


def _file_reader(name: str, read: Callable[[Path], pl.DataFrame],
                 schema: dict[str, pl.DataType]) -> Callable[[TrialFiles], pl.DataFrame]:
    def reader(trial: TrialFiles) -> pl.DataFrame:
        path = trial.path(name)
        return read(path) if path is not None else _empty(schema)

    return reader


@dataclass(frozen=True)
class RawTable:
    name: str
    schema: dict[str, pl.DataType]
    read: Callable[[TrialFiles], pl.DataFrame]
    description: str

    @property
    def columns(self) -> dict[str, pl.DataType]:
        return {"trial_id": pl.Utf8(), **self.schema}

    def ddl(self) -> str:
        columns = ", ".join(f'"{name}" {_duckdb_type(dtype)}' for name, dtype in self.columns.items())
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({columns})"

    def frame(self, trial: TrialFiles) -> pl.DataFrame:
        return self.read(trial).select(pl.lit(trial.trial_id).alias("trial_id"), *self.schema)


RAW_TABLES: dict[str, RawTable] = {table.name: table for table in (
    RawTable("trial_manifests", MANIFEST_SCHEMA, read_manifest, "One row per trial: suite, script, knobs, status."),
    RawTable("stats_history", STATS_HISTORY_SCHEMA,
             _file_reader(layout.STATS_HISTORY_CSV, read_stats_history, STATS_HISTORY_SCHEMA),
             "Locust's per-second history (stats_history.csv)."),
    RawTable("locust_stats", STATS_SCHEMA, _file_reader(layout.STATS_CSV, read_stats, STATS_SCHEMA),
             "Locust's final per-entry stats (stats.csv)."),
    RawTable("request_samples", REQUESTS_SCHEMA,
             _file_reader(layout.REQUESTS_PARQUET, read_requests, REQUESTS_SCHEMA),
             "Every request with its exact latency (requests.parquet)."),
    RawTable("cluster_facts", CLUSTER_FACTS_SCHEMA, read_cluster_facts,
             "What the trial ran on, under the reference's fact keys."),
    RawTable("server_telemetry", SERVER_TELEMETRY_SCHEMA, read_server_telemetry,
             "The 45 flat server_summary keys; null where nothing was measured."),
)}


def ensure_schema(connection: duckdb.DuckDBPyConnection) -> None:
    for table in RAW_TABLES.values():
        connection.execute(table.ddl())


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


def load_table(connection: duckdb.DuckDBPyConnection, name: str, trial: TrialFiles) -> pl.DataFrame:
    """Load one raw table for one trial; returns the rows loaded."""
    ensure_schema(connection)
    table = RAW_TABLES[name]
    frame = table.frame(trial)
    replace_rows(connection, table, [trial.trial_id], frame)
    return frame


def load_trials(connection: duckdb.DuckDBPyConnection, trials: list[TrialFiles]) -> dict[str, int]:
    """Load every raw table for many trials at once (one insert per table); rows per table.

    Files are read on a thread pool: polars releases the GIL while it parses.
    """
    ensure_schema(connection)
    counts = {}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for table in RAW_TABLES.values():
            counts[table.name] = _load_many(connection, table, trials, pool)
    return counts


def _load_many(connection: duckdb.DuckDBPyConnection, table: RawTable, trials: list[TrialFiles],
               pool: ThreadPoolExecutor) -> int:
    frames = list(pool.map(table.frame, trials))
    frame = pl.concat(frames) if frames else _empty(table.columns)
    return replace_rows(connection, table, [trial.trial_id for trial in trials], frame)
