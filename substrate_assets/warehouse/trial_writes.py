"""The raw tables' writes: trials' rows, read already (:mod:`~substrate_assets.warehouse.trial_rows`), replacing
their old rows in one transaction.

Every load — one raw asset's table for one trial, an import, a rebuild — goes through :func:`write_trials`
(:func:`load_trials` reads and writes). Every frame of every trial is built in memory first, so a trial whose files
do not read writes nothing; then one transaction deletes the trials' rows and inserts the new ones in every table:
never duplicates, never half a table, never some tables of a trial. Each load is recorded in the bookkeeping
(:mod:`~substrate_assets.warehouse.changes`), with a copy of its rows for the models' next update (kept in the
warehouse, or in the connection for a refresh in the load's own transaction).

A trial id names one trial: a load whose trial id the warehouse holds for another trial (another run-store path:
another tag, as a second machine's trial or an upstream run of the same suite and second would be), or that names
one id twice, is refused whole (:class:`TrialIdTaken`, both named) before anything is written. Replacing a trial's
rows is for loading the same trial again, wherever its store is mounted.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.results.trial_key import TrialKey
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.changes import (
    Copy,
    ensure_bookkeeping,
    ensure_copy,
    held_and_staged,
    next_seq,
    record_loads,
    transient_copy,
)
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.raw_tables import RAW_TABLES, RawTable, ensure_schema
from substrate_assets.warehouse.sql_lists import TEXTS, texts
from substrate_assets.warehouse.trial_rows import TrialFrames, read_trials

SMALL_FRAME_ROWS = 1_000_000
MANIFESTS = "trial_manifests"


class TrialIdTaken(ValueError):
    """A load names a trial id that another trial holds, in the warehouse or in the same load."""


def _identity(trial_dir: str) -> str:
    """What makes two directories one trial wherever its store is mounted: its run-store path (suite, start second,
    tag); outside a run store, the directory itself."""
    try:
        return TrialKey.parse(trial_dir).relative_path
    except ValueError:
        return trial_dir


def refuse_taken_ids(connection: duckdb.DuckDBPyConnection, read: Sequence[TrialFrames],
                     manifests_loaded: Collection[str] | None = None) -> None:
    """TrialIdTaken when two of ``read`` share an id, or the warehouse holds one of their ids for another trial.
    ``manifests_loaded``: those of their ids trial_manifests has loaded, when the bookkeeping was read already (the
    others it holds no row of: a new trial's load asks the table nothing, a catalog round trip on the lake)."""
    loading: dict[str, str] = {}
    for part in read:
        here = str(part.trial.path)
        first = loading.setdefault(part.trial_id, here)
        if _identity(first) != _identity(here):
            raise TrialIdTaken(f"trial {part.trial_id} is named by two trials of one load: {first} and {here}; "
                               "neither is loaded")
    if manifests_loaded is not None:
        loading = {trial_id: here for trial_id, here in loading.items() if trial_id in manifests_loaded}
    if not loading:
        return
    held = connection.execute("SELECT DISTINCT trial_id, trial_dir FROM trial_manifests "
                              "WHERE list_contains(?, trial_id) AND trial_dir IS NOT NULL", [list(loading)]).fetchall()
    for trial_id, trial_dir in held:
        if _identity(trial_dir) != _identity(loading[trial_id]):
            raise TrialIdTaken(f"trial {trial_id} is already in the warehouse from {trial_dir}; {loading[trial_id]} "
                               "names the same id and is refused (a trial id names one trial)")


def replace_rows(connection: duckdb.DuckDBPyConnection, table: RawTable, trial_ids: Iterable[str],
                 frame: pl.DataFrame) -> int:
    """Delete ``trial_ids``' rows of ``table`` and insert ``frame``, in one transaction, recorded as a load with a
    copy of the rows, as :func:`write_trials` records one (the table must exist)."""
    ensure_bookkeeping(connection, RAW_TABLES)
    ensure_copy(connection, table.name)
    with transaction(connection):
        _write_load(connection, [table], sorted(set(trial_ids)), {table.name: frame}, Copy.KEPT)
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


def _write_rows(connection: duckdb.DuckDBPyConnection, table: RawTable, held: Sequence[str], frame: pl.DataFrame,
                copy: Copy, columns: Sequence[tuple[str, str]]) -> None:
    """Delete ``held`` trials' rows of ``table`` and insert ``frame`` (into its ``copy`` too), in the caller's
    transaction. ``columns``: the table's, for a transient copy (declared, not asked of the warehouse)."""
    if copy is Copy.TRANSIENT:
        declared = ", ".join(f'"{name}" {kind}' for name, kind in columns)
        connection.execute(f"CREATE OR REPLACE TEMP TABLE {transient_copy(table.name)} ({declared})")
    if held:
        connection.execute(f"DELETE FROM {table.name} WHERE trial_id IN (SELECT unnest({TEXTS}))", [texts(held)])
    if frame.height:
        if frame.n_chunks() > 1 and frame.height < SMALL_FRAME_ROWS:
            frame = frame.rechunk()  # DuckDB pays per Arrow chunk: a thousand one-row chunks cost seconds
        # Plain (not view) strings: DuckDB takes them without a conversion pass.
        connection.register("incoming_rows", frame.to_arrow(compat_level=pl.CompatLevel.oldest()))
        # Unregistered once written (DuckDB refuses while a query's result is unread: only writes run before it);
        # a failed write leaves it registered, and the next load's register replaces it.
        connection.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM incoming_rows")
        if copy is Copy.KEPT:
            connection.execute(f"INSERT INTO {changes.SCHEMA}.{table.name} BY NAME SELECT * FROM incoming_rows")
        elif copy is Copy.TRANSIENT:
            connection.execute(f"INSERT INTO {transient_copy(table.name)} BY NAME SELECT * FROM incoming_rows")
        connection.unregister("incoming_rows")


def _write_load(connection: duckdb.DuckDBPyConnection, chosen: Sequence[RawTable], ids: Sequence[str],
                frames: dict[str, pl.DataFrame], copy: Copy, columns: dict[str, list[tuple[str, str]]] | None = None,
                books: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None) -> None:
    """One load of ``ids`` into the ``chosen`` tables, each table's rows of them replaced by its frame, in the
    caller's transaction, with the bookkeeping of every table read and written in a statement or two for them all;
    the rows are also kept in their ``copy`` (changes.<table> must exist for a kept one; ``columns``, each table's,
    are needed for a transient one). ``books``: what :func:`held_and_staged` says of them, when asked already."""
    names = [table.name for table in chosen]
    seq = next_seq(connection)
    held, staged = books if books is not None else held_and_staged(connection, names, ids)
    for table in chosen:
        if table.name in staged:  # a copy of an earlier load of these trials: stale now
            connection.execute(f"DELETE FROM {changes.SCHEMA}.{table.name} WHERE list_contains(?, trial_id)",
                               [staged[table.name]])
        _write_rows(connection, table, held.get(table.name, []), frames[table.name], copy,
                    (columns or {}).get(table.name, []))
    if staged:
        connection.execute(f"DELETE FROM {changes.STAGED} WHERE list_contains(?, table_name) "
                           "AND list_contains(?, trial_id)", [list(staged), list(ids)])
    record_loads(connection, seq, names, ids, staged=copy is Copy.KEPT)


def write_trials(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames], tables: Collection[str] | None = None,
                 preview_rows: int = 0, *, copy: Copy = Copy.KEPT) -> dict[str, LoadedTable]:
    """Replace the rows of the ``read`` trials in ``tables`` (default: every raw table), all in one transaction and
    one insert per table, recorded as one load in the bookkeeping, the rows also kept in their ``copy`` for the
    models' next update (:class:`~substrate_assets.warehouse.changes.Copy`); what each table received. The
    bookkeeping of every table is read and written in a statement or two for them all (a load of one trial is some
    twenty statements, not seventy)."""
    columns = ensure_schema(connection)
    chosen = [RAW_TABLES[name] for name in (tables if tables is not None else RAW_TABLES)]
    ids = sorted({part.trial_id for part in read})
    frames = {table.name: pl.concat([part.frames[table.name] for part in read]) if read
              else pl.DataFrame(schema=table.columns) for table in chosen}
    with transaction(connection):
        # One read of the bookkeeping for both: whether trial_manifests may hold an id, and what each table holds.
        names = {table.name for table in chosen}
        held, staged = held_and_staged(connection, sorted(names | {MANIFESTS}), ids)
        refuse_taken_ids(connection, read, held.get(MANIFESTS, []))
        _write_load(connection, chosen, ids, frames, copy, columns,
                    ({name: held[name] for name in held if name in names},
                     {name: staged[name] for name in staged if name in names}))
    loaded = {}
    for table in chosen:
        loaded[table.name] = LoadedTable(
            table.name, columns[table.name],
            rows={part.trial_id: part.frames[table.name].height for part in read},
            previews={part.trial_id: part.frames[table.name].head(preview_rows).rows(named=True) for part in read}
            if preview_rows else {})
    return loaded


def load_trials(connection: duckdb.DuckDBPyConnection, trials: list[TrialDirectory],
                tables: Collection[str] | None = None, preview_rows: int = 0) -> dict[str, LoadedTable]:
    """Load ``tables`` (default: every raw table) for ``trials`` in one transaction; what each load put in.
    UnreadableTrial, having written nothing, when any trial's files do not read."""
    read, unreadable = read_trials(trials, tables)
    if unreadable:
        raise unreadable[0]
    return write_trials(connection, read, tables, preview_rows)
