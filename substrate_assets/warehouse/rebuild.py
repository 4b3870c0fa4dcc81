"""Recreate the warehouse from the run store: every trial's raw tables, then every model.

The new warehouse is built in a temporary file next to the old one and renamed over it, so it is never
half-built; a DuckLake's is built in a temporary file too, then copied into the lake table by table in one
transaction (:func:`_publish`), so its readers see one snapshot or the next. While it is built, the rebuild holds
the warehouse as its writer (a lake's writer lock; for a file, the old one or, when there is none or it does not
open, an empty one it creates), which is the lock every load takes: no run loading a trial and no import writes
meanwhile (each waits, or is told the warehouse is busy), so nothing is written to a warehouse about to be
replaced. Before it builds the models the rebuild lists the store again, until a listing brings nothing new, and
loads what landed meanwhile, so a trial whose own load gave up waiting is in the new warehouse too.

A trial whose files do not read is skipped and reported (``Rebuilt.skipped``); the others load.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.bulk_load import PARQUET_TABLES, bulk_parquet_table, bulk_read_trials
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.connection import WRITER_WAIT_S, connect, transaction
from substrate_assets.warehouse.introspection import table_names
from substrate_assets.warehouse.lake import WarehouseUnreachable
from substrate_assets.warehouse.location import Lake, Warehouse
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.models.tables import BuiltTable
from substrate_assets.warehouse.raw_tables import RAW_TABLES, ensure_schema
from substrate_assets.warehouse.sql_literal import quoted
from substrate_assets.warehouse.trial_rows import UnreadableTrial, read_trials, reading_processes
from substrate_assets.warehouse.trial_writes import LoadedTable, write_trials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebuilt:
    trials: list[TrialDirectory]
    raw: dict[str, LoadedTable]
    models: list[BuiltTable]
    tests: list[TestOutcome]
    seconds: float
    skipped: list[UnreadableTrial] = field(default_factory=list)

    @property
    def raw_rows(self) -> dict[str, int]:
        return {name: table.total for name, table in self.raw.items()}


@contextlib.contextmanager
def _holding(warehouse: Warehouse, wait_s: float, on_wait: Callable[[str], None] | None
             ) -> Iterator[duckdb.DuckDBPyConnection | None]:
    """The warehouse held as its writer (waiting for whoever has it): a file is created empty when there is none,
    so that a load starting meanwhile waits for the rebuild instead of writing a file about to be replaced. The
    writer's connection, or None for a file that does not open."""
    with contextlib.ExitStack() as stack:
        held = None
        try:
            held = stack.enter_context(connect(warehouse, wait_s=wait_s, on_wait=on_wait))
        except duckdb.Error as error:  # not a lock: connect waits those out, then raises WarehouseBusy
            if isinstance(warehouse, Lake):
                raise WarehouseUnreachable(f"the shared warehouse {warehouse} does not open: {error}") from None
            # Nobody else can open a file DuckDB cannot read either: it is replaced as it is.
            log.warning("the old warehouse %s does not open (%s); replacing it", warehouse, error)
        yield held


def _publish(lake: duckdb.DuckDBPyConnection, built: Path) -> None:
    """Every table of the file ``built``, in ``main`` and in the bookkeeping schema ``changes``, replaces the lake's,
    and the lake's tables that ``built`` lacks are dropped, in one transaction: a reader sees the old warehouse or
    the new one, and the next load's bookkeeping is the rebuilt warehouse's, not the one from before it."""
    lake.execute(f"ATTACH {quoted(str(built))} AS rebuilt (READ_ONLY)")
    try:
        with transaction(lake):
            for schema in ("main", changes.SCHEMA):
                tables = table_names(lake, "rebuilt", schema)
                lake.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                for name in sorted(set(table_names(lake, schema=schema)) - set(tables)):
                    lake.execute(f'DROP TABLE "{schema}"."{name}"')
                for name in tables:
                    lake.execute(f'CREATE OR REPLACE TABLE "{schema}"."{name}" AS FROM rebuilt."{schema}"."{name}"')
    finally:
        lake.execute("DETACH rebuilt")


def _merged(before: dict[str, LoadedTable], after: dict[str, LoadedTable]) -> dict[str, LoadedTable]:
    return {name: before[name].merged(table) if name in before else table for name, table in after.items()}


# Trials loaded per transaction: the memory a rebuild holds is a batch's small tables, not the whole store's.
BATCH_TRIALS = 500
# From this many trials on, their small files are read in worker processes, a chunk of each batch per process:
# read table by table they cost ~2 ms of CPU a trial, less than starting the processes (~1 s each) below this.
PROCESS_READ_TRIALS = 2000
SMALL_TABLES = [name for name in RAW_TABLES if name not in PARQUET_TABLES]


class _NotBulk(Exception):
    """A batch's request logs are not all of the table's types: polars reads them, as a single load does."""


def _load_batch(connection: duckdb.DuckDBPyConnection, trials: list[TrialDirectory], preview_rows: int,
                processes: Executor | None
                ) -> tuple[list[TrialDirectory], list[UnreadableTrial], dict[str, LoadedTable]]:
    """One batch of trials loaded in one transaction: the small tables read table by table for the whole batch
    (:func:`bulk_read_trials`: a trial whose files that reading does not take or that do not read is read on its
    own, which names the file), the request and runtime event logs scanned by DuckDB from their files
    (:func:`bulk_parquet_table`); when that cannot be, or such a file does not read, every table read by polars trial
    by trial, which names the trial whose file does not read. The trials loaded, those skipped, and what each table
    received."""
    read, unreadable = bulk_read_trials(trials, SMALL_TABLES, processes)
    try:
        with transaction(connection):
            written = write_trials(connection, read, SMALL_TABLES, preview_rows, copy=changes.Copy.NONE)
            for name in PARQUET_TABLES:
                loaded = bulk_parquet_table(connection, read, name, preview_rows)
                if loaded is None:
                    raise _NotBulk
                written[name] = loaded
    except (_NotBulk, duckdb.Error) as error:
        log.info("loading request logs trial by trial: %s", error or "a file's columns are not the table's types")
        read, unreadable = read_trials(trials, processes=processes)
        return [part.trial for part in read], unreadable, write_trials(connection, read, preview_rows=preview_rows,
                                                                         copy=changes.Copy.NONE)
    return [part.trial for part in read], unreadable, written


def rebuild(store: RunStore, warehouse: Warehouse, models_directory: Path, *, wait_s: float = WRITER_WAIT_S,
            on_wait: Callable[[str], None] | None = None, preview_rows: int = 0,
            on_listed: Callable[[list[Path]], None] | None = None) -> Rebuilt:
    """``on_listed`` is told the trial directories each listing of the store found new, while the warehouse is
    held (a test holds the rebuild there)."""
    started = time.perf_counter()
    scratch: Path | None = None
    if isinstance(warehouse, Lake):
        scratch = Path(tempfile.mkdtemp(prefix="substrate-rebuild-"))
        partial = scratch / "warehouse.duckdb"
    else:
        partial = warehouse.with_name(f".{warehouse.name}.rebuild-{os.getpid()}")
    partial.unlink(missing_ok=True)
    try:
        with _holding(warehouse, wait_s, on_wait) as held:
            loaded: list[TrialDirectory] = []
            skipped: list[UnreadableTrial] = []
            raw: dict[str, LoadedTable] = {}
            seen: set[Path] = set()
            with connect(partial) as connection, contextlib.ExitStack() as stack:
                processes: Executor | None = None
                connection.execute("SET enable_progress_bar = false")  # a long scan would draw one on the terminal
                ensure_schema(connection)  # every table, even with no trial to load
                new = store.trial_dirs()
                while True:
                    seen.update(new)
                    if on_listed is not None:
                        on_listed(new)
                    for start in range(0, len(new), BATCH_TRIALS):
                        batch = [TrialDirectory(directory) for directory in new[start:start + BATCH_TRIALS]]
                        if processes is None and len(new) >= PROCESS_READ_TRIALS:
                            processes = stack.enter_context(reading_processes())
                        read, unreadable, written = _load_batch(connection, batch, preview_rows, processes)
                        skipped += unreadable
                        loaded += read
                        raw = _merged(raw, written)
                    new = [directory for directory in store.trial_dirs() if directory not in seen]
                    if not new:
                        break
                stack.close()  # the reading processes, before the models take the cores
                built = build_marts(connection, models_directory)
                connection.execute("CHECKPOINT")
            if isinstance(warehouse, Lake):
                assert held is not None
                _publish(held, partial)
            else:
                os.replace(partial, warehouse)
    finally:
        partial.unlink(missing_ok=True)
        Path(f"{partial}.wal").unlink(missing_ok=True)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return Rebuilt(loaded, raw, built.tables, built.tests, time.perf_counter() - started, skipped)
