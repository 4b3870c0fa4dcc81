"""Recreate the warehouse from the run store: every trial's raw tables, then every model.

The new warehouse is built in a temporary file next to the old one and renamed over it, so it is never
half-built. While it is built and renamed, the rebuild holds the old file as its writer: no run loading a
trial and no query has it open (each waits, or is told the warehouse is busy), so nothing is written to a
file that is about to be replaced, and the first to open it afterwards opens the new one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.connection import WRITER_WAIT_S, connect
from substrate_assets.warehouse.models import BuiltTable, build_marts
from substrate_assets.warehouse.raw import LoadedTable, load_trials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebuilt:
    trials: list[TrialDirectory]
    raw: dict[str, LoadedTable]
    models: list[BuiltTable]
    tests: list[TestOutcome]
    seconds: float

    @property
    def raw_rows(self) -> dict[str, int]:
        return {name: table.total for name, table in self.raw.items()}


@contextlib.contextmanager
def _holding(warehouse: Path, wait_s: float, on_wait: Callable[[str], None] | None) -> Iterator[None]:
    """The old warehouse held as its writer (waiting for whoever has it open), if there is one that opens."""
    with contextlib.ExitStack() as stack:
        if warehouse.exists():
            try:
                stack.enter_context(connect(warehouse, wait_s=wait_s, on_wait=on_wait))
            except duckdb.Error as error:  # not a lock: connect waits those out, then raises WarehouseBusy
                # Nobody else can open a file DuckDB cannot read either: it is replaced as it is.
                log.warning("the old warehouse %s does not open (%s); replacing it", warehouse, error)
        yield


def rebuild(store: RunStore, warehouse: Path, models_directory: Path, *, wait_s: float = WRITER_WAIT_S,
            on_wait: Callable[[str], None] | None = None, preview_rows: int = 0) -> Rebuilt:
    started = time.perf_counter()
    partial = warehouse.with_name(f".{warehouse.name}.rebuild-{os.getpid()}")
    partial.unlink(missing_ok=True)
    try:
        with _holding(warehouse, wait_s, on_wait):
            trials = [TrialDirectory(directory) for directory in store.trial_dirs()]
            with connect(partial) as connection:
                raw = load_trials(connection, trials, preview_rows=preview_rows)
                built, outcomes = build_marts(connection, models_directory)
                connection.execute("CHECKPOINT")
            os.replace(partial, warehouse)
    finally:
        partial.unlink(missing_ok=True)
        Path(f"{partial}.wal").unlink(missing_ok=True)
    return Rebuilt(trials, raw, built, outcomes, time.perf_counter() - started)
