"""Every column of every warehouse table says what it holds: the descriptions of schema.yml (models) and sources.yml
(raw tables) cover exactly the columns an empty warehouse has once built, in memory."""

import json
import shutil
from pathlib import Path

import pytest

from substrate_assets.warehouse.column_docs import (
    ColumnDocsError,
    column_descriptions,
    known_table_columns,
    table_columns,
)
from substrate_assets.warehouse.models.discovery import ModelError


def test_every_column_of_every_table_is_described_and_nothing_else():
    tables, described = table_columns(), column_descriptions()
    assert set(described) == set(tables)
    for table, columns in tables.items():
        names = [name for name, _ in columns]
        assert sorted(described[table]) == sorted(names), table
        assert all(text and len(text) <= 200 for text in described[table].values()), table


def test_types_come_from_the_built_tables():
    columns = dict(table_columns()["wake_latency_distribution"])
    assert columns["trial_id"] == "VARCHAR" and columns["p50_ms"] == "DOUBLE"


def test_a_column_entry_without_a_name_is_refused_naming_the_file(tmp_path: Path):
    (tmp_path / "schema.yml").write_text("models:\n  - name: trials\n    columns:\n      - description: x\n")
    with pytest.raises(ColumnDocsError, match=r"schema\.yml: model trials: a column entry without a name"):
        column_descriptions(tmp_path)


def test_the_columns_are_kept_across_processes_until_a_model_changes(tmp_path: Path, monkeypatch):
    models = tmp_path / "project" / "dbt_like_sql"
    shutil.copytree(Path(__file__).resolve().parents[2] / "dbt_like_sql", models)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(models.parent))
    monkeypatch.setenv("SUBSTRATE_BENCH_CACHE", str(tmp_path / "cache"))
    built = known_table_columns(models)
    assert built == table_columns()
    cache = tmp_path / "cache" / "models" / "table-columns.json"
    kept = json.loads(cache.read_text())
    # What the cache holds is what a later process gets, without building: a marked cache proves it was read.
    kept["tables"]["trials"] = [["read_from_the_cache", "VARCHAR"]]
    cache.write_text(json.dumps(kept))
    assert known_table_columns(models)["trials"] == [("read_from_the_cache", "VARCHAR")]
    # A changed model is built again: its new column shows, and the cache holds it.
    summary = models / "trial_summary.sql"
    sql = summary.read_text().rstrip().rstrip(";")
    summary.write_text(f"SELECT *, 1 AS added_column FROM ({sql})\n")
    rebuilt = known_table_columns(models)
    assert ("added_column", "INTEGER") in rebuilt["trial_summary"] and rebuilt["trials"] == built["trials"]
    assert json.loads(cache.read_text())["key"] != kept["key"]
    # A cache file of another shape is built again, not trusted.
    broken = json.loads(cache.read_text())
    broken["tables"]["trials"] = [["a column without a type"]]
    cache.write_text(json.dumps(broken))
    assert known_table_columns(models) == rebuilt


def test_a_model_that_does_not_build_is_raised_and_not_kept(tmp_path: Path, monkeypatch):
    models = tmp_path / "project" / "dbt_like_sql"
    shutil.copytree(Path(__file__).resolve().parents[2] / "dbt_like_sql", models)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(models.parent))
    monkeypatch.setenv("SUBSTRATE_BENCH_CACHE", str(tmp_path / "cache"))
    (models / "trial_summary.sql").write_text("SELECT no_such_column FROM trials\n")
    with pytest.raises(ModelError, match=r"trial_summary\.sql: .*no_such_column"):
        known_table_columns(models)
    assert not (tmp_path / "cache" / "models" / "table-columns.json").exists()
