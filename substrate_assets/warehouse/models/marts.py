"""Every model — the SQL files under a directory and the Python models that read them (:mod:`.python_models`) —
built whole (:func:`build_marts`) or brought up to the latest loads (:func:`refresh_marts`) in build order, each
model's column tests of schema.yml run over what it wrote; and the copies of loads every model has taken up
dropped. :func:`refresh_marts` is the one refresh: a run's marts step, an import and a load that refreshes call it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.checks import ColumnTest, TestOutcome, load_tests, run_tests
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.models.build import bring_up_to_date, build, build_whole
from substrate_assets.warehouse.models.discovery import Model, build_order, models_directory
from substrate_assets.warehouse.models.narrowing import drop_updated_rows, held_rows
from substrate_assets.warehouse.models.python_models import AnyModel, PythonModel, every_model
from substrate_assets.warehouse.models.tables import BuiltTable, describe_tables


@dataclass
class MartsRefresh:
    """What one build or refresh of the marts did, model by model, in build order."""

    tables: list[BuiltTable] = field(default_factory=list)
    # Each model's column tests (those chosen), over the rows its refresh wrote.
    outcomes: dict[str, list[TestOutcome]] = field(default_factory=dict)
    # Each model not refreshed, with the blocking tests of what it reads that failed ("metric_history:
    # trial_id_not_null"): what reads a table whose key tests fail waits for it, as Dagster skips what depends on an
    # asset whose blocking check failed.
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def tests(self) -> list[TestOutcome]:
        return [outcome for table in self.tables for outcome in self.outcomes.get(table.name, [])]


def _whole(connection: duckdb.DuckDBPyConnection, model: AnyModel, models: Mapping[str, AnyModel],
           books: changes.Books | None) -> None:
    if isinstance(model, PythonModel):
        model.build(connection, books, models)
        _forget_columns(model, books)
    else:
        build_whole(connection, model, models, books)


def _up_to_date(connection: duckdb.DuckDBPyConnection, model: AnyModel, models: Mapping[str, AnyModel],
                books: changes.Books | None) -> tuple[str, ...] | None:
    if isinstance(model, PythonModel):
        updated = model.refresh(connection, books, models)
        if updated is None:
            _forget_columns(model, books)
        return updated
    return bring_up_to_date(connection, model, models, books)


def _forget_columns(model: PythonModel, books: changes.Books | None) -> None:
    """A Python model built whole may have other columns than ``books`` read before: they are asked again."""
    if books is not None:
        books.columns.pop(model.name, None)


def build_all(connection: duckdb.DuckDBPyConnection, models: dict[str, Model]) -> list[BuiltTable]:
    """``models`` (SQL models only) built whole in order, untested."""
    return [build(connection, model, models) for model in build_order(models)]


def build_marts(connection: duckdb.DuckDBPyConnection, directory: Path | None = None,
                preview_rows: int = 10) -> MartsRefresh:
    """Every model under ``directory`` built whole in build order (the Python models too), then every column test
    of its schema.yml run over every row."""
    return _marts(connection, directory, preview_rows, None, whole=True)


def refresh_marts(connection: duckdb.DuckDBPyConnection, directory: Path | None = None, preview_rows: int = 10,
                  books: changes.Books | None = None, *, selected: Collection[str] | None = None,
                  checked: Collection[tuple[str, str]] | None = None) -> MartsRefresh:
    """Every model under ``directory`` (or those ``selected``) brought up to the latest loads in build order, in one
    transaction: a per-trial model's rows of the trials loaded since (:func:`~.build.bring_up_to_date`), another
    model rebuilt when a trial it may read changed, a Python model as it says. Each model's column tests run right
    after it, over the rows it wrote (a per-trial model's new trials; a rebuilt table's every row; none when
    nothing changed); ``checked``: only the tests of these (model, test name) pairs. A model whose key tests fail
    stops what reads it (``MartsRefresh.skipped``). ``books``: the bookkeeping, when the caller read it in this
    transaction. A selected model reading a model that was never built builds that one too."""
    return _marts(connection, directory, preview_rows, books, selected=selected, checked=checked)


def _marts(connection: duckdb.DuckDBPyConnection, directory: Path | None, preview_rows: int,
           books: changes.Books | None, *, whole: bool = False, selected: Collection[str] | None = None,
           checked: Collection[tuple[str, str]] | None = None) -> MartsRefresh:
    directory = directory or models_directory()
    models = every_model(directory)
    tests = load_tests(directory / "schema.yml", set(models))
    refresh = MartsRefresh()
    blocking: dict[str, str] = {}
    with transaction(connection):  # one commit for the whole refresh
        books = books if books is not None else changes.read_books(connection)
        chosen = _with_missing_inputs(connection, models, selected)
        if books is not None and not whole:
            # Every model's mark written at the end, in two statements for them all (one per model, a dozen).
            books.unsaved = set()
        updated: list[tuple[str, tuple[str, ...] | None]] = []
        for model in build_order(models):
            if model.name not in chosen:
                continue
            cause = next((blocking[name] for name in model.upstream if name in blocking), None)
            # A whole build builds every model: it replaces the warehouse, where a missing table would be worse
            # than one whose tests fail (they are reported).
            if cause is not None and not whole:
                blocking[model.name] = refresh.skipped[model.name] = cause
                continue
            if whole:
                _whole(connection, model, models, books)
                trial_ids = None
            else:
                trial_ids = _up_to_date(connection, model, models, books)
            updated.append((model.name, trial_ids))
            outcomes = _tested(connection, model, tests.get(model.name, []), checked, trial_ids, books)
            refresh.outcomes[model.name] = outcomes
            failed = [outcome.test.name for outcome in outcomes if outcome.test.blocking and not outcome.passed]
            if failed:
                blocking[model.name] = f"{model.name}: {', '.join(failed)}"
        if books is not None and not whole:
            changes.save_marks(connection, books)
        _prune_copies(connection, models, books)
        refresh.tables = describe_tables(connection, updated, preview_rows, books)
        if books is not None:
            drop_updated_rows(connection, books)
    return refresh


def _with_missing_inputs(connection: duckdb.DuckDBPyConnection, models: Mapping[str, AnyModel],
                         selected: Collection[str] | None) -> set[str]:
    """``selected`` (None: every model), with each model a selected one reads, directly or not, whose table does
    not exist yet."""
    if selected is None:
        return set(models)
    chosen = {name for name in selected if name in models}
    waiting = list(chosen)
    while waiting:
        for name in models[waiting.pop()].upstream:
            if name in models and name not in chosen and not has_table(connection, name):
                chosen.add(name)
                waiting.append(name)
    return chosen


def _tested(connection: duckdb.DuckDBPyConnection, model: AnyModel, tests: Sequence[ColumnTest],
            checked: Collection[tuple[str, str]] | None, trial_ids: tuple[str, ...] | None,
            books: changes.Books | None) -> list[TestOutcome]:
    """``model``'s tests (those ``checked``) over what its refresh wrote: a per-trial model's new rows (each test
    passes with no query when it wrote none: its rows were tested when they were written); another model's whole
    table, even unchanged, so that a key test that failed goes on stopping what reads it until the table is
    mended."""
    chosen = [test for test in tests if checked is None or (model.name, test.name) in checked]
    if not model.per_trial:
        return run_tests(connection, chosen)
    if trial_ids == ():
        return [TestOutcome(test, 0, []) for test in chosen]
    return run_tests(connection, chosen, trial_ids=trial_ids, rows=held_rows(books))


def _prune_copies(connection: duckdb.DuckDBPyConnection, models: Mapping[str, AnyModel],
                  books: changes.Books | None) -> None:
    """Drop the copies of loads (:mod:`changes`) that every model has taken up. ``books``: the bookkeeping the
    refresh kept up to date (none asked again)."""
    if books is not None:
        changes.prune(connection, list(models), books)
    elif changes.has_bookkeeping(connection):
        changes.prune(connection, list(models))
