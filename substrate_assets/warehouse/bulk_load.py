"""A rebuild's bulk load: many trials' raw tables read table by table (:func:`bulk_read_trials`), and their
request_samples and runtime_events inserted by DuckDB straight from the parquet files (:func:`bulk_parquet_table`).

Both give what reading and writing trial by trial (:mod:`~substrate_assets.warehouse.trial_rows`,
:mod:`~substrate_assets.warehouse.trial_writes`) gives, at a fraction of the cost per trial; a trial they do not
take is read on its own.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Collection
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from substrate_assets.results.readers import (
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    csv_damage,
    read_requests,
    read_runtime_events,
    typed_locust_csv,
)
from substrate_assets.results.trial_directory import (
    REQUESTS_PARQUET,
    RUNTIME_EVENTS_PARQUET,
    STATS_CSV,
    STATS_HISTORY_CSV,
    TrialDirectory,
)
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.changes import loaded_before, record_load
from substrate_assets.warehouse.introspection import table_columns
from substrate_assets.warehouse.raw_tables import (
    ONE_ROW_VALUES,
    RAW_TABLES,
    duckdb_type,
    load_step_rows,
    rows_frame,
)
from substrate_assets.warehouse.sql_lists import TEXTS, texts
from substrate_assets.warehouse.trial_rows import TrialFrames, UnreadableTrial, read_trials
from substrate_assets.warehouse.trial_writes import LoadedTable

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
            rows = {name: [ONE_ROW_VALUES[name](trial)] if name in ONE_ROW_VALUES else load_step_rows(trial, history)
                    for name in values}
        except Exception:  # read_trial says what is wrong with it
            others.add(index)
            continue
        read.append(index)
        for name, added in rows.items():
            values[name] += added
            counts[name].append(len(added))
        for name in frames:
            frame = parsed[name][index]
            frames[name].append(frame if frame is not None else pl.DataFrame(schema=RAW_TABLES[name].schema))
            counts[name].append(frames[name][-1].height)
    read_ids: list[str] = []
    for index in read:
        trial_id = ids[index]
        assert trial_id is not None  # a trial without an id is one of ``others``, left to read_trial
        read_ids.append(trial_id)
    built = {}
    for name in tables:
        table = RAW_TABLES[name]
        if name in frames:
            frame = pl.concat(frames[name]) if frames[name] else pl.DataFrame(schema=table.schema)
        else:
            frame = rows_frame([{key: row.get(key) for key in table.schema} for row in values[name]], table.schema)
        trial_ids = pl.Series("trial_id", [trial_id for trial_id, count in zip(read_ids, counts[name], strict=True)
                                           for _ in range(count)], dtype=pl.Utf8())
        built[name] = frame.select(trial_ids, *table.schema)
    return _BulkRead(read_ids, read, built, counts, sorted(others))


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
        read_alone: list[TrialFrames | UnreadableTrial] = [*read, *unreadable]
        by_path = {outcome.trial.path if isinstance(outcome, TrialFrames) else outcome.trial_dir: outcome
                   for outcome in read_alone}
        for index in alone:
            outcomes[index] = by_path[trials[index].path]
    return ([outcome for outcome in outcomes if isinstance(outcome, TrialFrames)],
            [outcome for outcome in outcomes if isinstance(outcome, UnreadableTrial)])


# The raw tables of a trial's Parquet files, each inserted by DuckDB from them, with the reader a single load uses.
PARQUET_TABLES: dict[str, tuple[str, Callable[..., pl.DataFrame]]] = {
    "request_samples": (REQUESTS_PARQUET, read_requests),
    "runtime_events": (RUNTIME_EVENTS_PARQUET, read_runtime_events),
}


def bulk_parquet_table(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames], name: str,
                       preview_rows: int = 0) -> LoadedTable | None:
    """The ``name`` table (:data:`PARQUET_TABLES`) of the ``read`` trials (loaded just now, as one load: the latest
    seq, without copies) inserted by DuckDB straight from their Parquet files, in the caller's transaction: one
    parallel scan of every file instead of polars reading each into memory and DuckDB copying it in again; a column
    an older file lacks is null. None, having written nothing, when a file's columns are not of the table's types
    (polars' casts, in the single load's reader, are the rule then); a file that does not read raises
    duckdb.Error."""
    table = RAW_TABLES[name]
    file_name, reader = PARQUET_TABLES[name]
    present = [(part.trial_id, path) for part in read if (path := part.trial.file(file_name)) is not None]
    rows = dict.fromkeys((part.trial_id for part in read), 0)
    previews: dict[str, list[dict[str, Any]]] = {part.trial_id: [] for part in read} if preview_rows else {}
    files = [str(path) for _, path in present]
    source = f"read_parquet({TEXTS}, union_by_name = true, hive_partitioning = false)"
    wanted = {name: duckdb_type(dtype) for name, dtype in table.schema.items()}
    found = {row[0]: row[1] for row in connection.execute(f"DESCRIBE SELECT * FROM {source}",
                                                          [texts(files)]).fetchall()} \
        if files else {}
    if any(name in found and found[name] != kind for name, kind in wanted.items()):
        return None
    held = loaded_before(connection, table.name, list(rows))
    if held:  # loaded before: their rows go first, as any load's
        connection.execute(f"DELETE FROM {table.name} WHERE trial_id IN (SELECT unnest({TEXTS}))", [texts(held)])
    if files:
        columns = ", ".join(f'r."{name}"' if name in found else f'NULL::{kind} AS "{name}"'
                            for name, kind in wanted.items())
        connection.execute("CREATE OR REPLACE TEMP TABLE bulk_files AS "
                           f"SELECT unnest(range(?)) AS file_index, unnest({TEXTS}) AS trial_id",
                           [len(files), texts(trial_id for trial_id, _ in present)])
        # A join on the file's index (the trial_id of each file) costs nothing beside the scan. (A failed insert
        # leaves bulk_files to the rollback.)
        connection.execute(f"INSERT INTO {table.name} BY NAME SELECT f.trial_id, {columns} FROM {source} AS r "
                           "JOIN temp.main.bulk_files AS f ON f.file_index = r.file_index", [texts(files)])
        connection.execute("DROP TABLE temp.main.bulk_files")
        counted = dict(connection.execute(f"SELECT file_name, num_rows FROM parquet_file_metadata({TEXTS})",
                                          [texts(files)]).fetchall())
        rows.update({trial_id: counted[str(path)] for trial_id, path in present})
        if preview_rows:
            previews.update({trial_id: reader(path).head(preview_rows).rows(named=True)
                             for trial_id, path in present})
    record_load(connection, changes.latest_seq(connection), table.name, list(rows))
    return LoadedTable(table.name, table_columns(connection, table.name), rows, previews)
