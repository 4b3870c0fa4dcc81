"""One model's table built whole from its SQL (:func:`build`), or brought up to the loads since it was built
(:func:`update`): a per-trial model's rows of the new trials (and of their partitions') replaced, another model
rebuilt whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.models.discovery import Model, ModelError, ModelNode
from substrate_assets.warehouse.models.marks import (
    behind_a_whole_build,
    changed_trials,
    held_trials,
    past_a_load_of,
    set_mark,
    target_seq,
    upstream_of,
)
from substrate_assets.warehouse.models.narrowing import NARROWED_IDS, narrowed_query, updated_rows
from substrate_assets.warehouse.models.tables import BuiltTable, booked_columns, comparable, describe_table


def build(connection: duckdb.DuckDBPyConnection, model: Model, models: Mapping[str, ModelNode] | None = None,
          preview_rows: int = 10, books: changes.Books | None = None, *, routine: bool = False) -> BuiltTable:
    """Replace ``model``'s table with the result of its SQL, in one transaction (and mark it built through the loads
    it read, where the warehouse keeps that bookkeeping). ``routine``: a model that is not per trial, rebuilt for
    new loads under the SQL it was built with (its rows change as its SQL says they may: no new generation)."""
    books = books if books is not None else changes.read_books(connection)
    build_whole(connection, model, models, books, routine=routine)
    return describe_table(connection, model.name, preview_rows)


def build_whole(connection: duckdb.DuckDBPyConnection, model: Model, models: Mapping[str, ModelNode] | None,
           books: changes.Books | None, *, routine: bool = False) -> None:
    try:
        with transaction(connection):
            connection.execute(f"CREATE OR REPLACE TABLE {model.name} AS\n{model.sql}")
            if books is not None:
                books.columns.pop(model.name, None)  # its columns are its SQL's now
                books.updated.pop(model.name, None)
                upstream = upstream_of(model, models or {model.name: model})
                set_mark(connection, books, model.name, target_seq(books, upstream), model.fingerprint, upstream,
                         whole=not routine)
    except duckdb.Error as error:
        raise ModelError(f"{model.path}: {error}") from None


def bring_up_to_date(connection: duckdb.DuckDBPyConnection, model: Model, models: Mapping[str, ModelNode],
                     books: changes.Books | None) -> tuple[str, ...] | None:
    """Bring ``model``'s table up to the loads since it was built: a per-trial model replaces the rows of the trials
    loaded since; another model is rebuilt whole when any trial was. Built whole when it never was, its SQL changed,
    its SQL no longer gives its table's columns (a raw table that gained a column a model selects with ``*``), or
    the warehouse has no bookkeeping. ``books``: the bookkeeping (kept up to date here; a per-trial update leaves
    its rows in :func:`updated_rows` for the rest of the refresh, which ends with :func:`drop_updated_rows`). The
    trials whose rows it replaced, None when it built the table whole."""
    upstream = upstream_of(model, models)
    if books is None or model.name not in books.tables or books.fingerprint(model.name) != model.fingerprint or \
            behind_a_whole_build(books, model.name, upstream):
        build_whole(connection, model, models, books)
        return None
    built = books.mark(model.name) or 0
    target = target_seq(books, upstream)
    trial_ids = changed_trials(connection, model.name, models, built, target, books)
    if not trial_ids:
        return ()
    if not model.per_trial:
        build_whole(connection, model, models, books, routine=True)
        return None
    if model.partition_by and target != books.latest:  # a model it reads is behind: no seq to record others at
        build_whole(connection, model, models, books)
        return None
    changed, others = trial_ids, []
    if model.partition_by:
        trial_ids = _partition_trials(connection, model, changed, books)
        others = sorted(set(trial_ids) - set(changed))
    rows = updated_rows(model.name)
    try:
        with transaction(connection):
            # The new rows computed once into a temporary table: its columns say whether they still fit the
            # model's table (no second binding of the SQL to ask), and the insert copies them.
            connection.execute(f"CREATE OR REPLACE TEMP TABLE {rows} AS\n"
                               f"{narrowed_query(connection, model.sql, model.upstream, trial_ids, books)}",
                               {NARROWED_IDS: list(trial_ids)})
            if booked_columns(connection, rows) != booked_columns(connection, model.name, books):
                connection.execute(f"DROP TABLE {rows}")
                build_whole(connection, model, models, books)
                return None
            if others:
                trial_ids, target = _rewritten_partitions(connection, model, models, books, changed, others)
            table = f'"{books.database}".main.{model.name}'
            held = held_trials(connection, books, trial_ids, built, models)
            if held:
                connection.execute(f"DELETE FROM {table} WHERE list_contains(?, trial_id)", [held])
            connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {rows}")
            set_mark(connection, books, model.name, target, model.fingerprint, upstream, whole=False)
            books.updated[model.name] = tuple(trial_ids)
    except duckdb.Error as error:
        raise ModelError(f"{model.path}: {error}") from None
    return tuple(trial_ids)


def _partition_trials(connection: duckdb.DuckDBPyConnection, model: Model, trial_ids: Sequence[str],
                      books: changes.Books) -> list[str]:
    """``trial_ids`` and every trial of the partitions they join (the model's SQL over them) or leave (their rows
    in its table): the trials whose rows a partitioned model rewrites."""
    table = f'"{books.database}".main.{model.name}'
    keys = ", ".join(f'"{column}"' for column in model.partition_by)
    match = " AND ".join(f't."{column}" IS NOT DISTINCT FROM k."{column}"' for column in model.partition_by)
    keys_of = narrowed_query(connection, f"SELECT DISTINCT {keys} FROM (\n{model.sql}\n)", model.upstream,
                             trial_ids, books)
    related = connection.execute(
        f"WITH k AS (SELECT * FROM ({keys_of}) UNION "
        f"SELECT DISTINCT {keys} FROM {table} WHERE list_contains(${NARROWED_IDS}::VARCHAR[], trial_id)) "
        f"SELECT DISTINCT t.trial_id FROM {table} AS t JOIN k ON {match}", {NARROWED_IDS: list(trial_ids)}).fetchall()
    return sorted(set(trial_ids) | {row[0] for row in related})


def _rewritten_partitions(connection: duckdb.DuckDBPyConnection, model: Model, models: Mapping[str, ModelNode],
                          books: changes.Books, changed: Sequence[str], others: Sequence[str]) -> tuple[list[str], int]:
    """Of the ``others`` trials of the partitions a partitioned model's update rewrites, those whose rows its new
    rows (in :func:`updated_rows`) change: a trial that joins a partition at its end leaves the rows of the trials
    before it as they were, and those are neither rewritten nor taken up again by what reads the model. The moved
    ones are recorded as a load of the model's own, so the models that read it (and change_points) take them up as
    they take up a loaded trial. The trials to rewrite (the others' rows dropped from the updated rows) and the seq
    the model is now built through."""
    rows, table = updated_rows(model.name), f'"{books.database}".main.{model.name}'
    columns = comparable(connection, model.name, books)
    of_others = "WHERE list_contains($others::VARCHAR[], trial_id)"
    # Each side read once (materialized): planning the two EXCEPTs over them is most of the statement's cost.
    moved = sorted(row[0] for row in connection.execute(
        f"WITH new AS MATERIALIZED (SELECT {columns} FROM {rows} {of_others}), "
        f"old AS MATERIALIZED (SELECT {columns} FROM {table} {of_others}) "
        "SELECT DISTINCT trial_id FROM ((FROM new EXCEPT FROM old) UNION ALL (FROM old EXCEPT FROM new))",
        {"others": list(others)}).fetchall())
    unmoved = sorted(set(others) - set(moved))
    if unmoved:
        connection.execute(f"DELETE FROM {rows} WHERE list_contains(?, trial_id)", [unmoved])
    target = books.latest
    if moved:
        caught_up, target = books.latest, books.latest + 1
        books.latest = target
        changes.book_load(connection, books, target, model.name, moved)
        past_a_load_of(connection, books, model.name, models, caught_up, target)
    return sorted({*changed, *moved}), target
