"""DuckLake's maintenance deletes the files a killed writer left, and only once they are older than the grace that
keeps a live writer's files: on a real DuckLake (its catalog a DuckDB file, its data a local directory, so the
files' ages can be set)."""

import os
import time
import uuid
from pathlib import Path

import duckdb

from substrate_assets.warehouse.extensions import NO_AUTOLOAD, PACKAGES, load_extension
from substrate_assets.warehouse.lake import KEEP_SNAPSHOTS_H, maintain
from substrate_assets.warehouse.location import LAKE_ALIAS


def test_a_killed_writers_file_is_deleted_once_older_than_the_grace(tmp_path: Path) -> None:
    connection = duckdb.connect(config=NO_AUTOLOAD)
    for name in PACKAGES:
        load_extension(connection, name)
    data = tmp_path / "data"
    connection.execute(f"ATTACH 'ducklake:{tmp_path / 'catalog.ducklake'}' AS {LAKE_ALIAS} (DATA_PATH '{data}/')")
    connection.execute(f"USE {LAKE_ALIAS}")
    connection.execute("CREATE TABLE request_samples AS SELECT range AS i FROM range(100000)")
    rows = connection.execute("SELECT count(*), sum(i) FROM request_samples").fetchone()
    # What a writer killed before its commit leaves: a file named as DuckLake names its own, that no snapshot names.
    stray = data / "main" / "request_samples" / f"ducklake-{uuid.uuid4()}.parquet"
    connection.execute(f"COPY (SELECT 1 AS i) TO '{stray}' (FORMAT parquet)")
    maintain(connection)
    assert stray.exists()  # as recent as a live writer's files: kept
    hours_ago = time.time() - (KEEP_SNAPSHOTS_H + 1) * 3600
    os.utime(stray, (hours_ago, hours_ago))
    maintain(connection)
    assert not stray.exists()
    assert connection.execute("SELECT count(*), sum(i) FROM request_samples").fetchone() == rows
    assert connection.execute(f"SELECT count(*) FROM ducklake_list_files('{LAKE_ALIAS}', 'request_samples')"
                              ).fetchone()[0] >= 1
    connection.close()
