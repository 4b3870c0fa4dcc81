"""Raw tables: one trial's files loaded into DuckDB, keyed by ``trial_id``, replaced in one transaction.

| table | from (as :class:`~substrate_assets.results.trial_directory.TrialDirectory` reads it) |
|---|---|
| ``trial_manifests`` | trial.json and status.json (an upstream run: its path and trial_summary row) |
| ``stats_history`` | stats_history.csv |
| ``locust_stats`` | stats.csv |
| ``request_samples`` | requests.parquet |
| ``cluster_facts`` | trial.json ``cluster_facts``, or the stats.jsonl ``trial_summary`` row; that row's figures |
| ``server_telemetry`` | server_summary.json, or the stats.jsonl ``server_summary`` row, as the 45 flat keys |
| ``load_steps`` | load_steps.json (a ladder's steps); else one step: the steady window and server_telemetry |

Every load — one raw asset's table for one trial, an import, a rebuild — goes
through :func:`load_trials`. Every frame of every trial is built in memory first, so a trial whose files do not
read (:class:`UnreadableTrial`, naming the file and line) writes nothing; then one transaction deletes the trials'
rows and inserts the new ones in every table: never duplicates, never half a table, never some tables of a trial.
:func:`read_trial` is the same reading, for checking a run before it enters the store.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from substrate_assets.results.layout import TrialKey
from substrate_assets.results.load_steps import LoadStep, read_load_steps
from substrate_assets.results.readers import (
    REQUESTS_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    csv_damage,
    read_json,
    read_requests,
    read_stats,
    read_stats_history,
    read_stats_jsonl,
    typed_locust_csv,
)
from substrate_assets.results.run_log import read_run_log
from substrate_assets.results.server_summary import FLAT_KEYS, flatten
from substrate_assets.results.stats_jsonl import REPORTED_FIGURES
from substrate_assets.results.trial_directory import (
    LOAD_STEPS_JSON,
    LOGS_TXT,
    REQUESTS_PARQUET,
    SERVER_SUMMARY_JSON,
    STATS_CSV,
    STATS_HISTORY_CSV,
    STATS_JSONL,
    STATUS_JSON,
    TRIAL_JSON,
    TrialDirectory,
    telemetry_figures,
)
from substrate_assets.telemetry.window import history_samples, window_from_history, window_from_samples
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.changes import (
    ensure_bookkeeping,
    ensure_copy,
    held_and_staged,
    loaded_before,
    next_seq,
    record_load,
    record_loads,
)
from substrate_assets.warehouse.connection import transaction

SMALL_FRAME_ROWS = 1_000_000
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
    # The group of repeated trials it is one of, and the wake delay injected into the embedded runtime.
    "group_id": pl.Utf8(), "inject_wake_delay_ms": pl.Int64(),
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
    # The trial files ``read`` opens: where to look when it fails.
    files: tuple[str, ...]

    @property
    def columns(self) -> dict[str, pl.DataType]:
        return {"trial_id": pl.Utf8(), **self.schema}

    def ddl(self) -> str:
        columns = ", ".join(f'"{name}" {_duckdb_type(dtype)}' for name, dtype in self.columns.items())
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


def _load_step_rows(trial: TrialDirectory, history: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    recorded = trial.recorded_load_steps()
    if recorded is None:
        flat = _flat_step(trial, history)
        # A flat trial's one point is its steady window: the trial's own telemetry is measured over it.
        points = [] if flat is None else [(flat, trial.server_telemetry())]
    else:
        points = [(step, {} if step.server_summary is None else telemetry_figures(flatten(step.server_summary)))
                  for step in recorded]
    rows = [{"step": step.step, "target_users": step.target_users, "hold_s": step.hold_s,
             "started_at": step.started_at, "ended_at": step.ended_at, "window_start_ts": step.window_start,
             "window_end_ts": step.window_end, "whole_step_because": step.whole_step_because,
             "complete": step.complete, "recorded": recorded is not None, **telemetry}
            for step, telemetry in points]
    return rows


def _rows_frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row", strict=False) if rows else pl.DataFrame(schema=schema)


def _load_steps(trial: TrialDirectory) -> pl.DataFrame:
    return _rows_frame(_load_step_rows(trial), LOAD_STEPS_SCHEMA)


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
    RawTable("cluster_facts", CLUSTER_FACTS_SCHEMA,
             lambda trial: _one_row(ONE_ROW_VALUES["cluster_facts"](trial), CLUSTER_FACTS_SCHEMA),
             "What the trial ran on, under the reference's fact keys, and the density figures its own "
             "trial_summary row reported (reported_*).", (TRIAL_JSON, STATS_JSONL)),
    RawTable("server_telemetry", SERVER_TELEMETRY_SCHEMA,
             lambda trial: _one_row(ONE_ROW_VALUES["server_telemetry"](trial), SERVER_TELEMETRY_SCHEMA),
             "The 45 flat server_summary keys; null where nothing was measured.", (SERVER_SUMMARY_JSON, STATS_JSONL)),
    RawTable("load_steps", LOAD_STEPS_SCHEMA, _load_steps,
             f"Each step of a ladder trial ({LOAD_STEPS_JSON}): its span, steady window and server telemetry; a "
             "trial that recorded none is one step over its steady window.",
             (LOAD_STEPS_JSON, TRIAL_JSON, SERVER_SUMMARY_JSON, STATS_HISTORY_CSV, STATS_JSONL)),
)}

def _stats_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """stats.jsonl as TrialDirectory reads it, and each row an object (the readers take any JSON value)."""
    rows = read_stats_jsonl(path)
    with path.open() as handle:
        numbers = [number for number, line in enumerate(handle, start=1) if line.strip()]
    for number, row in zip(numbers, rows, strict=True):
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: not a JSON object but {type(row).__name__}")
    return rows


# Each file a raw table reads, with the reader TrialDirectory reads it with: run alone, it says which file broke.
FILE_READERS: dict[str, Callable[[Path], Any]] = {
    TRIAL_JSON: read_json, STATUS_JSON: read_json, SERVER_SUMMARY_JSON: read_json, STATS_JSONL: _stats_jsonl_rows,
    STATS_CSV: read_stats, STATS_HISTORY_CSV: read_stats_history, REQUESTS_PARQUET: read_requests,
    LOGS_TXT: lambda path: read_run_log(path.read_text(errors="replace")),
    LOAD_STEPS_JSON: read_load_steps,
}


class UnreadableTrial(ValueError):
    """A trial directory whose files do not read into its raw tables: which file (and line, where known), and why,
    in one line."""

    def __init__(self, trial_dir: Path, where: str, reason: str) -> None:
        self.trial_dir, self.where, self.reason = trial_dir, where, reason
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[UnreadableTrial], tuple[Path, str, str]]:
        # Rebuilt from its three parts when it comes back from a reading process (pickled).
        return UnreadableTrial, (self.trial_dir, self.where, self.reason)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _where_and_why(path: Path, error: Exception) -> tuple[str, str]:
    """``error``, raised reading ``path``, as (file[:line], reason) without the directory."""
    if path.stat().st_size == 0:
        return path.name, "empty file"
    if isinstance(error, json.JSONDecodeError):
        return path.name, f"not JSON: {error}"
    if isinstance(error, UnicodeDecodeError):
        return path.name, f"not UTF-8 text ({error.reason} at byte {error.start})"
    text = _first_line(error)
    # The readers name the file themselves (``<path>:<line>: <why>``): keep the line, drop the directory.
    if text.startswith(f"{path}:"):
        line, colon, why = text[len(f"{path}:"):].partition(": ")
        if colon and line.isdigit():
            return f"{path.name}:{line}", why
        return path.name, text[len(f"{path}:"):].strip()
    return path.name, text


def _diagnose(trial: TrialDirectory, table: RawTable, error: Exception) -> UnreadableTrial:
    """Which of ``table``'s files its reader refuses; failing that, the table and the error."""
    names = dict.fromkeys((TRIAL_JSON, *table.files))  # trial.json also names the trial
    present = [(name, path) for name in names if (path := trial.file(name)) is not None]
    for name, path in present:
        try:
            FILE_READERS[name](path)
        except Exception as refused:  # whatever a reader raises, this file is what is wrong
            return UnreadableTrial(trial.path, *_where_and_why(path, refused))
    where = ", ".join(path.name for _, path in present) or trial.path.name
    return UnreadableTrial(trial.path, where, f"does not read as {table.name}: {type(error).__name__}: "
                                              f"{_first_line(error)}")


@dataclass(frozen=True)
class TrialFrames:
    """One trial's rows for each raw table, read and not yet written."""

    trial: TrialDirectory
    trial_id: str
    frames: dict[str, pl.DataFrame]


def read_trial(trial: TrialDirectory, tables: Collection[str] | None = None) -> TrialFrames:
    """``tables`` (default: every raw table) of ``trial``, built in memory; UnreadableTrial if any file does not
    read."""
    frames = {}
    try:
        trial_id = trial.trial_id
    except Exception as error:  # trial.json does not read: one line saying so, not a traceback
        raise _diagnose(trial, RAW_TABLES["trial_manifests"], error) from error
    for name in (tables if tables is not None else RAW_TABLES):
        table = RAW_TABLES[name]
        try:
            frames[name] = table.frame(trial)
        except Exception as error:  # any failure to read is the trial's, reported as one line
            raise _diagnose(trial, table, error) from error
    return TrialFrames(trial, trial_id, frames)


class StagedTrial(TrialDirectory):
    """A run read where it is assembled, before it is renamed into the run store under ``key``: read as it will be
    read there."""

    def __init__(self, path: Path, key: TrialKey) -> None:
        super().__init__(path)
        self._staged_key = key

    @property  # type: ignore[override]
    def key(self) -> TrialKey:
        return self._staged_key


def check_staged_run(path: Path, key: TrialKey) -> None:
    """Read every raw table of the run at ``path`` as it will be loaded once in the store under ``key``;
    UnreadableTrial if any file does not read."""
    read_trial(StagedTrial(path, key))


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
                    connection.execute(f'ALTER TABLE {schema}.{table.name} ADD COLUMN "{name}" {_duckdb_type(dtype)}')
                    changed = True
        if (changes.SCHEMA, table.name) not in catalog:
            ensure_copy(connection, table.name)
            changed = True
    if changed:
        catalog = _catalog(connection)
    return {name: catalog["main", name] for name in RAW_TABLES}


def replace_rows(connection: duckdb.DuckDBPyConnection, table: RawTable, trial_ids: Iterable[str],
                 frame: pl.DataFrame) -> int:
    """Delete ``trial_ids``' rows of ``table`` and insert ``frame``, in one transaction, recorded as a load with a
    copy of the rows, as :func:`write_trials` records one (the table must exist)."""
    ensure_bookkeeping(connection, RAW_TABLES)
    ensure_copy(connection, table.name)
    with transaction(connection):
        _write_load(connection, [table], sorted(set(trial_ids)), {table.name: frame}, copy=True)
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

    def merged(self, other: LoadedTable) -> LoadedTable:
        return LoadedTable(self.name, other.columns, {**self.rows, **other.rows}, {**self.previews, **other.previews})


def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))


def _attempt(trial: TrialDirectory, tables: Collection[str] | None) -> TrialFrames | UnreadableTrial:
    try:
        return read_trial(trial, tables)
    except UnreadableTrial as error:
        return error


def reading_processes() -> ProcessPoolExecutor:
    """Worker processes for :func:`read_trials` over thousands of trials: reading a trial's small files is mostly
    Python (a dozen small polars frames), which one process runs on one core whatever its threads. Spawned, not
    forked: the caller holds DuckDB's threads."""
    return ProcessPoolExecutor(max_workers=max(2, os.cpu_count() or 2), mp_context=multiprocessing.get_context("spawn"))


def read_trials(trials: list[TrialDirectory], tables: Collection[str] | None = None,
                processes: Executor | None = None) -> tuple[list[TrialFrames], list[UnreadableTrial]]:
    """Every trial read into memory (on a thread pool: polars releases the GIL while it parses; or on
    ``processes``, from :func:`reading_processes`): those that read, in order, and why each other one does not."""
    if processes is not None:
        outcomes = list(processes.map(_attempt, trials, [tables] * len(trials), chunksize=max(1, len(trials) // 8)))
    else:
        with _pool() as pool:
            outcomes = list(pool.map(_attempt, trials, [tables] * len(trials)))
    return ([outcome for outcome in outcomes if isinstance(outcome, TrialFrames)],
            [outcome for outcome in outcomes if isinstance(outcome, UnreadableTrial)])


# A rebuild reads the small tables of a batch of trials table by table (:func:`bulk_read_trials`): read trial by
# trial, a dozen small polars frames cost ~15 ms of CPU a trial, mostly polars' fixed cost per frame.
BULK_TABLES = ("trial_manifests", "stats_history", "locust_stats", "cluster_facts", "server_telemetry", "load_steps")
_BULK_CSVS = {"locust_stats": (STATS_CSV, STATS_SCHEMA), "stats_history": (STATS_HISTORY_CSV, STATS_HISTORY_SCHEMA)}
_BOM = b"\xef\xbb\xbf"


def _plain_csv(path: Path) -> tuple[bytes, bytes] | None:
    """A Locust CSV's header line and its rows, when every line of it is one whole record that parses the same
    wherever it stands (no quote, carriage return, blank line or byte-order mark; every row as long as the header
    and ended by a line end: :func:`csv_damage` finds nothing), so that the rows of many such files under one header
    parse as one CSV. None for any other file, which is read on its own."""
    data = path.read_bytes()
    end = data.find(b"\n") + 1
    if not end or not data.endswith(b"\n") or data.startswith(_BOM) or b'"' in data or b"\r" in data or \
            b"\n\n" in data or csv_damage(path, data) is not None:
        return None
    return data[:end], data[end:]


@dataclass(frozen=True)
class _BulkRead:
    """A chunk of trials read table by table. ``frames`` hold the rows of the ``ids`` trials, in that order, with
    ``rows`` of each; ``others`` are the indexes of the chunk's trials left to :func:`read_trial` (a file this
    reading does not take, or one that does not read: it says which)."""

    ids: list[str]
    read: list[int]
    frames: dict[str, pl.DataFrame]
    rows: dict[str, list[int]]
    others: list[int]


def _csv_frames(texts: list[tuple[bytes, bytes] | None], schema: dict[str, pl.DataType]
                ) -> list[pl.DataFrame | None]:
    """Each file's rows (``texts``: its header and rows, None without a file), typed as its reader types them
    (:func:`~substrate_assets.results.readers.read_stats`): the files of one header parsed as one CSV. A file left
    None where its group does not parse into as many rows as its files hold lines."""
    frames: list[pl.DataFrame | None] = [None] * len(texts)
    groups: dict[bytes, list[tuple[int, bytes]]] = {}
    for index, text in enumerate(texts):
        if text is not None:
            groups.setdefault(text[0], []).append((index, text[1]))
    for header, members in groups.items():
        counts = [body.count(b"\n") for _, body in members]
        try:
            raw = pl.read_csv(io.BytesIO(b"".join([header, *(body for _, body in members)])), infer_schema=False)
        except pl.exceptions.PolarsError:
            continue
        if raw.height != sum(counts):
            continue
        typed = typed_locust_csv(raw, schema)
        offset = 0
        for (index, _), count in zip(members, counts, strict=True):
            frames[index] = typed.slice(offset, count)
            offset += count
    return frames


def _read_bulk(trials: list[TrialDirectory], tables: Collection[str]) -> _BulkRead:
    """``tables`` (of :data:`BULK_TABLES`) of ``trials``, each table built once: a one-row table from every trial's
    values, a CSV's rows parsed together with those of the other trials' files of the same header."""
    csvs = {name: _BULK_CSVS[name] for name in _BULK_CSVS if name in tables or
            (name == "stats_history" and "load_steps" in tables)}  # a flat trial's step is read off its history
    others: set[int] = set()
    ids: list[str | None] = []
    texts: dict[str, list[tuple[bytes, bytes] | None]] = {name: [] for name in csvs}
    present: dict[str, list[bool]] = {name: [] for name in csvs}
    for index, trial in enumerate(trials):
        try:
            trial_id = trial.trial_id
            paths = {name: trial.file(file) for name, (file, _) in csvs.items()}
            found = {name: _plain_csv(path) if path is not None else None for name, path in paths.items()}
        except Exception:  # read_trial says what is wrong with it
            trial_id, paths, found = None, {}, {}
        if trial_id is None or any(path is not None and found[name] is None for name, path in paths.items()):
            others.add(index)  # read on its own
            trial_id, paths, found = None, {}, {}
        ids.append(trial_id)
        for name in csvs:
            texts[name].append(found.get(name))
            present[name].append(paths.get(name) is not None)
    parsed = {name: _csv_frames(texts[name], schema) for name, (_, schema) in csvs.items()}
    values: dict[str, list[dict[str, Any]]] = {name: [] for name in tables if name not in _BULK_CSVS}
    counts: dict[str, list[int]] = {name: [] for name in tables}
    frames: dict[str, list[pl.DataFrame]] = {name: [] for name in tables if name in _BULK_CSVS}
    read = []
    for index, trial in enumerate(trials):
        if index in others:
            continue
        if any(present[name][index] and parsed[name][index] is None for name in csvs):
            others.add(index)
            continue
        try:
            history = parsed["stats_history"][index] if "stats_history" in parsed else None
            rows = {name: [ONE_ROW_VALUES[name](trial)] if name in ONE_ROW_VALUES else _load_step_rows(trial, history)
                    for name in values}
        except Exception:  # read_trial says what is wrong with it
            others.add(index)
            continue
        read.append(index)
        for name, found in rows.items():
            values[name] += found
            counts[name].append(len(found))
        for name in frames:
            frame = parsed[name][index]
            frames[name].append(frame if frame is not None else pl.DataFrame(schema=RAW_TABLES[name].schema))
            counts[name].append(frames[name][-1].height)
    read_ids = [ids[index] for index in read]
    built = {}
    for name in tables:
        table = RAW_TABLES[name]
        if name in frames:
            frame = pl.concat(frames[name]) if frames[name] else pl.DataFrame(schema=table.schema)
        else:
            frame = _rows_frame([{key: row.get(key) for key in table.schema} for row in values[name]], table.schema)
        trial_ids = pl.Series("trial_id", [trial_id for trial_id, count in zip(read_ids, counts[name], strict=True)
                                           for _ in range(count)], dtype=pl.Utf8())
        built[name] = frame.select(trial_ids, *table.schema)
    return _BulkRead(read_ids, read, built, counts, sorted(others))  # type: ignore[arg-type]


def bulk_read_trials(trials: list[TrialDirectory], tables: Collection[str] = BULK_TABLES,
                     processes: Executor | None = None) -> tuple[list[TrialFrames], list[UnreadableTrial]]:
    """What :func:`read_trials` gives for ``tables`` (of :data:`BULK_TABLES`), with each table built for many
    trials at once: its CSVs parsed together, its one-row tables built from every trial's values (on ``processes``,
    in a chunk per process). A trial with a file this reading does not take (see :func:`_plain_csv`) or that does
    not read is read on its own by :func:`read_trial`, which names the file that does not read."""
    unknown = set(tables) - set(BULK_TABLES)
    if unknown:
        raise ValueError(f"bulk_read_trials reads {', '.join(BULK_TABLES)}, not {', '.join(sorted(unknown))}")
    tables = list(dict.fromkeys(tables))
    if processes is not None and len(trials) > 1:
        size = -(-len(trials) // max(2, os.cpu_count() or 2))
        chunks = [trials[start:start + size] for start in range(0, len(trials), size)]
        bulk = list(processes.map(_read_bulk, chunks, [tables] * len(chunks)))
    else:
        chunks, bulk = [trials], [_read_bulk(trials, tables)]
    outcomes: list[TrialFrames | UnreadableTrial | None] = [None] * len(trials)
    start, alone = 0, []
    for chunk, part in zip(chunks, bulk, strict=True):
        offsets = dict.fromkeys(tables, 0)
        for position, (index, trial_id) in enumerate(zip(part.read, part.ids, strict=True)):
            frames = {}
            for name in tables:
                count = part.rows[name][position]
                frames[name] = part.frames[name].slice(offsets[name], count)
                offsets[name] += count
            outcomes[start + index] = TrialFrames(chunk[index], trial_id, frames)
        alone += [start + index for index in part.others]
        start += len(chunk)
    if alone:
        read, unreadable = read_trials([trials[index] for index in alone], tables)
        by_path = {outcome.trial.path if isinstance(outcome, TrialFrames) else outcome.trial_dir: outcome
                   for outcome in [*read, *unreadable]}
        for index in alone:
            outcomes[index] = by_path[trials[index].path]
    return ([outcome for outcome in outcomes if isinstance(outcome, TrialFrames)],
            [outcome for outcome in outcomes if isinstance(outcome, UnreadableTrial)])


def _write_rows(connection: duckdb.DuckDBPyConnection, table: RawTable, held: Sequence[str], frame: pl.DataFrame,
                copy: bool) -> None:
    """Delete ``held`` trials' rows of ``table`` and insert ``frame`` (with ``copy``, into changes.<table> too), in the
    caller's transaction."""
    if held:
        connection.execute(f"DELETE FROM {table.name} WHERE trial_id IN (SELECT unnest(?::VARCHAR[]))", [list(held)])
    if frame.height:
        if frame.n_chunks() > 1 and frame.height < SMALL_FRAME_ROWS:
            frame = frame.rechunk()  # DuckDB pays per Arrow chunk: a thousand one-row chunks cost seconds
        # Plain (not view) strings: DuckDB takes them without a conversion pass.
        connection.register("incoming_rows", frame.to_arrow(compat_level=pl.CompatLevel.oldest()))
        # Unregistered once written (DuckDB refuses while a query's result is unread: only writes run before it);
        # a failed write leaves it registered, and the next load's register replaces it.
        connection.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM incoming_rows")
        if copy:
            connection.execute(f"INSERT INTO {changes.SCHEMA}.{table.name} BY NAME SELECT * FROM incoming_rows")
        connection.unregister("incoming_rows")


def _write_load(connection: duckdb.DuckDBPyConnection, chosen: Sequence[RawTable], ids: Sequence[str],
                frames: dict[str, pl.DataFrame], copy: bool) -> None:
    """One load of ``ids`` into the ``chosen`` tables, each table's rows of them replaced by its frame, in the
    caller's transaction, with the bookkeeping of every table read and written in a statement or two for them all;
    with ``copy``, the rows are also kept in changes.<table> (whose table must exist)."""
    names = [table.name for table in chosen]
    seq = next_seq(connection)
    held, staged = held_and_staged(connection, names, ids)
    for table in chosen:
        if table.name in staged:  # a copy of an earlier load of these trials: stale now
            connection.execute(f"DELETE FROM {changes.SCHEMA}.{table.name} WHERE list_contains(?, trial_id)",
                               [staged[table.name]])
        _write_rows(connection, table, held.get(table.name, []), frames[table.name], copy)
    if staged:
        connection.execute(f"DELETE FROM {changes.STAGED} WHERE list_contains(?, table_name) "
                           "AND list_contains(?, trial_id)", [list(staged), list(ids)])
    record_loads(connection, seq, names, ids, staged=copy)


def write_trials(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames], tables: Collection[str] | None = None,
                 preview_rows: int = 0, *, copy: bool = True) -> dict[str, LoadedTable]:
    """Replace the rows of the ``read`` trials in ``tables`` (default: every raw table), all in one transaction and
    one insert per table, recorded as one load in the bookkeeping (with ``copy``, the rows are also kept for the
    models' next update: a rebuild, which builds every model whole, has no use for them); what each table
    received. The bookkeeping of every table is read and written in a statement or two for them all (a load of one
    trial is some twenty statements, not seventy)."""
    columns = ensure_schema(connection)
    chosen = [RAW_TABLES[name] for name in (tables if tables is not None else RAW_TABLES)]
    ids = sorted({part.trial_id for part in read})
    frames = {table.name: pl.concat([part.frames[table.name] for part in read]) if read
              else pl.DataFrame(schema=table.columns) for table in chosen}
    with transaction(connection):
        _write_load(connection, chosen, ids, frames, copy)
    loaded = {}
    for table in chosen:
        loaded[table.name] = LoadedTable(
            table.name, columns[table.name],
            rows={part.trial_id: part.frames[table.name].height for part in read},
            previews={part.trial_id: part.frames[table.name].head(preview_rows).rows(named=True) for part in read}
            if preview_rows else {})
    return loaded


def bulk_request_samples(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames],
                         preview_rows: int = 0) -> LoadedTable | None:
    """The request_samples of the ``read`` trials (loaded just now, as one load: the latest seq, without copies)
    inserted by DuckDB straight from their requests.parquet files, in the caller's transaction: one parallel scan
    of every file instead of polars reading each into memory and DuckDB copying it in again. None, having written
    nothing, when a file's columns are not of the table's types (polars' casts, in read_requests, are the rule
    then); a file that does not read raises duckdb.Error."""
    table = RAW_TABLES["request_samples"]
    present = [(part.trial_id, path) for part in read if (path := part.trial.file(REQUESTS_PARQUET)) is not None]
    rows = dict.fromkeys((part.trial_id for part in read), 0)
    previews: dict[str, list[dict[str, Any]]] = {part.trial_id: [] for part in read} if preview_rows else {}
    files = [str(path) for _, path in present]
    source = "read_parquet(?, union_by_name = true, hive_partitioning = false)"
    wanted = {name: _duckdb_type(dtype) for name, dtype in table.schema.items()}
    found = {row[0]: row[1] for row in connection.execute(f"DESCRIBE SELECT * FROM {source}", [files]).fetchall()} \
        if files else {}
    if any(name in found and found[name] != kind for name, kind in wanted.items()):
        return None
    held = loaded_before(connection, table.name, list(rows))
    if held:  # loaded before: their rows go first, as any load's
        connection.execute(f"DELETE FROM {table.name} WHERE trial_id IN (SELECT unnest(?::VARCHAR[]))", [held])
    if files:
        columns = ", ".join(f'r."{name}"' if name in found else f'NULL::{kind} AS "{name}"'
                            for name, kind in wanted.items())
        connection.execute("CREATE OR REPLACE TEMP TABLE bulk_files AS "
                           "SELECT unnest(range(?)) AS file_index, unnest(?::VARCHAR[]) AS trial_id",
                           [len(files), [trial_id for trial_id, _ in present]])
        # A join on the file's index (the trial_id of each file) costs nothing beside the scan. (A failed insert
        # leaves bulk_files to the rollback.)
        connection.execute(f"INSERT INTO {table.name} BY NAME SELECT f.trial_id, {columns} FROM {source} AS r "
                           "JOIN temp.main.bulk_files AS f ON f.file_index = r.file_index", [files])
        connection.execute("DROP TABLE temp.main.bulk_files")
        counted = dict(connection.execute("SELECT file_name, num_rows FROM parquet_file_metadata(?)",
                                          [files]).fetchall())
        rows.update({trial_id: counted[str(path)] for trial_id, path in present})
        if preview_rows:
            previews.update({trial_id: read_requests(path, preview_rows).rows(named=True)
                             for trial_id, path in present})
    record_load(connection, changes.latest_seq(connection), table.name, list(rows))
    return LoadedTable(table.name, table_columns(connection, table.name), rows, previews)


def table_columns(connection: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, str]]:
    """``name``'s columns and their types, in order."""
    return [(row[0], row[1]) for row in connection.execute(f"DESCRIBE {name}").fetchall()]


def load_trials(connection: duckdb.DuckDBPyConnection, trials: list[TrialDirectory],
                tables: Collection[str] | None = None, preview_rows: int = 0) -> dict[str, LoadedTable]:
    """Load ``tables`` (default: every raw table) for ``trials`` in one transaction; what each load put in.
    UnreadableTrial, having written nothing, when any trial's files do not read."""
    read, unreadable = read_trials(trials, tables)
    if unreadable:
        raise unreadable[0]
    return write_trials(connection, read, tables, preview_rows)
