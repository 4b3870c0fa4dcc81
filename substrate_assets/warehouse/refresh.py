"""New trials loaded and every model brought up to them, in one transaction: what an import (and any caller that
holds the warehouse for both) does.

One transaction instead of two (the raw tables', then the models') matters for more than a commit: the copies a
load keeps of its rows for the models' next update (:mod:`changes`) stay in temporary tables of the connection
(:data:`changes.Copy.TRANSIENT`), so they never reach the warehouse. And its commit is a checkpoint
(:func:`small_load`): the changes go straight into the file, with no write-ahead log to write, fsync and copy in
again when the file closes (1.5 MB for a trial of 10,000 requests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.connection import small_load, transaction
from substrate_assets.warehouse.models.discovery import ModelError, models_directory
from substrate_assets.warehouse.models.marts import refresh_marts
from substrate_assets.warehouse.models.tables import BuiltTable
from substrate_assets.warehouse.trial_densities import trial_densities, updated_densities
from substrate_assets.warehouse.trial_rows import TrialFrames
from substrate_assets.warehouse.trial_writes import LoadedTable, write_trials


@dataclass(frozen=True)
class Refreshed:
    raw: dict[str, LoadedTable]
    # Each trial's headline density figures, as :func:`trial_densities` gives them.
    densities: dict[str, dict[str, float | None]]
    models: list[BuiltTable]
    tests: list[TestOutcome]
    # The models a failed key test of what they read kept from being refreshed (the next refresh takes them up).
    skipped: dict[str, str] = field(default_factory=dict)


def load_and_refresh(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames], *, preview_rows: int = 0,
                     directory: Path | None = None, figures_of: Sequence[str] = ()) -> Refreshed:
    """Write the ``read`` trials into every raw table, update every model under ``directory`` (:func:`refresh_marts`;
    ``preview_rows`` of each table kept) and ask the density figures of ``figures_of`` (:func:`updated_densities`,
    else :func:`trial_densities`), committed together. When a model does not build (ModelError), the raw rows are
    written on their own, as a raw asset's load would be, and the error raised: a broken model keeps the trials out
    of the marts, not out of the warehouse."""
    with small_load(connection):
        try:
            with transaction(connection):
                raw = write_trials(connection, read, preview_rows=preview_rows, copy=changes.Copy.TRANSIENT)
                books = changes.read_books(connection)  # read once, for the figures and the models both
                if books is not None:
                    loaded = {part.trial_id for part in read}
                    books.transient = {name: set(loaded) for name in raw}
                refreshed = refresh_marts(connection, directory, preview_rows, books)
                densities = (updated_densities(connection, figures_of, refreshed.tables,
                                               directory or models_directory())
                             or trial_densities(connection, figures_of)) if figures_of else {}
                connection.execute(";\n".join(f"DROP TABLE IF EXISTS {changes.transient_copy(name)}"
                                               for name in sorted(raw)))
        except ModelError:
            write_trials(connection, read, preview_rows=preview_rows)
            raise
    return Refreshed(raw, densities, refreshed.tables, refreshed.tests, refreshed.skipped)
