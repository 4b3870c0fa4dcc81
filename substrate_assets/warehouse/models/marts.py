"""Every model under a directory built whole (:func:`build_marts`) or brought up to the latest loads
(:func:`update_marts`) in order, then change_points and the noise floor from metric_history, then the column tests
of schema.yml; and the copies of loads every model has taken up dropped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.change_points import (
    CHANGE_POINTS,
    METRIC_HISTORY,
    replace_change_points,
    replace_series_change_points,
)
from substrate_assets.warehouse.checks import TestOutcome, load_tests, run_test_groups, run_tests
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.models.build import bring_up_to_date, build
from substrate_assets.warehouse.models.discovery import Model, build_order, discover, models_directory
from substrate_assets.warehouse.models.marks import behind_a_whole_build, read_by, set_mark, target_seq
from substrate_assets.warehouse.models.narrowing import drop_updated_rows, held_rows
from substrate_assets.warehouse.models.tables import BuiltTable, describe_table, describe_tables
from substrate_assets.warehouse.noise_floor import NOISE_FLOOR, replace_noise_floor

# change_points' fingerprint in changes.marks: it is built in Python, not from a SQL file.
CHANGE_POINTS_BUILT_BY = "change_points (Python)"


def build_all(connection: duckdb.DuckDBPyConnection, models: dict[str, Model]) -> list[BuiltTable]:
    return [build(connection, model, models) for model in build_order(models)]


def _tests(directory: Path, models: dict[str, Model]) -> list:
    return [test for group in load_tests(directory / "schema.yml", set(models)).values() for test in group]


def build_marts(connection: duckdb.DuckDBPyConnection,
                directory: Path | None = None) -> tuple[list[BuiltTable], list[TestOutcome]]:
    """Every model under ``directory`` built whole in order, then change_points from metric_history (when that is
    one of them), then every column test of its schema.yml run over every row."""
    directory = directory or models_directory()
    models = discover(directory)
    with transaction(connection):
        books = changes.read_books(connection)
        built = [build(connection, model, models, books=books) for model in build_order(models)]
        if METRIC_HISTORY in models:
            replace_change_points(connection)
            if books is not None:
                set_mark(connection, books, CHANGE_POINTS, target_seq(books, [METRIC_HISTORY]), CHANGE_POINTS_BUILT_BY,
                         [METRIC_HISTORY], whole=True)
            built.append(describe_table(connection, CHANGE_POINTS))
            replace_noise_floor(connection)
            built.append(describe_table(connection, NOISE_FLOOR))
        prune_copies(connection, models)
    return built, run_tests(connection, _tests(directory, models))


def prune_copies(connection: duckdb.DuckDBPyConnection, models: dict[str, Model],
                 books: changes.Books | None = None) -> None:
    """Drop the copies of loads (:mod:`changes`) that every one of ``models`` (and change_points, built on
    metric_history) has taken up. ``books``: the bookkeeping the refresh kept up to date (none asked again)."""
    names = [*models, CHANGE_POINTS] if METRIC_HISTORY in models else list(models)
    if books is not None:
        with transaction(connection):
            changes.prune(connection, names, books)
    elif changes.has_bookkeeping(connection):
        with transaction(connection):
            changes.prune(connection, names)


def scope_of(table: BuiltTable, per_trial: bool) -> Sequence[str] | None:
    """The trials a column test of ``table`` need look at: those it just updated, for a per-trial table (the
    others were tested when they were loaded); None (every row) otherwise."""
    return table.updated if per_trial and table.updated is not None else None


def update_marts(connection: duckdb.DuckDBPyConnection, directory: Path | None = None, preview_rows: int = 10,
                 books: changes.Books | None = None) -> tuple[list[BuiltTable], list[TestOutcome]]:
    """Every model under ``directory`` brought up to the latest loads (:func:`update`), in order, then change_points;
    the column tests run over the rows each update wrote (a per-trial model's new trials; another model's whole
    table, when it was rebuilt). ``books``: the bookkeeping, when the caller has read it in this transaction."""
    directory = directory or models_directory()
    models = discover(directory)
    with transaction(connection):  # one commit for the whole refresh
        books = books if books is not None else changes.read_books(connection)
        if books is not None:
            # Every model's mark written at the end, in two statements for them all (a statement costs about a
            # millisecond; one per model, a dozen).
            books.unsaved = set()
        updated = [(model.name, bring_up_to_date(connection, model, models, books)) for model in build_order(models)]
        if METRIC_HISTORY in models:
            updated.append((CHANGE_POINTS, _update_change_points(connection, books, models)))
            updated.append((NOISE_FLOOR, None))
        if books is not None:
            changes.save_marks(connection, books)
        prune_copies(connection, models, books)
        built = describe_tables(connection, updated, preview_rows, books)
    tests = load_tests(directory / "schema.yml", set(models))
    groups = [(tests.get(table.name, []), scope_of(table, table.name in models and models[table.name].per_trial))
              for table in built if table.updated != ()]  # a table with nothing new was tested when it last changed
    outcomes = [outcome for group in run_test_groups(connection, groups, rows=held_rows(books)) for outcome in group]
    if books is not None:
        drop_updated_rows(connection, books)
    return built, outcomes


def update_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None = None,
                         models: dict[str, Model] | None = None) -> BuiltTable:
    """change_points brought up to metric_history: only the series of trials loaded for the first time since it was
    built are analysed again (a new trial can move a change point of its own series only); the whole table when a
    trial was loaded again (it may have left a series), when it never was built, or without bookkeeping."""
    return describe_table(connection, CHANGE_POINTS, updated=_update_change_points(connection, books, models))


def _update_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None,
                          models: dict[str, Model] | None) -> tuple[str, ...] | None:
    """:func:`update_change_points` without the description: the trials whose series it analysed again, None when
    it built the table whole."""
    books = books if books is not None else changes.read_books(connection)
    if books is None:
        replace_change_points(connection)
        replace_noise_floor(connection)
        return None
    models = models if models is not None else discover()
    built = books.mark(CHANGE_POINTS)
    target = target_seq(books, [METRIC_HISTORY])
    trial_ids = [] if built is None else changes.changed_trials(
        connection, built, target, set(models), {METRIC_HISTORY, *read_by(METRIC_HISTORY, models)}, books)
    if built is not None and CHANGE_POINTS in books.tables and \
            books.fingerprint(CHANGE_POINTS) == CHANGE_POINTS_BUILT_BY and \
            not behind_a_whole_build(books, CHANGE_POINTS, [METRIC_HISTORY]) and \
            changes.first_loaded_after(connection, changes.changed_trials(connection, built, target, set(models),
                                                                          books=books), built, list(models)):
        if trial_ids:
            replace_series_change_points(connection, trial_ids)
        updated: tuple[str, ...] | None = tuple(trial_ids)
    else:
        replace_change_points(connection)
        books.columns.pop(CHANGE_POINTS, None)
        updated = None
    with transaction(connection):
        set_mark(connection, books, CHANGE_POINTS, target, CHANGE_POINTS_BUILT_BY, [METRIC_HISTORY],
                 whole=updated is None)
        replace_noise_floor(connection)
    return updated
