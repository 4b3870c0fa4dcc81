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

A load whose models are brought up to it in its own transaction (:func:`~substrate_assets.warehouse.refresh.
load_and_refresh`) keeps its copy in a temporary table of its connection instead (:data:`Copy.TRANSIENT`,
:func:`transient_copy`): the refresh reads it there, and it never reaches the warehouse. On the shared warehouse
that spares a copy's write and its delete in every raw table (DuckLake asks its catalog for each statement's
files); a model that a failed test kept back reads the raw table for that trial at its next update.

Why the copies: a filter on ``trial_id`` reads every row of a raw table's ``trial_id`` column (DuckDB's min/max
statistics on strings do not tell one trial of a suite from another), so picking one trial out of 100 million
request samples costs a tenth of a second; picking it out of the copy costs nothing. A copy is dropped once every
model built so far is built through its load (:func:`prune`), and a model with no mark, or a trial with no copy,
reads the raw table itself — slower, never wrong.

Every raw write goes through :func:`substrate_assets.warehouse.trial_writes.write_trials`, so ``changes.loads``
also says which trials a raw table may hold: a trial it never loaded has no rows to delete, and its load skips the
delete.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import duckdb

from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.sql_lists import NUMBERS, TEXTS, numbers, texts

SCHEMA = "changes"
LOADS = f"{SCHEMA}.loads"
MARKS = f"{SCHEMA}.marks"
STAGED = f"{SCHEMA}.staged"


class Copy(Enum):
    """Where a load keeps a copy of its rows for the models' next update."""

    # None: a rebuild builds every model whole and has no use for one.
    NONE = "none"
    # changes.<raw table>, recorded in changes.staged, for whichever refresh comes next.
    KEPT = "kept"
    # This connection's :func:`transient_copy`, for a refresh in the load's own transaction; not recorded.
    TRANSIENT = "transient"


def transient_copy(table: str) -> str:
    """The temporary table a :data:`Copy.TRANSIENT` load keeps its copy of ``table``'s rows in."""
    return f'temp.main."{table}__loaded_rows"'


def database(connection: duckdb.DuckDBPyConnection) -> str:
    """The warehouse's catalog name: a name qualified with it cannot resolve to a CTE or TEMP table of the same name."""
    row = connection.execute("SELECT current_database()").fetchone()
    assert row is not None  # a scalar SELECT is one row
    return str(row[0])


def has_bookkeeping(connection: duckdb.DuckDBPyConnection) -> bool:
    return has_table(connection, "loads", SCHEMA)


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
    """What the bookkeeping says, read once for a refresh of every model (each query costs a millisecond or more,
    and a refresh would otherwise ask the same few dozen times)."""

    database: str
    latest: int
    marks: dict[str, Mark]
    # the tables of schema main
    tables: set[str]
    # raw table -> the trials whose rows changes.<raw table> holds -> the seq of the load that copied them
    staged: dict[str, dict[str, int]]
    # table of schema main -> its columns and their types, in order (None: ask the table)
    columns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # The loads after seq ``loads_after`` (None: none read yet), as (seq, table, trial_id): read once, on first use.
    loads: list[tuple[int, str, str]] = field(default_factory=list)
    loads_after: int | None = None
    # The models whose marks are to be written by :func:`save_marks` (None: each is written when it is set).
    unsaved: set[str] | None = None
    # Per model updated trial by trial in this refresh, the trials whose new rows its temporary table holds
    # (``models.updated_rows``): what reads the model, and its tests, take them from there, not from its table.
    updated: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per trial asked of :func:`first_loads`, the seq it was first loaded into a raw table at.
    first_loaded: dict[str, int] = field(default_factory=dict)
    # raw table -> the trials whose rows its :func:`transient_copy` holds (a :data:`Copy.TRANSIENT` load's)
    transient: dict[str, set[str]] = field(default_factory=dict)

    def mark(self, model: str) -> int | None:
        return self.marks[model].seq if model in self.marks else None

    def fingerprint(self, model: str) -> str | None:
        return self.marks[model].fingerprint if model in self.marks else None

    def generation(self, models: Iterable[str]) -> int:
        """The newest whole build among ``models`` (0: none marked)."""
        return max([0, *(self.marks[name].generation for name in models if name in self.marks)])

    def copies(self, table: str, trial_ids: Iterable[str]) -> list[str] | None:
        """The copies that together hold the rows of every one of ``trial_ids`` in ``table`` (changes.<table>, its
        :func:`transient_copy`, or both); None when some trial has no copy."""
        wanted = set(trial_ids)
        kept, transient = wanted & self.staged.get(table, {}).keys(), wanted & self.transient.get(table, set())
        if kept | transient != wanted:
            return None
        return ([f'"{self.database}".{SCHEMA}."{table}"'] if kept else []) + ([transient_copy(table)] if transient
                                                                             else [])


def read_books(connection: duckdb.DuckDBPyConnection) -> Books | None:
    """The bookkeeping as it is now; None for a warehouse without it."""
    catalog = connection.execute(
        "SELECT current_database(), schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name IN ('main', ?) "
        "ORDER BY schema_name, table_name, column_index", [SCHEMA]).fetchall()
    name = catalog[0][0] if catalog else database(connection)
    columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for _, schema, table, column, kind in catalog:
        columns.setdefault((schema, table), []).append((column, kind))
    if (SCHEMA, "loads") not in columns:
        return None
    if "upstream_generation" not in {column for column, _ in columns.get((SCHEMA, "marks"), [])}:
        # Marks kept before the generations were: none is trusted, so every model's next update builds it whole.
        connection.execute(f"DROP TABLE IF EXISTS {MARKS}")
        connection.execute(f"CREATE TABLE {MARKS} (model VARCHAR, through_seq BIGINT, fingerprint VARCHAR, "
                           "generation BIGINT, upstream_generation BIGINT)")
    marks = {row[0]: Mark(*row[1:]) for row in connection.execute(
        f"SELECT model, through_seq, fingerprint, generation, upstream_generation FROM {MARKS}").fetchall()}
    staged: dict[str, dict[str, int]] = {}
    for table, trial_id, seq in connection.execute(f"SELECT table_name, trial_id, seq FROM {STAGED}").fetchall():
        staged.setdefault(table, {})[trial_id] = seq
    main = {table: listed for (schema, table), listed in columns.items() if schema == "main"}
    return Books(name, latest_seq(connection), marks, set(main), staged, main)


def recent_loads(connection: duckdb.DuckDBPyConnection, books: Books, after: int) -> list[tuple[int, str, str]]:
    """The loads after seq ``after``, as (seq, table, trial_id): read from the warehouse once per refresh (and again
    only for an earlier ``after``), then from ``books``."""
    if books.loads_after is None or after < books.loads_after:
        upto = books.loads_after
        earlier = connection.execute(
            f"SELECT seq, table_name, trial_id FROM {LOADS} WHERE seq > ? AND (? IS NULL OR seq <= ?)",
            [after, upto, upto]).fetchall()
        books.loads = [*earlier, *books.loads]
        books.loads_after = after
    return [load for load in books.loads if load[0] > after]


def book_load(connection: duckdb.DuckDBPyConnection, books: Books, seq: int, table: str,
              trial_ids: Sequence[str]) -> None:
    """:func:`record_load`, kept in ``books`` too."""
    record_load(connection, seq, table, trial_ids)
    if books.loads_after is not None:
        books.loads += [(seq, table, trial_id) for trial_id in trial_ids]


def ensure_copy(connection: duckdb.DuckDBPyConnection, name: str) -> None:
    """``changes.<name>``, with the raw table's columns in its order (the raw table must exist)."""
    connection.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{name} AS SELECT * FROM main.{name} LIMIT 0")


def latest_seq(connection: duckdb.DuckDBPyConnection) -> int:
    row = connection.execute(f"SELECT coalesce(max(seq), 0) FROM {LOADS}").fetchone()
    assert row is not None  # an aggregate over the whole table is one row
    return int(row[0])


def next_seq(connection: duckdb.DuckDBPyConnection) -> int:
    return latest_seq(connection) + 1


def loaded_before(connection: duckdb.DuckDBPyConnection, table: str, trial_ids: Sequence[str]) -> list[str]:
    """Those of ``trial_ids`` that ``table`` has loaded: the only ones it can hold rows of."""
    return [row[0] for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {LOADS} WHERE table_name = ? AND list_contains({TEXTS}, trial_id)",
        [table, texts(trial_ids)]).fetchall()]


def record_load(connection: duckdb.DuckDBPyConnection, seq: int, table: str, trial_ids: Sequence[str]) -> None:
    connection.execute(f"INSERT INTO {LOADS} SELECT ?, ?, unnest({TEXTS})", [seq, table, texts(trial_ids)])


def held_and_staged(connection: duckdb.DuckDBPyConnection, tables: Sequence[str], trial_ids: Sequence[str]
                    ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per table of ``tables``, those of ``trial_ids`` it has loaded (the only ones it can hold rows of), and those
    whose rows changes.<table> holds a copy of: both in one query."""
    held: dict[str, list[str]] = {}
    staged: dict[str, list[str]] = {}
    for kind, table, trial_id in connection.execute(
            f"SELECT DISTINCT 'held', table_name, trial_id FROM {LOADS} "
            f"WHERE list_contains({TEXTS}, table_name) AND list_contains({TEXTS}, trial_id) UNION ALL "
            f"SELECT 'staged', table_name, trial_id FROM {STAGED} "
            f"WHERE list_contains({TEXTS}, table_name) AND list_contains({TEXTS}, trial_id)",
            [texts(tables), texts(trial_ids)] * 2).fetchall():
        (held if kind == "held" else staged).setdefault(table, []).append(trial_id)
    return held, staged


def record_loads(connection: duckdb.DuckDBPyConnection, seq: int, tables: Sequence[str], trial_ids: Sequence[str],
                 *, staged: bool) -> None:
    """One load of ``trial_ids`` into each of ``tables`` at ``seq``; with ``staged``, their rows of each table are
    (now) copied in changes.<table>, replacing any earlier copy's entry; without, no copy of them is kept."""
    pairs = [(table, trial_id) for table in tables for trial_id in trial_ids]
    tables_of, ids_of = [table for table, _ in pairs], [trial_id for _, trial_id in pairs]
    connection.execute(f"INSERT INTO {LOADS} SELECT ?, unnest({TEXTS}), unnest({TEXTS})",
                       [seq, texts(tables_of), texts(ids_of)])
    if staged:
        connection.execute(f"INSERT INTO {STAGED} SELECT unnest({TEXTS}), unnest({TEXTS}), ?",
                           [texts(tables_of), texts(ids_of), seq])


def set_mark(connection: duckdb.DuckDBPyConnection, model: str, mark: Mark, *, marked: bool | None = None) -> None:
    """``model``'s row of changes.marks replaced with ``mark``; ``marked``: whether it has one (known to the caller's
    books: one statement instead of two)."""
    values = [mark.seq, mark.fingerprint, mark.generation, mark.upstream_generation, model]
    if marked:
        connection.execute(f"UPDATE {MARKS} SET through_seq = ?, fingerprint = ?, generation = ?, "
                           "upstream_generation = ? WHERE model = ?", values)
        return
    if marked is None:
        connection.execute(f"DELETE FROM {MARKS} WHERE model = ?", [model])
    connection.execute(f"INSERT INTO {MARKS} (through_seq, fingerprint, generation, upstream_generation, model) "
                       "VALUES (?, ?, ?, ?, ?)", values)


def save_marks(connection: duckdb.DuckDBPyConnection, books: Books) -> None:
    """Write the marks set since :attr:`Books.unsaved` was started, in two statements for them all."""
    names = sorted(books.unsaved or ())
    if names:
        connection.execute(f"DELETE FROM {MARKS} WHERE list_contains({TEXTS}, model)", [texts(names)])
        marks = [books.marks[name] for name in names]
        connection.execute(f"INSERT INTO {MARKS} (model, through_seq, fingerprint, generation, upstream_generation) "
                           f"SELECT unnest({TEXTS}), unnest({NUMBERS}), unnest({TEXTS}), unnest({NUMBERS}), "
                           f"unnest({NUMBERS})",
                           [texts(names), numbers(mark.seq for mark in marks),
                            texts(mark.fingerprint for mark in marks), numbers(mark.generation for mark in marks),
                            numbers(mark.upstream_generation for mark in marks)])
    books.unsaved = set()


def changed_trials(connection: duckdb.DuckDBPyConnection, after: int, through: int, models: Collection[str] = (),
                   upstream: Collection[str] = (), books: Books | None = None) -> list[str]:
    """The trials loaded after seq ``after`` up to ``through``, sorted: into any raw table, or, among the loads a
    partitioned model records for the other trials of the partitions it rewrote (its table name in the loads,
    ``models`` all of them), those of the models in ``upstream``. ``books``: the loads read once for a refresh."""
    if books is not None:
        return sorted({trial_id for seq, table, trial_id in recent_loads(connection, books, after)
                       if seq <= through and (table not in models or table in upstream)})
    return [row[0] for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {LOADS} WHERE seq > ? AND seq <= ? AND "
        f"(NOT list_contains({TEXTS}, table_name) OR list_contains({TEXTS}, table_name)) ORDER BY trial_id",
        [after, through, texts(models), texts(upstream)]).fetchall()]


def first_loaded_after(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str], after: int,
                       models: Collection[str] = ()) -> bool:
    """Whether every one of ``trial_ids`` was first loaded (into a raw table: not one of ``models``) after seq
    ``after`` (none is a reload)."""
    counted = connection.execute(f"SELECT count(*) FROM {LOADS} WHERE seq <= ? AND list_contains({TEXTS}, trial_id) "
                                 f"AND NOT list_contains({TEXTS}, table_name)",
                                 [after, texts(trial_ids), texts(models)]).fetchone()
    assert counted is not None  # a count is one row
    return not counted[0]


def first_loads(connection: duckdb.DuckDBPyConnection, books: Books, trial_ids: Collection[str],
                models: Collection[str]) -> dict[str, int]:
    """The seq each of ``trial_ids`` was first loaded into a raw table at (not one of ``models``), asked once per
    refresh for every trial it updates: a model built through an earlier seq holds no row of it."""
    asked = sorted(set(trial_ids) - books.first_loaded.keys())
    if asked:
        books.first_loaded.update(connection.execute(
            f"SELECT trial_id, min(seq) FROM {LOADS} WHERE list_contains({TEXTS}, trial_id) "
            f"AND NOT list_contains({TEXTS}, table_name) GROUP BY trial_id", [texts(asked), texts(models)]).fetchall())
    return {trial_id: books.first_loaded[trial_id] for trial_id in trial_ids if trial_id in books.first_loaded}


def prune(connection: duckdb.DuckDBPyConnection, models: Iterable[str], books: Books | None = None) -> None:
    """Drop the copies every marked one of ``models`` is built through (they were read, and never will be again).
    A model without a mark builds whole from the raw tables: it needs no copy. ``books``: the bookkeeping as the
    refresh left it (kept up to date)."""
    if books is not None:
        seqs = [books.marks[name].seq for name in models if name in books.marks]
        if not seqs:
            return
        done = {table: [trial_id for trial_id, seq in trials.items() if seq <= min(seqs)]
                for table, trials in books.staged.items()}
        done = {table: trial_ids for table, trial_ids in done.items() if trial_ids}
        if not done:
            return
        # Names come from the bookkeeping (raw tables), the seq is an integer: one script, no round trip per table.
        connection.execute(";\n".join(
            [f"DELETE FROM {SCHEMA}.{table} WHERE trial_id IN (SELECT trial_id FROM {STAGED} "
             f"WHERE table_name = '{table}' AND seq <= {int(min(seqs))})" for table in done]
            + [f"DELETE FROM {STAGED} WHERE seq <= {int(min(seqs))}"]))
        for table, trial_ids in done.items():
            for trial_id in trial_ids:
                del books.staged[table][trial_id]
        return
    marked = connection.execute(f"SELECT min(through_seq) FROM {MARKS} WHERE list_contains({TEXTS}, model)",
                                [texts(models)]).fetchone()
    assert marked is not None  # an aggregate over the whole table is one row
    threshold = marked[0]
    if threshold is None:
        return
    staged = connection.execute(f"SELECT table_name, list(trial_id) FROM {STAGED} WHERE seq <= ? GROUP BY table_name",
                                [threshold]).fetchall()
    for table, trial_ids in staged:
        connection.execute(f"DELETE FROM {SCHEMA}.{table} WHERE list_contains({TEXTS}, trial_id)", [texts(trial_ids)])
    connection.execute(f"DELETE FROM {STAGED} WHERE seq <= ?", [threshold])
