"""A DuckLake warehouse: attached from its pinned extensions, written by one process at a time.

A lake is attached once per process and role: an in-memory DuckDB that loads the ducklake, postgres_scanner and
httpfs extensions from their wheels (nothing fetched), creates the object store's secret from the environment and
attaches the lake as :data:`LAKE_ALIAS` (~85 catalog statements, ~0.1 s). Every connection is a cursor on that
instance, with its own transaction, temporary tables and macros, that makes the lake its default database, so the
models' SQL runs unchanged; a process that loads several trials (a job's group) attaches once. DuckLake starts
each transaction at the catalog's latest snapshot, so a cursor sees what other processes committed before it. An
instance a connection met an error on is not used again (:func:`forget_attached`).

**One writer.** DuckLake commits each transaction as one snapshot, and readers only ever see whole snapshots; but
two writing processes race on the catalog (DuckLake's own issues #1094, #1248, #1283). So a writer first takes a
PostgreSQL session-level advisory lock (:data:`WRITER_LOCK_KEY`) on a connection of its own, held until it
closes: a second writer (a run pod, a workstation's ``import``, a ``rebuild``) waits for it with backoff, says
once who holds it, and gives up with :class:`WarehouseBusy` when its wait runs out. A writer killed with
``kill -9`` loses its PostgreSQL session, which releases the lock; its unfinished transaction was never committed,
so the catalog stays at the last snapshot.

**Readers** attach ``READ_ONLY`` and take no lock: they never wait for a writer, nor it for them.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from substrate_assets.warehouse.backoff import StillHeld, with_backoff
from substrate_assets.warehouse.extensions import NO_AUTOLOAD, PACKAGES, load_extension
from substrate_assets.warehouse.introspection import table_names
from substrate_assets.warehouse.location import LAKE_ALIAS, Lake, object_store_secret
from substrate_assets.warehouse.sql_literal import quoted

# pg_advisory_lock's key for "writing the warehouse": the bytes of "substrat" as a signed 64-bit integer.
WRITER_LOCK_KEY = int.from_bytes(b"substrat", "big", signed=True)
# The writer lock's session: a catalog that does not answer fails within CONNECT_TIMEOUT_S. TCP keepalives probe
# the connection after KEEPALIVE_IDLE_S idle, every KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT times: about 25 s, not
# TCP's own two hours and more. Set at both ends: libpq's (the writer sees a catalog that vanished) and the
# server's for this session (PostgreSQL ends the session of a writer whose node vanished, which releases the lock).
CONNECT_TIMEOUT_S = 10
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 10, 5, 3


class WarehouseUnavailable(RuntimeError):
    """The warehouse cannot be had now; the message says why, naming it (never a secret)."""


class WarehouseBusy(WarehouseUnavailable):
    """Another process holds the warehouse (a file's lock, or a lake's writer lock)."""


class WarehouseUnreachable(WarehouseUnavailable):
    """A lake's catalog or data path does not answer, or refuses this role."""


def _create_secret(connection: duckdb.DuckDBPyConnection, data_path: str) -> None:
    secret = object_store_secret(data_path)
    if secret is not None:
        connection.execute(secret)


def recorded_data_path(connection: duckdb.DuckDBPyConnection) -> str:
    """The data path the attached lake's catalog records (DuckLake's option ``data_path``, set at its creation)."""
    row = connection.execute("SELECT value FROM ducklake_options(?) WHERE option_name = 'data_path'",
                             [LAKE_ALIAS]).fetchone()
    if row is None or not row[0]:
        raise WarehouseUnreachable("the shared warehouse's catalog records no data path: give it in "
                                   "SUBSTRATE_BENCH_WAREHOUSE_DATA_PATH")
    return str(row[0])


# The attached instances of this process, newest last: one writer's and one reader's of the lake in use. An older
# one is let go, never closed here: closing an instance closes its cursors, and another thread may be reading on one
# (a whole load draws, builds the site and judges at once). It closes, with its catalog sessions, when its last
# cursor does.
_ATTACHED: OrderedDict[tuple[str, ...], duckdb.DuckDBPyConnection] = OrderedDict()
MOST_ATTACHED = 2
_ATTACHING = threading.Lock()


def _instance_key(lake: Lake, read_only: bool) -> tuple[str, ...]:
    """What an attached instance was made from: the lake, the role, and the environment its catalog session and
    object store secret read (a process whose keys changed attaches anew)."""
    reached = sorted(f"{name}={value}" for name, value in os.environ.items() if name.startswith(("AWS_", "PG")))
    return (lake.catalog, lake.data_path or "", "reader" if read_only else "writer", *reached)


def open_lake(lake: Lake, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to ``lake`` (read-only for a reader), the lake in use: a cursor on this process's attached
    instance, attached first when there is none."""
    key = _instance_key(lake, read_only)
    with _ATTACHING:
        instance = _ATTACHED.pop(key, None)
        if instance is None:
            instance = _attach(lake, read_only)
        _ATTACHED[key] = instance
        while len(_ATTACHED) > MOST_ATTACHED:
            _ATTACHED.popitem(last=False)
    cursor = instance.cursor()
    try:
        cursor.execute(f"USE {LAKE_ALIAS}")
    except BaseException:
        cursor.close()
        forget_attached(lake, read_only)
        raise
    return cursor


def forget_attached(lake: Lake, read_only: bool) -> None:
    """Let go of this process's attached instance of ``lake`` for the role: a connection met an error on it (a
    catalog that went away, a load that failed), and the next one attaches anew. Cursors open on it keep it until
    they close."""
    with _ATTACHING:
        _ATTACHED.pop(_instance_key(lake, read_only), None)


def _attach(lake: Lake, read_only: bool) -> duckdb.DuckDBPyConnection:
    """An in-memory instance with ``lake`` attached (read-only for a reader), a reader's shut to all but the lake."""
    connection = duckdb.connect(config=NO_AUTOLOAD)
    try:
        for name in PACKAGES:
            load_extension(connection, name)
        if lake.data_path is not None:
            _create_secret(connection, lake.data_path)
        options = [f"DATA_PATH {quoted(lake.data_path)}"] if lake.data_path is not None else []
        if read_only:
            options.append("READ_ONLY")
        suffix = f" ({', '.join(options)})" if options else ""
        try:
            connection.execute(f"ATTACH {quoted(lake.catalog)} AS {LAKE_ALIAS}{suffix}")
        except duckdb.Error as error:
            raise WarehouseUnreachable(f"the shared warehouse {lake} does not attach: {error}") from None
        connection.execute(f"USE {LAKE_ALIAS}")
        data_path = lake.data_path
        if data_path is None:
            # A reader that was not told the data path reads it from the catalog, which the first writer gave it.
            data_path = recorded_data_path(connection)
            _create_secret(connection, data_path)
        if read_only:
            # The reader's lockdown: the lake's own data path stays readable, nothing else on disk or the network.
            directories = [data_path]
            connection.execute(f"SET allowed_directories = {directories!r}")
            connection.execute("SET enable_external_access = false")
            connection.execute("SET lock_configuration = true")
    except BaseException:
        connection.close()
        raise
    return connection


def lock_holder(cursor: Any) -> str:
    """Who holds the writer lock, as its session named itself: in this catalog's database (another lake on the same
    server has a lock of the same key), and a lock taken with one bigint key (objsubid 1; two int4 keys are 2).
    ``cursor``: psycopg2's, on the catalog (psycopg2 has no types)."""
    cursor.execute(
        "SELECT coalesce(nullif(a.application_name, ''), 'pid ' || a.pid) FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.objsubid = 1 "
        "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s", (WRITER_LOCK_KEY,))
    row = cursor.fetchone()
    return row[0] if row else "another writer"


def lock_session(lake: Lake, name: str) -> Any:
    """A psycopg2 session to ``lake``'s catalog for the writer lock, called ``name``, in autocommit, with short
    connect and keepalive timeouts at both ends."""
    import psycopg2

    try:
        session = psycopg2.connect(lake.conninfo, application_name=name[:63], connect_timeout=CONNECT_TIMEOUT_S,
                                   keepalives=1, keepalives_idle=KEEPALIVE_IDLE_S,
                                   keepalives_interval=KEEPALIVE_INTERVAL_S, keepalives_count=KEEPALIVE_COUNT)
    except psycopg2.Error as error:
        raise WarehouseUnreachable(f"the shared warehouse's catalog {lake.catalog} does not answer: "
                                   f"{str(error).strip()}") from None
    session.autocommit = True
    try:
        with session.cursor() as cursor:
            for setting, value in (("tcp_keepalives_idle", KEEPALIVE_IDLE_S),
                                   ("tcp_keepalives_interval", KEEPALIVE_INTERVAL_S),
                                   ("tcp_keepalives_count", KEEPALIVE_COUNT)):
                cursor.execute(f"SET {setting} = {int(value)}")
    except BaseException:
        session.close()
        raise
    return session


@contextmanager
def writer_lock(lake: Lake, wait_s: float, on_wait: Callable[[str], None] | None = None,
                sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """The lake's writer lock, held for the block: waits up to ``wait_s`` for another writer, telling ``on_wait``
    once who it is; :class:`WarehouseBusy` when the wait runs out."""
    session = lock_session(lake, f"substrate-bench writer on {socket.gethostname()} pid {os.getpid()}")
    try:
        cursor = session.cursor()

        def attempt() -> None:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK_KEY,))
            if not cursor.fetchone()[0]:
                raise StillHeld(lock_holder(cursor))

        def waiting(holder: str) -> None:
            if on_wait is not None:
                on_wait(f"waiting for the shared warehouse {lake.catalog}, being written by {holder}")

        with_backoff(attempt, wait_s, waiting=waiting, sleep=sleep, clock=clock, busy=lambda holder: WarehouseBusy(
            f"the shared warehouse {lake.catalog} is being written by {holder}; only one process writes at a time: "
            "try again when it has finished"))
        yield
    finally:
        session.close()  # ends the session, which releases the lock


# Every this many snapshots (a load is one; a model refresh another), a writer runs the maintenance as it closes.
MAINTAIN_EVERY = 50
MAINTAIN_EVERY_ENV = "SUBSTRATE_BENCH_WAREHOUSE_MAINTAIN_EVERY"
# Snapshots this recent are kept (a reader may still be reading one), and so are the files they read.
KEEP_SNAPSHOTS_H = 1.0
# The commit message that marks the maintenance's own snapshots: loads are counted from the last one.
MAINTENANCE_MESSAGE = "substrate-bench maintenance"


def data_files_by_table(connection: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """How many Parquet data files the lake's current snapshot reads, per table (rows still inlined in the catalog
    are in none)."""
    tables = table_names(connection, LAKE_ALIAS)
    # ducklake_list_files takes literals only: one query per table.
    def files(name: str) -> int:
        counted = connection.execute("SELECT count(*) FROM ducklake_list_files(?, ?)", [LAKE_ALIAS, name]).fetchone()
        assert counted is not None  # a count is one row
        return int(counted[0])

    return {name: files(name) for name in tables}


def data_files(connection: duckdb.DuckDBPyConnection) -> int:
    """How many Parquet data files the lake's current snapshot reads, across its tables."""
    return sum(data_files_by_table(connection).values())


def snapshots_since_maintenance(connection: duckdb.DuckDBPyConnection) -> int:
    """Snapshots committed since the maintenance last ran (all of them if it never did)."""
    counted = connection.execute(
        "SELECT count(*) FROM ducklake_snapshots(?) WHERE snapshot_id > coalesce((SELECT max(snapshot_id) "
        "FROM ducklake_snapshots(?) WHERE commit_message = ?), -1)",
        [LAKE_ALIAS, LAKE_ALIAS, MAINTENANCE_MESSAGE]).fetchone()
    assert counted is not None  # a count is one row
    return int(counted[0])


def maintain_every() -> int:
    """``$SUBSTRATE_BENCH_WAREHOUSE_MAINTAIN_EVERY`` (0: never on its own), else :data:`MAINTAIN_EVERY`."""
    configured = os.environ.get(MAINTAIN_EVERY_ENV)
    if configured is None or not configured.strip():
        return MAINTAIN_EVERY
    try:
        every = int(configured)
    except ValueError:
        raise ValueError(f"{MAINTAIN_EVERY_ENV}={configured!r}: expected a whole number of snapshots "
                         "(0: no maintenance on its own)") from None
    if every < 0:
        raise ValueError(f"{MAINTAIN_EVERY_ENV}={configured!r}: expected 0 or more")
    return every


def _marked(connection: duckdb.DuckDBPyConnection, statement: str) -> None:
    """``statement`` in a transaction of its own whose snapshot carries the maintenance's commit message."""
    connection.execute("BEGIN TRANSACTION")
    try:
        connection.execute("CALL ducklake_set_commit_message(?, 'substrate-bench', ?)",
                           [LAKE_ALIAS, MAINTENANCE_MESSAGE])
        connection.execute(statement)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def maintain(connection: duckdb.DuckDBPyConnection, keep_hours: float = KEEP_SNAPSHOTS_H) -> None:
    """DuckLake's own maintenance, on a writer's connection (one that holds the writer lock), in its order: the
    rows small inserts inlined into the catalog are flushed into Parquet, adjacent small files merged (DuckLake
    refuses changes and compaction in one transaction: two), snapshots older than ``keep_hours`` expired, the
    files only they read deleted once they have been unreferenced that long, and the files under the data path that
    the catalog never referenced (a killed writer's) deleted once they are that old."""
    alias = f"'{LAKE_ALIAS}'"
    _marked(connection, f"CALL ducklake_flush_inlined_data({alias})")
    _marked(connection, f"CALL ducklake_merge_adjacent_files({alias})")
    older = f"now() - INTERVAL '{int(keep_hours * 3600)} seconds'"
    connection.execute(f"CALL ducklake_expire_snapshots({alias}, older_than => {older})")
    connection.execute(f"CALL ducklake_cleanup_old_files({alias}, older_than => {older})")
    # Files no snapshot ever recorded: a writer killed with kill -9 left them. A live writer's files are as recent
    # as its load, so the same grace keeps them until it has committed them.
    connection.execute(f"CALL ducklake_delete_orphaned_files({alias}, older_than => {older})")


def maintain_when_due(connection: duckdb.DuckDBPyConnection, every: int | None = None) -> bool:
    """:func:`maintain` when ``every`` (default :func:`maintain_every`) snapshots have been committed since it
    last ran; whether it ran."""
    every = maintain_every() if every is None else every
    if every <= 0 or snapshots_since_maintenance(connection) < every:
        return False
    maintain(connection)
    return True
