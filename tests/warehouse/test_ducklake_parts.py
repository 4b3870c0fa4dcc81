"""The parts a shared warehouse stands on, real and offline: DuckDB's ducklake, postgres_scanner and httpfs
extensions load from their pinned wheels with nothing fetched; a DuckLake whose catalog is a real PostgreSQL and
whose data sits in a real S3 API (moto) takes a writer's rows, shows them to a reader's read-only attach in another
connection under a role that may only read, and refuses that reader's writes."""

import duckdb
import pytest

from substrate_assets.warehouse import extensions
from substrate_assets.warehouse.extensions import NO_AUTOLOAD, ExtensionMissing, extension_path, load_extension
from tests.support.postgres import READER, WRITER, postgres_server
from tests.support.s3 import s3_server


@pytest.fixture(scope="module")
def lake():
    with postgres_server() as postgres, s3_server() as s3:
        yield postgres, s3


def open_lake(postgres, s3, role: str, monkeypatch, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    monkeypatch.setenv("PGPASSWORD", postgres.passwords[role])  # libpq's own variable: never on a command line
    connection = duckdb.connect(config=NO_AUTOLOAD)
    for name in extensions.PACKAGES:
        load_extension(connection, name)
    connection.execute(s3.secret_sql())
    options = f"DATA_PATH 's3://{s3.bucket}/warehouse/'" + (", READ_ONLY" if read_only else "")
    connection.execute(f"ATTACH 'ducklake:postgres:{postgres.dsn(role)}' AS lake ({options})")
    connection.execute("USE lake")
    return connection


def test_each_extension_loads_from_its_wheel_with_nothing_fetched():
    connection = duckdb.connect(config=NO_AUTOLOAD)
    for name in extensions.PACKAGES:
        assert extension_path(name).is_file()
        load_extension(connection, name)
    loaded = dict(connection.execute("SELECT extension_name, loaded FROM duckdb_extensions()").fetchall())
    assert all(loaded[name] for name in extensions.PACKAGES)


def test_a_missing_wheel_names_the_package_to_install(monkeypatch):
    monkeypatch.setitem(extensions.PACKAGES, "ducklake", "duckdb_extension_not_there")
    with pytest.raises(ExtensionMissing, match=rf"duckdb-extension-not-there=={duckdb.__version__}"):
        extension_path("ducklake")


def test_a_writer_and_a_read_only_reader_share_the_lake(lake, monkeypatch):
    postgres, s3 = lake
    writer = open_lake(postgres, s3, WRITER, monkeypatch)
    writer.execute("CREATE TABLE trials AS SELECT range AS n, 'trial-' || range AS trial_id FROM range(3)")
    writer.execute("CREATE TABLE samples AS SELECT range AS n, random() AS latency_ms FROM range(100000)")
    # The large table's rows are Parquet files under the data path, in the object store.
    assert writer.execute("SELECT count(*) FROM ducklake_list_files('lake', 'samples')").fetchone()[0] >= 1
    assert all(path.startswith(f"s3://{s3.bucket}/warehouse/") for (path,) in writer.execute(
        "SELECT data_file FROM ducklake_list_files('lake', 'samples')").fetchall())

    reader = open_lake(postgres, s3, READER, monkeypatch, read_only=True)
    assert reader.execute("SELECT count(*), max(trial_id) FROM trials").fetchone() == (3, "trial-2")
    assert reader.execute("SELECT count(*) FROM samples").fetchone()[0] == 100000
    with pytest.raises(duckdb.Error, match="read-only"):
        reader.execute("INSERT INTO trials VALUES (9, 'trial-9')")

    # A reader sees a writer's commit, never its transaction half done, nor one it rolled back.
    writer.execute("BEGIN TRANSACTION")
    writer.execute("INSERT INTO trials VALUES (3, 'trial-3')")
    assert reader.execute("SELECT count(*) FROM trials").fetchone()[0] == 3
    writer.execute("ROLLBACK")
    assert reader.execute("SELECT count(*) FROM trials").fetchone()[0] == 3
    writer.execute("INSERT INTO trials VALUES (3, 'trial-3')")
    assert reader.execute("SELECT count(*) FROM trials").fetchone()[0] == 4
    writer.close()
    reader.close()


def test_the_reader_role_cannot_write_even_without_read_only(lake, monkeypatch):
    """The catalog's own privileges hold when the attach forgets READ_ONLY: the reader role may only SELECT."""
    postgres, s3 = lake
    writer = open_lake(postgres, s3, WRITER, monkeypatch)
    writer.execute("CREATE TABLE IF NOT EXISTS marks AS SELECT 1 AS n")
    writer.close()
    reader = open_lake(postgres, s3, READER, monkeypatch)
    with pytest.raises(duckdb.Error, match=r"(?i)permission denied"):
        reader.execute("INSERT INTO marks VALUES (2)")
    reader.close()
