"""The main job into a shared warehouse, with real parts: a DuckLake whose catalog is a real PostgreSQL and whose
data is in a real S3 API (moto). `run` lands two trials through the whole graph; `sql`, `compare` and `report` read
them from other processes with the reader's role; the marts equal those of a file warehouse rebuilt from the same
run store, and a rebuild of the lake itself gives them back again."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import DATA_PATH_ENV
from tests.support.lake import READER, WRITER, lake_servers, new_lake, opened
from tests.support.projects import SMOKE_SUITES, make_project, project_env

CLI = str(Path(sys.executable).parent / "substrate-bench")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with lake_servers() as servers:
        lake = new_lake(servers)
        project = make_project(tmp_path_factory.mktemp("project"), SMOKE_SUITES)
        runs = [cli(project, lake.env(WRITER), "run", "smoke") for _ in range(2)]
        yield project, lake, runs


def cli(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300, cwd=project,
                          env={**project_env(project), **env})


def every_table(connection) -> dict[str, list[tuple]]:
    """Every table of the warehouse (raw tables, marts, change points, noise floor), each row in order."""
    names = [row[0] for row in connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "ORDER BY 1").fetchall()]
    return {name: connection.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in names}


def test_run_lands_its_trials_in_the_shared_warehouse(shared):
    project, lake, runs = shared
    for done in runs:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "density_frontiers (smoke-" in done.stdout and "wake_latency_distribution (smoke-" in done.stdout
    assert not (project / "warehouse.duckdb").exists()  # nothing went to the default file
    with opened(lake) as connection:
        assert connection.execute("SELECT count(*), count(p50_ms) FROM wake_latency_distribution").fetchone() == (2, 2)
        # The rows are Parquet files (or rows inlined in the catalog) of the lake: its data path is in the store.
        files = connection.execute("SELECT data_file FROM ducklake_list_files('lake', 'request_samples')").fetchall()
        assert all(path.startswith(lake.data_path) for (path,) in files)


def test_other_processes_read_it_with_the_readers_role(shared):
    project, lake, _ = shared
    reader = lake.env(READER)
    done = cli(project, reader, "sql", "select count(*) as n from density_frontiers", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": 2}]
    listed = cli(project, reader, "sql", "select trial_id from trials order by trial_id", "--format", "csv")
    first, second = listed.stdout.split()[1:]
    compared = cli(project, reader, "compare", first, second)
    # A verdict, whichever the two real trials earned (0 no regression, 3 regressed: a trial that failed requests on a
    # loaded machine moves the failure ratio past its threshold, 4 the data cannot tell); never an error (1, 2).
    assert compared.returncode in (0, 3, 4), compared.stderr
    assert "WakeFirstTouch" in compared.stdout
    page = project / "report.html"
    reported = cli(project, reader, "report", "--trial", second, "-o", str(page))
    assert reported.returncode == 0, reported.stderr
    assert second in page.read_text()


def test_a_reader_without_the_data_path_reads_the_lakes_parquet_files(shared):
    """The catalog records the data path: a reader told only the catalog finds it there, with the object store's
    secret and its lockdown made for it, and reads rows that only live in Parquet files in the store."""
    project, lake, _ = shared
    reader = {name: value for name, value in lake.env(READER).items() if name != DATA_PATH_ENV}
    with opened(lake) as connection:
        assert connection.execute("SELECT count(*) FROM ducklake_list_files('lake', 'request_samples')").fetchone()[0]
        # Every value of every row, so the files are read, not the catalog's counts.
        every_value = "SELECT count(*) AS n, sum(hash(r)) AS h FROM request_samples r"
        expected = connection.execute(every_value).fetchone()
    done = cli(project, reader, "sql", every_value, "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == f"{expected[0]},{expected[1]}"
    refused = cli(project, reader, "sql", "select * from read_text('/etc/hostname')")
    assert refused.returncode == 1 and "refused" in refused.stderr, refused.stderr


def test_materialize_reloads_a_trial_into_the_lake_without_duplicates(shared):
    project, lake, _ = shared
    with opened(lake) as connection:
        trial_id, before = connection.execute("SELECT min(trial_id), count(*) FROM request_samples").fetchone()
    done = cli(project, lake.env(WRITER), "materialize", trial_id)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"trial {trial_id} reloaded" in done.stdout
    with opened(lake) as connection:
        assert connection.execute("SELECT count(*) FROM request_samples").fetchone()[0] == before
        assert connection.execute("SELECT count(*), count(DISTINCT trial_id) FROM trials").fetchone() == (2, 2)


def test_the_readers_role_writes_nothing_and_sql_reaches_nothing_else(shared, tmp_path):
    project, lake, _ = shared
    reader = lake.env(READER)
    for statement in ("insert into trials select * from trials",
                      "select * from read_text('/etc/hostname')",
                      f"copy trials to '{tmp_path / 'out.csv'}'",
                      f"attach '{tmp_path / 'other.duckdb'}' as other",
                      "set enable_external_access = true",
                      # The postgres extension's functions connect wherever they are told, external access or not.
                      f"select * from postgres_scan('{lake.location(READER).conninfo}', 'public', 'ducklake_snapshot')",
                      "select * from query('select 1')"):
        done = cli(project, reader, "sql", statement)
        assert done.returncode == 1 and "refused" in done.stderr, (statement, done.stderr)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.duckdb").exists()


def test_a_password_in_the_setting_is_refused_before_anything_runs(shared):
    project, lake, _ = shared
    env = lake.env(READER)
    env["SUBSTRATE_BENCH_WAREHOUSE"] += " password=hunter2"
    done = cli(project, env, "sql", "select 1")
    assert done.returncode == 1 and "PGPASSWORD" in done.stderr and "hunter2" not in done.stderr


def test_the_marts_equal_a_file_warehouse_rebuilt_from_the_same_store_and_a_rebuilt_lake(shared, tmp_path):
    project, lake, _ = shared
    with opened(lake) as connection:
        landed = every_table(connection)
    assert {"density_frontiers", "wake_latency_distribution", "noise_floor", "change_points"} <= set(landed)
    file_warehouse = tmp_path / "file.duckdb"
    done = cli(project, {"SUBSTRATE_BENCH_WAREHOUSE": str(file_warehouse)}, "rebuild")
    assert done.returncode == 0, done.stderr
    with connect(file_warehouse, read_only=True) as connection:
        assert every_table(connection) == landed
    done = cli(project, lake.env(WRITER), "rebuild")
    assert done.returncode == 0, done.stderr
    assert "from 2 trials" in done.stdout
    with opened(lake) as connection:
        assert every_table(connection) == landed
