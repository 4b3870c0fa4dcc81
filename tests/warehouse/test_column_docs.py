"""Every column of every warehouse table says what it holds: the descriptions of schema.yml (models) and sources.yml
(raw tables) cover exactly the columns an empty warehouse has once built, in memory."""

from pathlib import Path

import pytest

from substrate_assets.warehouse.column_docs import ColumnDocsError, column_descriptions, table_columns


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
