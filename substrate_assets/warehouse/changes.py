"""What changed in the warehouse since each model was built: the bookkeeping that makes a model's update cost one
trial, not the whole history.

It lives in the schema ``changes``, beside the tables (``main``) that people query:

- ``changes.loads``: one row per raw table per trial per load: the load's sequence number (``seq``), the table,
  the trial.
- ``changes.marks``: per model, the ``seq`` it is built through (every load up to it is in its table), a
  fingerprint of what built it, the generation of its last whole build (a counter over the warehouse's whole builds)
  and the newest generation of the models it reads when it was last brought up to date: a model read by one that
  was built whole since is built whole too (every row of the model it reads may have changed).
- ``changes.staged``: per raw table, the trials whose rows are also kept in ``changes.<raw table>``, and the load's
  ``seq``.
- ``changes.<raw table>``: a copy of the rows of recently loaded trials, for the models that have not taken them up.

Why the copies: a filter on ``trial_id`` reads every row of a raw table's ``trial_id`` column (DuckDB's min/max
statistics on strings do not tell one trial of a suite from another), so picking one trial out of 100 million
request samples costs a tenth of a second; picking it out of the copy costs nothing. A copy is dropped once every
model built so far is built through its load (:func:`prune`), and a model with no mark, or a trial with no copy,
reads the raw table itself — slower, never wrong.

Every raw write goes through :func:`substrate_assets.warehouse.raw.write_trials`, so ``changes.loads`` also says
which trials a raw table may hold: a trial it never loaded has no rows to delete, and its load skips the delete.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import duckdb

SCHEMA = "changes"
LOADS = f"{SCHEMA}.loads"
MARKS = f"{SCHEMA}.marks"
STAGED = f"{SCHEMA}.staged"


def database(connection: duckdb.DuckDBPyConnection) -> str:
    """The warehouse's catalog name: a name qualified with it cannot resolve to a TEMP view of the same name."""
    return connection.execute("SELECT current_database()").fetchone()[0]




def has_bookkeeping(connection: duckdb.DuckDBPyConnection) -> bool:
    return bool(connection.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                                   "AND schema_name = ? AND table_name = 'loads'", [SCHEMA]).fetchone()[0])


def ensure_bookkeeping(connection: duckdb.DuckDBPyConnection, raw_tables: Iterable[str]) -> None:
    """The ``changes`` tables. A warehouse written before they existed is taken as loaded at seq 0 (every trial its
    raw tables hold), with no model marked: each model's next update is a full build."""
    if has_bookkeeping(connection):
        return
    existing = {row[0] for row in connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()}
    connection.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    connection.execute(f"CREATE TABLE IF NOT EXISTS {MARKS} (model VARCHAR, through_seq BIGINT, fingerprint VARCHAR, "
                       "generation BIGINT, upstream_generation BIGINT)")
    connection.execute(f"CREATE TABLE IF NOT EXISTS {STAGED} (table_name VARCHAR, trial_id VARCHAR, seq BIGINT)")
    connection.execute(f"CREATE TABLE IF NOT EXISTS {LOADS} (seq BIGINT, table_name VARCHAR, trial_id VARCHAR)")
    for name in raw_tables:
        if name in existing:
            connection.execute(f"INSERT INTO {LOADS} SELECT DISTINCT 0, ?, trial_id FROM main.{name}", [name])


@dataclass(frozen=True)
class Mark:
    """One row of changes.marks."""

    seq: int
    fingerprint: str
    generation: int
    upstream_generation: int


@dataclass
class Books:
    """What the bookkeeping says, read once for a refresh of every model (each query costs a millisecond or more)."""

    database: str
    latest: int
    marks: dict[str, Mark]
    # the tables of schema main
    tables: set[str]
    # raw table -> the trials whose rows changes.<raw table> holds
    staged: dict[str, set[str]]

    def mark(self, model: str) -> int | None:
        return self.marks[model].seq if model in self.marks else None

    def fingerprint(self, model: str) -> str | None:
        return self.marks[model].fingerprint if model in self.marks else None

    def generation(self, models: Iterable[str]) -> int:
        """The newest whole build among ``models`` (0: none marked)."""
        return max([0, *(self.marks[name].generation for name in models if name in self.marks)])


def read_books(connection: duckdb.DuckDBPyConnection) -> Books | None:
    """The bookkeeping as it is now; None for a warehouse without it."""
    name, booked, tables = connection.execute(
        "SELECT current_database(), count(*) FILTER (WHERE schema_name = ? AND table_name = 'loads'), "
        "coalesce(list(table_name) FILTER (WHERE schema_name = 'main'), []) "
        "FROM duckdb_tables() WHERE database_name = current_database()", [SCHEMA]).fetchone()
    if not booked:
        return None
    if not connection.execute("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() AND "
                              "schema_name = ? AND table_name = 'marks' AND column_name = 'upstream_generation'",
                              [SCHEMA]).fetchone()[0]:
        # Marks kept before the generations were: none is trusted, so every model's next update builds it whole.
        connection.execute(f"DROP TABLE {MARKS}")
        connection.execute(f"CREATE TABLE {MARKS} (model VARCHAR, through_seq BIGINT, fingerprint VARCHAR, "
                           "generation BIGINT, upstream_generation BIGINT)")
    marks = {row[0]: Mark(*row[1:]) for row in connection.execute(
        f"SELECT model, through_seq, fingerprint, generation, upstream_generation FROM {MARKS}").fetchall()}
    staged = {table: set(ids) for table, ids in connection.execute(
        f"SELECT table_name, list(trial_id) FROM {STAGED} GROUP BY table_name").fetchall()}
    return Books(name, latest_seq(connection), marks, set(tables), staged)


def has_copy(connection: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(connection.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                                   "AND schema_name = ? AND table_name = ?", [SCHEMA, name]).fetchone()[0])


def ensure_copy(connection: duckdb.DuckDBPyConnection, name: str) -> None:
    """``changes.<name>``, with the raw table's columns in its order (the raw table must exist)."""
    connection.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{name} AS SELECT * FROM main.{name} LIMIT 0")


def latest_seq(connection: duckdb.DuckDBPyConnection) -> int:
    return connection.execute(f"SELECT coalesce(max(seq), 0) FROM {LOADS}").fetchone()[0]


def next_seq(connection: duckdb.DuckDBPyConnection) -> int:
    return latest_seq(connection) + 1


def loaded_before(connection: duckdb.DuckDBPyConnection, table: str, trial_ids: Sequence[str]) -> list[str]:
    """Those of ``trial_ids`` that ``table`` has loaded: the only ones it can hold rows of."""
    return [row[0] for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {LOADS} WHERE table_name = ? AND list_contains(?, trial_id)",
        [table, list(trial_ids)]).fetchall()]


def record_load(connection: duckdb.DuckDBPyConnection, seq: int, table: str, trial_ids: Sequence[str]) -> None:
    connection.execute(f"INSERT INTO {LOADS} SELECT ?, ?, unnest(?::VARCHAR[])", [seq, table, list(trial_ids)])


def stage(connection: duckdb.DuckDBPyConnection, seq: int, table: str, trial_ids: Sequence[str],
          relation: str | None) -> None:
    """Replace the copy of ``trial_ids``' rows of ``table`` with ``relation``'s rows (None: they have none)."""
    ensure_copy(connection, table)
    ids = list(trial_ids)
    connection.execute(f"DELETE FROM {SCHEMA}.{table} WHERE list_contains(?, trial_id)", [ids])
    connection.execute(f"DELETE FROM {STAGED} WHERE table_name = ? AND list_contains(?, trial_id)", [table, ids])
    if relation is not None:
        connection.execute(f"INSERT INTO {SCHEMA}.{table} BY NAME SELECT * FROM {relation}")
    connection.execute(f"INSERT INTO {STAGED} SELECT ?, unnest(?::VARCHAR[]), ?", [table, ids, seq])


def unstage(connection: duckdb.DuckDBPyConnection, table: str, trial_ids: Sequence[str]) -> None:
    """Forget any copy of ``trial_ids``' rows of ``table``: they were loaded again without one, so it is stale."""
    if has_copy(connection, table):
        ids = list(trial_ids)
        connection.execute(f"DELETE FROM {SCHEMA}.{table} WHERE list_contains(?, trial_id)", [ids])
        connection.execute(f"DELETE FROM {STAGED} WHERE table_name = ? AND list_contains(?, trial_id)", [table, ids])






def set_mark(connection: duckdb.DuckDBPyConnection, model: str, mark: Mark) -> None:
    connection.execute(f"DELETE FROM {MARKS} WHERE model = ?", [model])
    connection.execute(f"INSERT INTO {MARKS} VALUES (?, ?, ?, ?, ?)",
                       [model, mark.seq, mark.fingerprint, mark.generation, mark.upstream_generation])


def changed_trials(connection: duckdb.DuckDBPyConnection, after: int, through: int, models: Collection[str] = (),
                   upstream: Collection[str] = ()) -> list[str]:
    """The trials loaded after seq ``after`` up to ``through``, sorted: into any raw table, or, among the loads a
    partitioned model records for the other trials of the partitions it rewrote (its table name in the loads,
    ``models`` all of them), those of the models in ``upstream``."""
    return [row[0] for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {LOADS} WHERE seq > ? AND seq <= ? AND "
        "(NOT list_contains(?::VARCHAR[], table_name) OR list_contains(?::VARCHAR[], table_name)) ORDER BY trial_id",
        [after, through, list(models), list(upstream)]).fetchall()]


def first_loaded_after(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str], after: int,
                       models: Collection[str] = ()) -> bool:
    """Whether every one of ``trial_ids`` was first loaded (into a raw table: not one of ``models``) after seq
    ``after`` (none is a reload)."""
    return not connection.execute(f"SELECT count(*) FROM {LOADS} WHERE seq <= ? AND list_contains(?, trial_id) "
                                  "AND NOT list_contains(?::VARCHAR[], table_name)",
                                  [after, list(trial_ids), list(models)]).fetchone()[0]


def prune(connection: duckdb.DuckDBPyConnection, models: Iterable[str]) -> None:
    """Drop the copies every marked one of ``models`` is built through (they were read, and never will be again).
    A model without a mark builds whole from the raw tables: it needs no copy."""
    threshold = connection.execute(f"SELECT min(through_seq) FROM {MARKS} WHERE list_contains(?, model)",
                                   [list(models)]).fetchone()[0]
    if threshold is None:
        return
    done = connection.execute(f"SELECT table_name, list(trial_id) FROM {STAGED} WHERE seq <= ? GROUP BY table_name",
                              [threshold]).fetchall()
    for table, trial_ids in done:
        connection.execute(f"DELETE FROM {SCHEMA}.{table} WHERE list_contains(?, trial_id)", [trial_ids])
    connection.execute(f"DELETE FROM {STAGED} WHERE seq <= ?", [threshold])
