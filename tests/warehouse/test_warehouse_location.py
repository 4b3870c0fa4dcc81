"""The one setting that chooses the warehouse: a file by default, a DuckLake by its catalog's connection string; the
secrets it may never carry, and the object store's secret built from the standard AWS_* variables."""

from pathlib import Path

import pytest

from substrate_assets.project import WAREHOUSE_ENV
from substrate_assets.warehouse.location import (
    DATA_PATH_ENV,
    BadWarehouseSetting,
    Lake,
    object_store_secret,
    parse_lake,
    warehouse_location,
)

CATALOG = "ducklake:postgres:dbname=lake host=db.internal port=5432 user=bench"


def test_the_default_is_the_projects_file(monkeypatch, tmp_path):
    monkeypatch.delenv(WAREHOUSE_ENV, raising=False)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    assert warehouse_location() == tmp_path.resolve() / "warehouse.duckdb"
    monkeypatch.setenv(WAREHOUSE_ENV, "elsewhere.duckdb")
    assert warehouse_location() == Path("elsewhere.duckdb").resolve()


def test_a_ducklake_setting_names_its_catalog_and_data_path(monkeypatch):
    monkeypatch.setenv(WAREHOUSE_ENV, CATALOG)
    monkeypatch.setenv(DATA_PATH_ENV, "s3://bench-lake/warehouse")
    lake = warehouse_location()
    assert lake == Lake("dbname=lake host=db.internal port=5432 user=bench", "s3://bench-lake/warehouse/")
    assert lake.catalog == CATALOG
    assert str(lake) == f"{CATALOG} (data in s3://bench-lake/warehouse/)"
    monkeypatch.delenv(DATA_PATH_ENV)
    assert warehouse_location().data_path is None  # a reader: the catalog knows its data path
    assert warehouse_location("ducklake:postgres:dbname=other").conninfo == "dbname=other"  # --warehouse wins


@pytest.mark.parametrize("setting", [
    f"{CATALOG} password=hunter2", "ducklake:postgres:postgresql://bench:hunter2@db/lake",
    "ducklake:postgres:password = hunter2 dbname=lake", f"{CATALOG} sslpassword=hunter2",
    "ducklake:postgres:postgresql://bench@db/lake?password=hunter2",
    "ducklake:postgres:postgresql://bench@db/lake?sslmode=require&PASSWORD=hunter2",
    "ducklake:postgres://bench:hunter2@db/lake",
    # Refused for the password before its wrong prefix is reported, and without repeating it either way.
    "ducklake:sqlite://bench:hunter2@db/lake", "postgres:dbname=lake password=hunter2",
])
def test_a_password_in_the_setting_is_refused_without_repeating_it(setting):
    with pytest.raises(BadWarehouseSetting, match="PGPASSWORD") as refused:
        parse_lake(setting, None)
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize(("setting", "data_path", "said"), [
    ("ducklake:sqlite:meta.db", None, "catalog in PostgreSQL"),
    ("ducklake:postgres:  ", None, "connection string is empty"),
    (CATALOG, "/local/dir", "s3://bucket/prefix/"),
    (CATALOG, "https://example.com/x", "gs://bucket/prefix/"),
])
def test_a_bad_setting_says_what_is_expected(setting, data_path, said):
    with pytest.raises(BadWarehouseSetting, match=said) as refused:
        parse_lake(setting, data_path)
    for given in (setting.strip(), data_path):
        if given:
            assert given not in str(refused.value)  # a bad setting is never repeated: it may hold a secret


def test_the_object_stores_secret_comes_from_the_aws_variables():
    assert object_store_secret("s3://b/p/", {}) is None  # no key: DuckDB's own defaults
    env = {"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "it's-secret", "AWS_REGION": "eu-west-1",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}
    sql = object_store_secret("s3://b/p/", env)
    assert sql.startswith("CREATE OR REPLACE SECRET warehouse_data (TYPE s3, ")
    for part in ("KEY_ID 'AKIA1'", "SECRET 'it''s-secret'", "REGION 'eu-west-1'", "ENDPOINT '127.0.0.1:9000'",
                 "URL_STYLE 'path'", "USE_SSL false", "SCOPE 's3://b/p/'"):
        assert part in sql
    https = object_store_secret("s3://b/p/", {**env, "AWS_ENDPOINT_URL": "https://minio.internal"})
    assert "ENDPOINT 'minio.internal'" in https and "USE_SSL true" in https
    gcs = object_store_secret("gs://b/p/", {**env, "AWS_SESSION_TOKEN": "tok"})
    assert "TYPE gcs" in gcs and "ENDPOINT" not in gcs and "SESSION_TOKEN 'tok'" in gcs


@pytest.mark.parametrize("command", [["sql", "select 1"], ["rebuild"]])
def test_a_catalog_that_does_not_answer_is_one_line_naming_it(command, tmp_path):
    """A reader's attach and a writer's lock both reach the catalog first: nothing listens on port 1."""
    import subprocess
    import sys

    from tests.support.projects import make_project, project_env

    project = make_project(tmp_path / "project", "suites: []\n")
    setting = "ducklake:postgres:dbname=lake host=127.0.0.1 port=1 user=lake_reader"
    done = subprocess.run([str(Path(sys.executable).parent / "substrate-bench"), *command], capture_output=True,
                          text=True, timeout=120, cwd=project,
                          env={**project_env(project), WAREHOUSE_ENV: setting, "PGPASSWORD": "s3cr3t-pw"})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "port=1" in done.stderr and "s3cr3t-pw" not in done.stderr
    assert ("does not attach" if command[0] == "sql" else "does not answer") in done.stderr


@pytest.mark.parametrize("every", ["often", "-1", "2.5"])
def test_a_bad_maintenance_interval_is_refused_before_the_writer_holds_or_writes_anything(monkeypatch, every):
    """Nothing listens on port 1: a writer that reached for the lock would fail with WarehouseUnreachable instead."""
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.lake import MAINTAIN_EVERY_ENV

    monkeypatch.setenv(MAINTAIN_EVERY_ENV, every)
    lake = Lake("dbname=lake host=127.0.0.1 port=1 user=lake_writer", "s3://bench-lake/warehouse/")
    with pytest.raises(ValueError, match=rf"{MAINTAIN_EVERY_ENV}='{every}'"), connect(lake) as connection:
        connection.execute("SELECT 1")  # never reached


def test_runs_printing_of_a_trial_says_a_lake_that_does_not_answer_in_one_line(monkeypatch):
    """What run and materialize print after the trial (its rows, its verdict) and ab's comparison read the lake:
    one that does not answer (nothing listens on port 1) is a click error naming it, never a traceback or a password."""
    import click

    from substrate_assets.cli.job_results import show_trial
    from substrate_assets.cli.output import wide_console
    from substrate_assets.cli.warehouse_choice import warehouse_said_unavailable

    monkeypatch.setenv(WAREHOUSE_ENV, "ducklake:postgres:dbname=lake host=127.0.0.1 port=1 user=lake_reader")
    monkeypatch.setenv("PGPASSWORD", "s3cr3t-pw")
    with pytest.raises(click.ClickException) as said, warehouse_said_unavailable():
        show_trial(wide_console(), "smoke-1")
    assert "port=1" in said.value.message and "does not attach" in said.value.message
    assert "s3cr3t-pw" not in said.value.message
