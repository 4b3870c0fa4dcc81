"""Recreate the warehouse from the run store: every trial's raw tables, then every model.

The new warehouse is built in a temporary file next to the old one and
renamed over it, so the warehouse is never half-built and a reader of the
old file keeps a consistent view until the rename.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome, load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models import BuiltTable, build_all, discover
from substrate_assets.warehouse.raw import load_trials


@dataclass(frozen=True)
class Rebuilt:
    trials: int
    raw_rows: dict[str, int]
    models: list[BuiltTable]
    tests: list[TestOutcome]
    seconds: float


def rebuild(store: RunStore, warehouse: Path, models_directory: Path) -> Rebuilt:
    started = time.perf_counter()
    trials = [TrialDirectory(directory) for directory in store.trial_dirs()]
    partial = warehouse.with_name(f".{warehouse.name}.rebuild-{os.getpid()}")
    partial.unlink(missing_ok=True)
    try:
        with connect(partial) as connection:
            raw_rows = load_trials(connection, trials)
            models = discover(models_directory)
            built = build_all(connection, models)
            tests = load_tests(models_directory / "schema.yml", set(models))
            outcomes = [run_test(connection, test) for group in tests.values() for test in group]
            connection.execute("CHECKPOINT")
        os.replace(partial, warehouse)
    finally:
        partial.unlink(missing_ok=True)
        Path(f"{partial}.wal").unlink(missing_ok=True)
    return Rebuilt(len(trials), raw_rows, built, outcomes, time.perf_counter() - started)
