"""Loads outside a Dagster run: importing upstream runs and rebuilding the warehouse. Both go through the same
warehouse load and lock discipline as the raw assets, and are recorded on the instance as the assets record
theirs."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from substrate_assets.defs.warehouse.metadata import PREVIEW_ROWS, report_loads
from substrate_assets.results.importer import ImportedRun, import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models import build_marts, models_directory
from substrate_assets.warehouse.raw import load_trials
from substrate_assets.warehouse.rebuild import Rebuilt, rebuild


@dataclass(frozen=True)
class ImportOutcome:
    runs: list[ImportedRun]
    raw_rows: dict[str, int]
    models: list[str]
    tests: list[TestOutcome]


def import_upstream(root: str, store: RunStore, warehouse: Path, instance: dg.DagsterInstance,
                    on_wait: Callable[[str], None] | None = None) -> ImportOutcome:
    """Copy every upstream run under ``root`` into the store, then load them all in one pass (raw tables, models,
    column tests) and record each load, so the imported trials show in the UI beside native ones."""
    runs = import_runs(root, store)
    if not runs:
        return ImportOutcome([], {}, [], [])
    trials = [TrialDirectory(run.trial_dir) for run in runs]
    with connect(warehouse, on_wait=on_wait) as connection:
        raw = load_trials(connection, trials, preview_rows=PREVIEW_ROWS)
        built, outcomes = build_marts(connection)
    report_loads(instance, trials, raw, built, outcomes,
                 extra={run.trial_id: {"imported_from": run.source} for run in runs})
    return ImportOutcome(runs, {name: table.total for name, table in raw.items()}, [table.name for table in built],
                         outcomes)


def rebuild_warehouse(store: RunStore, warehouse: Path, instance: dg.DagsterInstance,
                      on_wait: Callable[[str], None] | None = None) -> Rebuilt:
    """Recreate the warehouse from the run store; record the loads of partitions the instance has not seen, every
    model and every column test."""
    result = rebuild(store, warehouse, models_directory(), on_wait=on_wait, preview_rows=PREVIEW_ROWS)
    report_loads(instance, result.trials, result.raw, result.models, result.tests, new_partitions_only=True)
    return result
