"""One writer at a time in a shared warehouse, many readers, and every way a writer can end, with real parts (a
PostgreSQL catalog and moto's S3). A writer in another process is driven to a named point (it says so on stdout)
and released or killed there: nothing here waits on the clock."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from unittest import mock

import duckdb
import numpy as np
import pytest

from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse import lake as lake_module
from substrate_assets.warehouse.connection import WarehouseBusy, connect
from substrate_assets.warehouse.lake import MAINTENANCE_MESSAGE, data_files_by_table, maintain_when_due
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_rows import read_trials
from tests.support.lake import READER, WRITER, lake_servers, new_lake, opened
from tests.support.postgres import _psql
from tests.support.projects import ROOT, make_project, project_env
from tests.support.synthetic_trials import write_trial

CLI = str(Path(sys.executable).parent / "substrate-bench")
UPSTREAM = ROOT / "tests" / "data" / "upstream_runs"


@pytest.fixture(scope="module")
def servers():
    with lake_servers() as running:
        yield running


@pytest.fixture
def lake(servers):
    return new_lake(servers)


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "store")


def a_trial(store: RunStore, run_ts: int) -> Path:
    rng = np.random.default_rng(run_ts)
    trial_id = write_trial(store, "smoke", run_ts, {"WakeFirstTouch": rng.lognormal(4, 0.3, 200),
                                                    "Step": rng.lognormal(3, 0.3, 300)})
    return store.find(trial_id)


def load(lake, directory: Path) -> None:
    read, unreadable = read_trials([TrialDirectory(directory)])
    assert not unreadable
    with opened(lake, WRITER, read_only=False) as connection:
        load_and_refresh(connection, read)


def loaded(lake) -> tuple[int, int, int]:
    """Trials in the manifests, request samples, and trials in the marts, as a reader sees them."""
    with opened(lake, READER) as connection:
        return connection.execute(
            "SELECT (SELECT count(*) FROM trial_manifests), (SELECT count(*) FROM request_samples), "
            "(SELECT count(*) FROM wake_latency_distribution)").fetchone()


def child(lake, *args: str) -> subprocess.Popen:
    """A writer process at work on ``lake``; returns once it has said what it is doing."""
    process = subprocess.Popen([sys.executable, "-m", "tests.support.lake_writer_child", *args], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **lake.env(WRITER)})
    said = process.stdout.readline().strip()
    assert said in ("holding", "mid-load"), said
    return process


def test_a_writer_killed_mid_load_leaves_the_last_snapshot_and_the_next_load_works(lake, store):
    load(lake, a_trial(store, 1_700_000_000))
    before = loaded(lake)
    assert before == (1, 500, 1)
    dying = child(lake, "mid-load", str(a_trial(store, 1_700_000_100)))
    # A reader meanwhile sees the state before the load, never part of it; and it does not wait for the writer.
    assert loaded(lake) == before
    dying.send_signal(signal.SIGKILL)
    dying.wait(timeout=60)
    assert loaded(lake) == before
    # Its session is gone, and with it the writer lock: the next load neither waits nor finds half a load.
    with opened(lake, WRITER, read_only=False, wait_s=5) as connection:
        connection.execute("SELECT 1")
    load(lake, a_trial(store, 1_700_000_200))
    assert loaded(lake) == (2, 1000, 2)


def test_a_second_writer_waits_for_the_first_and_says_who_it_is(lake):
    holder = child(lake, "hold")
    try:
        with mock.patch.dict(os.environ, lake.env(WRITER)):
            busy = rf"being written by substrate-bench writer on \S+ pid {holder.pid}"
            with pytest.raises(WarehouseBusy, match=busy), connect(lake.location(WRITER), wait_s=0):
                pass
            told: list[str] = []

            def release(message: str) -> None:  # the second writer is waiting: let the first one go
                told.append(message)
                holder.stdin.write("\n")
                holder.stdin.flush()

            with connect(lake.location(WRITER), wait_s=120, on_wait=release) as connection:
                connection.execute("SELECT 1")
        assert len(told) == 1 and f"pid {holder.pid}" in told[0]
        assert holder.wait(timeout=60) == 0
    finally:
        holder.kill()


def test_a_workstation_import_racing_a_load_waits_for_it_then_lands(lake, tmp_path):
    holder = child(lake, "hold")
    project = make_project(tmp_path / "project", "suites: []\n")
    importing = subprocess.Popen([CLI, "import", str(UPSTREAM)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={**project_env(project), **lake.env(WRITER)}, cwd=project)
    try:
        line = importing.stderr.readline()
        assert "waiting for the shared warehouse" in line and f"pid {holder.pid}" in line, line
        holder.stdin.write("\n")
        holder.stdin.flush()
        _, err = importing.communicate(timeout=300)
        assert importing.returncode == 0, err[-3000:]
    finally:
        holder.kill()
        importing.kill()
    assert loaded(lake)[0] >= 1


def test_maintenance_merges_small_files_when_due_and_keeps_every_row(lake, store):
    with mock.patch.dict(os.environ, {lake_module.MAINTAIN_EVERY_ENV: "0"}):  # no maintenance on its own
        for index in range(4):
            load(lake, a_trial(store, 1_700_000_000 + index * 100))
    with opened(lake, WRITER, read_only=False) as connection:
        rows = {table: connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
                for table in ("request_samples", "wake_latency_distribution", "trials")}
        files = data_files_by_table(connection)
        # A large insert is a file per load; small ones are rows inlined in the catalog, in no file yet.
        assert files["request_samples"] == 4 and files["trial_manifests"] == 0
        assert maintain_when_due(connection, every=1_000_000) is False
        assert maintain_when_due(connection, every=3) is True
        # The loads' files merged into one; the inlined rows flushed into a file per table.
        assert data_files_by_table(connection) == {table: min(count, 1) for table, count in
                                                   data_files_by_table(connection).items()}
        assert data_files_by_table(connection)["request_samples"] == 1
        assert data_files_by_table(connection)["trial_manifests"] == 1
        assert maintain_when_due(connection, every=3) is False  # counted again from its own snapshots
        messages = [row[0] for row in connection.execute("SELECT commit_message FROM ducklake_snapshots('lake')")
                    .fetchall()]
        assert MAINTENANCE_MESSAGE in messages
    with opened(lake, READER) as connection:
        assert {table: connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in rows} == rows


def test_only_the_two_roles_connect_to_the_catalog(servers, lake):
    """deploy/warehouse-catalog.sql takes PUBLIC's rights away: a role of the same server that is neither the writer
    nor the reader cannot connect to the catalog's database."""
    import psycopg2

    postgres = servers.postgres
    _psql(postgres.bin_dir, postgres.sockets, postgres.port,
          ["DO $$ BEGIN CREATE ROLE outsider LOGIN PASSWORD 'outsider'; EXCEPTION WHEN duplicate_object THEN END $$"],
          "postgres")
    with pytest.raises(psycopg2.OperationalError, match="permission denied for database"):
        psycopg2.connect(postgres.dsn("outsider", lake.database), password="outsider", connect_timeout=10).close()
    for role in (WRITER, READER):
        psycopg2.connect(postgres.dsn(role, lake.database), password=postgres.passwords[role],
                         connect_timeout=10).close()


def test_the_lock_holder_is_named_only_from_the_lakes_own_database(servers, lake):
    """Two lakes on one server: a writer holding the other lake's lock is not this lake's holder."""
    other = new_lake(servers)
    holder = child(other, "hold")
    try:
        with mock.patch.dict(os.environ, lake.env(WRITER)):
            session = lake_module.lock_session(lake.location(WRITER), "probe")
            try:
                with session.cursor() as cursor:
                    assert lake_module.lock_holder(cursor) == "another writer"
            finally:
                session.close()
        with mock.patch.dict(os.environ, other.env(WRITER)):
            session = lake_module.lock_session(other.location(WRITER), "probe")
            try:
                with session.cursor() as cursor:
                    assert f"pid {holder.pid}" in lake_module.lock_holder(cursor)
            finally:
                session.close()
    finally:
        holder.kill()
        holder.wait(timeout=60)


def test_the_lock_session_has_short_timeouts_at_both_ends(lake):
    with mock.patch.dict(os.environ, lake.env(WRITER)):
        session = lake_module.lock_session(lake.location(WRITER), "probe")
    try:
        given = session.get_dsn_parameters()
        assert given["connect_timeout"] == str(lake_module.CONNECT_TIMEOUT_S)
        assert (given["keepalives"], given["keepalives_idle"], given["keepalives_interval"],
                given["keepalives_count"]) == ("1", "10", "5", "3")
        with session.cursor() as cursor:  # the server's end, for this session (it is a TCP one)
            cursor.execute("SELECT current_setting('tcp_keepalives_idle'), current_setting('tcp_keepalives_interval'),"
                           " current_setting('tcp_keepalives_count')")
            assert cursor.fetchone() == ("10", "5", "3")
    finally:
        session.close()


def test_a_load_after_a_lake_rebuild_keeps_the_rebuilt_bookkeeping(lake, store, tmp_path):
    """The rebuild publishes schema changes with main: a trial the lake never loaded but the rebuild did is known to
    have rows, so loading it again replaces them (no duplicates), and the marts equal a file rebuilt from the store."""
    from substrate_assets.warehouse.rebuild import rebuild

    models = ROOT / "dbt_like_sql"
    first, second = a_trial(store, 1_700_000_000), a_trial(store, 1_700_000_100)
    load(lake, first)  # the second trial's own load never happened: only the rebuild loads it
    with mock.patch.dict(os.environ, lake.env(WRITER)):
        rebuild(store, lake.location(WRITER), models, wait_s=5)
    load(lake, second)
    file_warehouse = tmp_path / "file.duckdb"
    rebuild(store, file_warehouse, models)

    def every_row(connection) -> dict[str, list[tuple]]:
        return {name: connection.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
                for name in ("trial_manifests", "request_samples", "wake_latency_distribution", "change_points")}

    with opened(lake) as connection:
        landed = every_row(connection)
    with connect(file_warehouse, read_only=True) as connection:
        assert landed == every_row(connection)
    assert loaded(lake) == (2, 1000, 2)


def test_a_reader_loads_no_extension_of_its_own_though_signatures_go_unchecked(lake, tmp_path):
    """The lake's connections load the pinned wheels' extensions without DuckDB re-checking their signatures; a
    reader, once attached, can load no file of its own."""
    from substrate_assets.warehouse.extensions import extension_path

    forged = tmp_path / "forged.duckdb_extension"
    forged.write_bytes(extension_path("httpfs").read_bytes()[:4096])
    with opened(lake, WRITER, read_only=False):
        pass  # the first writer creates the lake
    with opened(lake, READER) as connection:
        assert connection.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone() == (True,)
        with pytest.raises(duckdb.Error, match=r"disabled|Permission|not allowed"):
            connection.execute(f"LOAD '{forged}'")
        with pytest.raises(duckdb.Error, match="lock"):
            connection.execute("SET allow_unsigned_extensions = false")


def test_a_reader_rounds_with_py_round_only_when_its_sql_asks(lake):
    from substrate_assets.warehouse.query import query

    with opened(lake, WRITER, read_only=False):
        pass  # the first writer creates the lake
    with opened(lake, READER) as connection, pytest.raises(duckdb.CatalogException, match="py_round"):
        connection.execute("SELECT py_round(0.125, 2)")
    with mock.patch.dict(os.environ, lake.env(READER)):
        assert query(lake.location(READER), "SELECT py_round(0.125, 2) AS r, py_round(2.5, 0) AS s").rows == [
            (0.12, 2.0)]


def test_a_process_attaches_once_and_sees_what_other_writers_commit(lake, store):
    """A process attaches the lake once a role (~85 catalog statements), each connection a cursor on that instance:
    its in-memory database outlives the connection. Another process's load committed in between is seen (DuckLake
    starts each transaction at the latest snapshot) and the next load here lands beside it; a reader's reused
    instance is still shut to all but the lake; an instance a connection failed on is not used again."""
    first, second, third = (a_trial(store, 1_700_000_000 + index * 600) for index in range(3))
    load(lake, first)
    with opened(lake, WRITER, read_only=False) as connection:
        connection.execute("CREATE TABLE memory.main.marker AS SELECT 1 AS attached_once")
    program = ("import sys\nfrom pathlib import Path\nfrom substrate_assets.results.trial_directory import "
               "TrialDirectory\nfrom substrate_assets.warehouse.connection import connect\n"
               "from substrate_assets.warehouse.location import warehouse_location\n"
               "from substrate_assets.warehouse.refresh import load_and_refresh\n"
               "from substrate_assets.warehouse.trial_rows import read_trials\n"
               "read, _ = read_trials([TrialDirectory(Path(sys.argv[1]))])\n"
               "with connect(warehouse_location()) as connection:\n    load_and_refresh(connection, read)\n")
    subprocess.run([sys.executable, "-c", program, str(second)], cwd=ROOT, env={**os.environ, **lake.env(WRITER)},
                   check=True, timeout=300)
    load(lake, third)
    with opened(lake, WRITER, read_only=False) as connection:
        assert connection.execute("SELECT attached_once FROM memory.main.marker").fetchone() == (1,)
        assert connection.execute("SELECT count(*) FROM trial_manifests").fetchone() == (3,)
    assert loaded(lake)[0] == loaded(lake)[2] == 3
    with opened(lake, READER) as connection, pytest.raises(duckdb.Error, match=r"disabled|Permission|not allowed"):
        connection.execute(f"SELECT * FROM read_csv('{first / 'trial.json'}')")
    with pytest.raises(duckdb.CatalogException), opened(lake, WRITER, read_only=False) as connection:
        connection.execute("SELECT * FROM no_such_table")
    with opened(lake, WRITER, read_only=False) as connection, pytest.raises(duckdb.CatalogException, match="marker"):
        connection.execute("SELECT * FROM memory.main.marker")
