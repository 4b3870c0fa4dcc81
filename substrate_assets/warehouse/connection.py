"""Connections to the warehouse (a file or a DuckLake), with the functions every model may call.

They are :mod:`substrate_assets.analysis.statistics` in SQL, and a property test keeps each equal to its
Python original:

- ``py_round(x, digits)``: the reference's rounding (Python's ``round``; DuckDB's own ``round`` goes half away
  from zero, so ``round(0.125, 2)`` would differ). A Python function, so it *is* the original; DuckDB hands it a
  whole vector at a time as Arrow arrays (:func:`_py_round_vector`), since a call per row costs ~130 µs on DuckDB
  1.5.5 (100,000 rows: 13 s one by one, 0.2 s a vector at a time).
- ``floor_index(values, permille)``: the floor-index percentile, in integer arithmetic; null for an empty list.
  ``floor_index_of_sorted(values, permille)`` is the same over a list already sorted (``list_sort``): a model
  that asks several percentiles of one list sorts it once, not once per percentile.
- ``locust_bucket(ms)``: the response time Locust files ``ms`` under in its histogram.

DuckDB lets one process write a file, and no process read it while another writes. Every writer (a raw
asset, a model, an import, a rebuild) opens the file through :func:`connect`, which waits with backoff while
another process holds it and says so once; readers (``substrate-bench sql``) do not wait.

A reader is also shut in: DuckDB's external access is off and its configuration locked (:data:`READER_CONFIG`),
so read-only SQL reads the warehouse and nothing else — no ``COPY … TO`` or ``EXPORT DATABASE`` to a file, no
``ATTACH`` of another database, no ``read_text``/``glob``/``read_csv`` of the filesystem or the network, no
``INSTALL``/``LOAD`` of extensions — and cannot switch that back on with ``SET``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
from duckdb.func import ARROW

from substrate_assets.analysis.statistics import reference_round
from substrate_assets.warehouse.backoff import StillHeld, with_backoff
from substrate_assets.warehouse.lake import (
    WarehouseBusy,
    forget_attached,
    maintain_every,
    maintain_when_due,
    open_lake,
    writer_lock,
)
from substrate_assets.warehouse.location import Lake, Warehouse

log = logging.getLogger(__name__)

MACROS = ("""
CREATE OR REPLACE TEMP MACRO floor_index_of_sorted(sorted_vals, permille) AS
    CASE WHEN sorted_vals IS NULL OR len(sorted_vals) = 0 THEN NULL
         ELSE sorted_vals[least((len(sorted_vals) * permille) // 1000, len(sorted_vals) - 1) + 1] END
""", """
CREATE OR REPLACE TEMP MACRO floor_index(vals, permille) AS floor_index_of_sorted(list_sort(vals), permille)
""", """
CREATE OR REPLACE TEMP MACRO is_wake(wake, name) AS coalesce(wake, name = 'WakeFirstTouch')
""", """
CREATE OR REPLACE TEMP MACRO locust_bucket(ms) AS
    CAST(CASE WHEN ms < 100 THEN round_even(ms, 0)
              WHEN ms < 1000 THEN round_even(ms, -1)
              WHEN ms < 10000 THEN round_even(ms, -2)
              ELSE round_even(ms, -3) END AS BIGINT)
""")


def _py_round_vector(values: Any, digits: Any) -> Any:  # pyarrow Arrays: DuckDB evaluates the hints at registration
    # Imported at the first call, not with the module: a reader's first query seldom rounds, and pyarrow's import is
    # a fifth of its process.
    import pyarrow as pa

    return pa.array([None if value is None or places is None else reference_round(value, places)
                     for value, places in zip(values.to_pylist(), digits.to_pylist(), strict=True)],
                    type=pa.float64())


def prepare(connection: duckdb.DuckDBPyConnection, python_functions: bool = True) -> duckdb.DuckDBPyConnection:
    """Register the warehouse's functions on ``connection`` (idempotent). Without ``python_functions``, only the SQL
    macros: registering ``py_round`` costs a process its first ~50 ms (DuckDB imports numpy and inspect for it),
    which a reader that never rounds need not pay."""
    if python_functions:
        with contextlib.suppress(duckdb.CatalogException):  # already registered on this connection
            connection.create_function("py_round", _py_round_vector, ["DOUBLE", "INTEGER"], "DOUBLE",
                                       type=ARROW, side_effects=False)
    for macro in MACROS:
        connection.execute(macro)
    return connection


def calls_python_functions(sql: str) -> bool:
    """Whether ``sql`` may call a function :func:`prepare` registers in Python (``py_round``)."""
    return "py_round" in sql.lower()


# Given at open, so nothing a reader's SQL runs (or a SET, RESET) can widen it; the warehouse file itself is opened
# before it applies. A lake's reader is shut in the same way once its catalog is attached (lake.open_lake).
READER_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False, "lock_configuration": True,
}

# How long a writer waits for another process to let go of the warehouse: a rebuild of a large store.
WRITER_WAIT_S = 600.0


def is_lock_conflict(error: duckdb.Error) -> bool:
    return isinstance(error, duckdb.IOException) and "lock" in str(error).lower()


def _open(path: Path, read_only: bool, wait_s: float, on_wait: Callable[[str], None] | None,
          sleep: Callable[[float], None], clock: Callable[[], float]) -> duckdb.DuckDBPyConnection:
    def attempt() -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=READER_CONFIG if read_only else {})
        except duckdb.Error as error:
            if not is_lock_conflict(error):
                raise
            raise StillHeld(str(error)) from None

    def waiting(error: str) -> None:
        if on_wait is not None:
            on_wait(f"waiting for the warehouse {path}, held by another process ({error})")

    return with_backoff(attempt, wait_s, waiting=waiting, sleep=sleep, clock=clock, busy=lambda error: WarehouseBusy(
        f"the warehouse {path} is held by another process (a run loading a trial, a query, a rebuild); try again "
        f"in a moment ({error})"))


@contextmanager
def connect(warehouse: Warehouse, read_only: bool = False, *, wait_s: float | None = None,
            on_wait: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic,
            python_functions: bool | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived connection with the warehouse's functions, to a file or a lake (:mod:`.location`): the SQL
    macros always, ``py_round`` when ``python_functions`` (default: for a writer, which builds the models that call
    it; a reader asks for it when its SQL does, :func:`calls_python_functions`). A writer
    waits up to ``wait_s`` (default WRITER_WAIT_S) while another process holds the file, or the lake's writer lock,
    telling ``on_wait`` once; a reader does not wait, and reaches nothing but the warehouse. WarehouseBusy when the
    wait runs out. A lake's writer runs DuckLake's maintenance as it closes when it is due
    (:func:`.lake.maintain_when_due`)."""
    waiting = wait_s if wait_s is not None else (0.0 if read_only else WRITER_WAIT_S)
    # Checked before anything is held or written: a bad setting found after the load would fail a committed load.
    every = maintain_every() if isinstance(warehouse, Lake) and not read_only else 0
    with contextlib.ExitStack() as stack:
        if isinstance(warehouse, Lake):
            if not read_only:
                stack.enter_context(writer_lock(warehouse, waiting, on_wait, sleep, clock))
            connection = open_lake(warehouse, read_only)
        else:
            if not read_only:
                warehouse.parent.mkdir(parents=True, exist_ok=True)
            connection = _open(warehouse, read_only, waiting, on_wait, sleep, clock)
        stack.callback(connection.close)
        try:
            yield prepare(connection, not read_only if python_functions is None else python_functions)
        except BaseException:
            if isinstance(warehouse, Lake):
                forget_attached(warehouse, read_only)
            raise
        if isinstance(warehouse, Lake) and not read_only:
            try:
                if maintain_when_due(connection, every):
                    log.info("maintained the shared warehouse %s (inlined rows flushed, small files merged, old "
                             "snapshots expired)", warehouse)
            except duckdb.Error as error:  # the load is committed: a maintenance that fails is retried next time
                log.warning("the shared warehouse's maintenance failed, to be retried after the next load: %s", error)


# The connections inside a transaction() block, by id: a block opened inside another joins it.
_OPEN: set[int] = set()


@contextmanager
def transaction(connection: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction: committed when the block ends, rolled back (and the error raised on) when it fails. Inside
    another block on the same connection it is part of that one (committed or rolled back with it): a refresh of
    every model is one commit, not one per model (each costs a write of the log)."""
    if id(connection) in _OPEN:
        yield connection
        return
    connection.execute("BEGIN TRANSACTION")
    _OPEN.add(id(connection))
    try:
        yield connection
    except BaseException:
        _OPEN.discard(id(connection))
        connection.execute("ROLLBACK")
        raise
    _OPEN.discard(id(connection))
    connection.execute("COMMIT")


@contextmanager
def small_load(connection: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Settings for a load of a few trials that the file's close follows (an import's), put back when the block ends:

    - its commit writes the changes straight into the file: DuckDB checkpoints at a commit whose log would pass
      checkpoint_threshold (0 here), and then writes no log; otherwise the rows go to the log, are fsynced, and are
      copied into the file again at close;
    - one thread: each of its hundred-odd statements reads a trial's rows, and handing that work to a second
      thread costs more than it saves (one more trial's load measured ~10 % faster)."""
    before = connection.execute("SELECT current_setting('checkpoint_threshold'), current_setting('threads')").fetchone()
    assert before is not None  # a scalar SELECT is one row
    connection.execute("SET checkpoint_threshold = '0KB'")
    connection.execute("SET threads = 1")
    try:
        yield connection
    finally:
        connection.execute(f"SET checkpoint_threshold = '{before[0]}'")
        connection.execute(f"SET threads = {int(before[1])}")
