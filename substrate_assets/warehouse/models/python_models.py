"""The models built in Python rather than from a SQL file: each a :class:`PythonModel` in :data:`PYTHON_MODELS`, a
node of the same graph as the SQL models (its upstream, its place in the build order), built whole by ``build`` and
brought up to the latest loads by ``refresh``. A Python model is one of a project's models when every table it
reads is one of them (:func:`every_model`): change_points where metric_history is a model, noise_floor where
change_points is.

Adding one: a module that builds its table (as :mod:`~substrate_assets.warehouse.noise_floor` does), one
:class:`PythonModel` line in :data:`PYTHON_MODELS`, its columns' descriptions in ``dbt_like_sql/schema.yml``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS
from substrate_assets.analysis.noise import HISTORY_WINDOW
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.change_points import (
    CHANGE_POINTS,
    METRIC_HISTORY,
    replace_change_points,
    replace_series_change_points,
)
from substrate_assets.warehouse.models.discovery import Model, ModelError, discover
from substrate_assets.warehouse.models.marks import behind_a_whole_build, read_by, set_mark, target_seq
from substrate_assets.warehouse.noise_floor import NOISE_FLOOR, replace_noise_floor

# Builds a Python model's whole table (and records how far it is built, when it keeps a mark).
Build = Callable[[duckdb.DuckDBPyConnection, changes.Books | None, Mapping[str, "AnyModel"]], None]
# Brings it up to the loads since it was built: the trials whose rows it replaced, None when it built it whole.
Refresh = Callable[[duckdb.DuckDBPyConnection, changes.Books | None, Mapping[str, "AnyModel"]], tuple[str, ...] | None]


@dataclass(frozen=True)
class PythonModel:
    name: str
    upstream: tuple[str, ...]
    description: str
    # How Dagster shows what builds it (besides duckdb): python, or sql for a table built by SQL composed in Python.
    kind: str
    build: Build
    refresh: Refresh
    per_trial: bool = False
    partition_by: tuple[str, ...] = ()


AnyModel = Model | PythonModel

# change_points' fingerprint in changes.marks.
CHANGE_POINTS_BUILT_BY = "change_points (Python)"


def _build_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None,
                         models: Mapping[str, AnyModel]) -> None:
    replace_change_points(connection)
    if books is not None:
        set_mark(connection, books, CHANGE_POINTS, target_seq(books, [METRIC_HISTORY]), CHANGE_POINTS_BUILT_BY,
                 [METRIC_HISTORY], whole=True)


def _refresh_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None,
                           models: Mapping[str, AnyModel]) -> tuple[str, ...] | None:
    """Only the series of trials loaded for the first time since change_points was built are analysed again (a new
    trial can move a change point of its own series only); the whole table when a trial was loaded again (it may
    have left a series), when it never was built, or without bookkeeping."""
    if books is None:
        replace_change_points(connection)
        return None
    built = books.mark(CHANGE_POINTS)
    target = target_seq(books, [METRIC_HISTORY])
    names = set(models)
    built_as_now = built is not None and CHANGE_POINTS in books.tables and \
        books.fingerprint(CHANGE_POINTS) == CHANGE_POINTS_BUILT_BY and \
        not behind_a_whole_build(books, CHANGE_POINTS, [METRIC_HISTORY])
    if built is None or not built_as_now or not changes.first_loaded_after(
            connection, changes.changed_trials(connection, built, target, names, books=books), built, list(names)):
        _build_change_points(connection, books, models)
        return None
    trial_ids = changes.changed_trials(connection, built, target, names, {METRIC_HISTORY,
                                                                           *read_by(METRIC_HISTORY, models)}, books)
    if trial_ids:
        replace_series_change_points(connection, trial_ids)
    set_mark(connection, books, CHANGE_POINTS, target, CHANGE_POINTS_BUILT_BY, [METRIC_HISTORY], whole=False)
    return tuple(trial_ids)


def _build_noise_floor(connection: duckdb.DuckDBPyConnection, books: changes.Books | None,
                       models: Mapping[str, AnyModel]) -> None:
    """Built whole every time: a row per series, and a new trial can move a window's start (a new change point) as
    well as its end. It keeps no mark: it reads no copy of a load."""
    replace_noise_floor(connection)


PYTHON_MODELS: tuple[PythonModel, ...] = (
    PythonModel(
        CHANGE_POINTS, (METRIC_HISTORY,),
        "Where each headline metric of a configuration moved to another level: one row per change point of "
        "each metric_history series (suite, configuration, metric, measured values in trial order), with the "
        "trial it starts at, the means before and after, the change in %, the p-value and whether it regressed "
        "or improved. Found by Hunter's split/merge with a t-test (Apache Otava's compute_change_points): "
        f"{DEFAULT_PARAMETERS.describe()}; a change at least the series' own trial-to-trial noise, between the "
        "medians of its levels.",
        "python", _build_change_points, _refresh_change_points),
    PythonModel(
        NOISE_FLOOR, (METRIC_HISTORY, CHANGE_POINTS),
        "How much each headline metric of a configuration moves from one trial to the next: one row per "
        "metric_history series, over the configuration's trials since its latest change point (at most the last "
        f"{HISTORY_WINDOW}): the trials used, the median and level, the trial-to-trial standard deviation on the "
        "metric's scale (of the logarithms, read as a coefficient of variation; the failure ratio's in its unit) "
        "that comparisons judge a change against, and the robust spread (1.4826 x MAD / median) beside it. Null "
        "with fewer than 3 trials.",
        "sql", _build_noise_floor, _build_noise_floor),
)


def every_model(directory: Path | None = None) -> dict[str, AnyModel]:
    """The SQL models under ``directory`` (:func:`discover`) and each Python model whose every upstream table is one
    of them (or of the Python models before it), by name, in no particular order (:func:`~.discovery.build_order` orders
    them). A Python model named as a SQL model is refused."""
    sql = discover(directory)
    models: dict[str, AnyModel] = dict(sql)
    for model in PYTHON_MODELS:
        if model.name in models:
            raise ModelError(f"{sql[model.name].path}: model {model.name!r} is a model built in Python "
                             "(warehouse/models/python_models.py)")
        if all(name in models for name in model.upstream):
            models[model.name] = model
    return models

