"""Loads outside a Dagster run: importing upstream runs and rebuilding the warehouse. Both go through the same
warehouse load and lock discipline as the raw assets, and are recorded on the instance as the assets record
theirs.

Dagster is imported only where a load is recorded: an import loads the warehouse while another process opens the
instance (``app/load_records``)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from substrate_assets.app.load_records import LoadRecord
from substrate_assets.results.import_limits import MAX_RUNS
from substrate_assets.results.importer import ImportedRun, RunRefused, import_all
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import Warehouse
from substrate_assets.warehouse.models.discovery import models_directory
from substrate_assets.warehouse.preview import PREVIEW_ROWS
from substrate_assets.warehouse.raw_tables import ensure_schema
from substrate_assets.warehouse.rebuild import Rebuilt, rebuild
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_rows import TrialFrames, check_staged_trial, read_trials
from substrate_assets.warehouse.trial_writes import TrialIdTaken, refuse_taken_ids

if TYPE_CHECKING:
    import dagster as dg


@dataclass(frozen=True)
class ImportOutcome:
    runs: list[ImportedRun]
    raw_rows: dict[str, int]
    models: list[str]
    tests: list[TestOutcome]
    # Runs that did not load: refused before the store (their files do not read, or their id is taken), or
    # already in the store and unreadable there. One line each.
    refused: list[RunRefused] = field(default_factory=list)
    # Models a failed key test of what they read kept from being refreshed, each with that test.
    skipped: dict[str, str] = field(default_factory=dict)


def import_upstream(root: str, store: RunStore, warehouse: Warehouse, record: Callable[[LoadRecord], object],
                    on_wait: Callable[[str], None] | None = None,
                    slo: Mapping[str, float] | None = None, *, max_runs: int = MAX_RUNS,
                    on_progress: Callable[[int, int], None] | None = None) -> ImportOutcome:
    """Copy every upstream run under ``root`` into the store — each read whole first, exactly as the warehouse
    loads it, and refused (nothing copied) when any file does not read — then load them all in one pass (raw
    tables, models, column tests; one transaction, :func:`load_and_refresh`) and hand what the load did to
    ``record`` once it is committed, which records it on the Dagster instance (``load_records``), so the imported
    trials show in the UI beside native ones. A refused run does not stop the others."""
    batch = import_all(root, store, check=check_staged_trial, slo=slo, max_runs=max_runs, on_progress=on_progress)
    refused = list(batch.refused)
    # Read before the warehouse is opened, so the lock is held only to write. Runs copied now are read a second time
    # here (their staging read names the staging directory as trial_dir); runs already in the store, a first.
    read, unreadable = read_trials([TrialDirectory(run.trial_dir) for run in batch.imported])
    unreadable_dirs = {problem.trial_dir for problem in unreadable}
    refused += [RunRefused(str(problem.trial_dir), f"in the store but unreadable: {problem}")
                for problem in unreadable]
    runs = [run for run in batch.imported if run.trial_dir not in unreadable_dirs]
    if not runs:
        return ImportOutcome([], {}, [], [], refused)
    try:
        with connect(warehouse, on_wait=on_wait) as connection:
            ensure_schema(connection)
            taken = _taken(connection, read)
            if taken:
                refused += [RunRefused(run.source, taken[run.trial_dir]) for run in runs if run.trial_dir in taken]
                for run in runs:
                    if run.trial_dir in taken and run.copied:
                        shutil.rmtree(run.trial_dir, ignore_errors=True)
                runs = [run for run in runs if run.trial_dir not in taken]
                read = [part for part in read if part.trial.path not in taken]
                if not runs:
                    return ImportOutcome([], {}, [], [], refused)
            refreshed = load_and_refresh(connection, read, preview_rows=PREVIEW_ROWS,
                                         figures_of=[run.trial_id for run in runs])
    except BaseException:
        # The load is one transaction and did not happen: the runs this import copied leave the store with it, so
        # the store holds nothing the warehouse does not (runs that were there before stay).
        for run in batch.imported:
            if run.copied:
                shutil.rmtree(run.trial_dir, ignore_errors=True)
        raise
    record(LoadRecord([part.trial.path for part in read], refreshed.raw, refreshed.models, refreshed.tests,
                      extra={run.trial_id: {"imported_from": run.source} for run in runs},
                      densities=refreshed.densities, suites={part.trial.trial_id: part.trial.suite for part in read}))
    return ImportOutcome(runs, {name: table.total for name, table in refreshed.raw.items()},
                         [table.name for table in refreshed.models], refreshed.tests, refused, refreshed.skipped)


def _taken(connection: duckdb.DuckDBPyConnection, read: list[TrialFrames]) -> dict[Path, str]:
    """The runs of ``read`` whose trial id the warehouse holds for another trial, each with why."""
    taken = {}
    for part in read:
        try:
            refuse_taken_ids(connection, [part])
        except TrialIdTaken as error:
            taken[part.trial.path] = str(error)
    return taken


def rebuild_warehouse(store: RunStore, warehouse: Warehouse, instance: dg.DagsterInstance,
                      on_wait: Callable[[str], None] | None = None,
                      on_listed: Callable[[list[Path]], None] | None = None) -> Rebuilt:
    """Recreate the warehouse from the run store, skipping (and returning in ``skipped``) trials whose files do not
    read; record the loads of partitions the instance has not seen, every model and every column test."""
    result = rebuild(store, warehouse, models_directory(), on_wait=on_wait, preview_rows=PREVIEW_ROWS,
                     on_listed=on_listed)
    from substrate_assets.defs.warehouse.metadata import report_loads

    report_loads(instance, result.trials, result.raw, result.models, result.tests, new_partitions_only=True)
    return result
