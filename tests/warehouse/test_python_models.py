"""Models built in Python are nodes of the same graph as the SQL models, and every refresh of the marts is one
function: on a real DuckDB file, a scratch project of two SQL models and a scratch Python model over them."""

from pathlib import Path

import duckdb
import pytest

from substrate_assets.defs.warehouse.models import model_assets
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models import python_models
from substrate_assets.warehouse.models.discovery import ModelError, build_order
from substrate_assets.warehouse.models.marts import build_marts, refresh_marts
from substrate_assets.warehouse.models.python_models import PYTHON_MODELS, PythonModel, every_model
from substrate_assets.warehouse.raw_tables import ensure_schema
from tests.support.projects import two_models

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = """\
models:
  - name: first
    columns:
      - name: trial_id
        tests: [not_null]
  - name: second
    columns:
      - name: trial_id
        tests: [not_null]
  - name: first_count
    columns:
      - name: rows
        tests: [not_null]
"""


def _count_first(connection: duckdb.DuckDBPyConnection, books, models) -> None:
    connection.execute("CREATE OR REPLACE TABLE first_count AS SELECT count(*) AS rows FROM first")


FIRST_COUNT = PythonModel("first_count", ("first",), "How many rows first holds.", "python", _count_first,
                          _count_first)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    monkeypatch.setattr(python_models, "PYTHON_MODELS", (*python_models.PYTHON_MODELS, FIRST_COUNT))
    return two_models(tmp_path, SCHEMA)


def test_a_python_model_joins_the_graph_when_what_it_reads_is_a_model(project):
    models = every_model(project / "dbt_like_sql")
    # change_points reads metric_history, which this project lacks: not one of its models.
    assert set(models) == {"first", "second", "first_count"}
    order = [model.name for model in build_order(models)]
    assert order.index("first") < order.index("first_count")
    [marts] = model_assets()
    assert {key.to_user_string() for key in marts.keys} == {"first", "second", "first_count"}
    assert [dep.asset_key.to_user_string() for dep in marts.specs_by_key[
        next(key for key in marts.keys if key.to_user_string() == "first_count")].deps] == ["first"]


def test_the_projects_python_models_join_its_models_in_the_order_of_what_they_read():
    models = every_model(ROOT / "dbt_like_sql")
    order = [model.name for model in build_order(models)]
    python = {model.name for model in models.values() if isinstance(model, PythonModel)}
    assert python == {model.name for model in PYTHON_MODELS}  # each reads only the project's models
    assert order.index("metric_history") < order.index("change_points") < order.index("noise_floor")


def test_a_sql_file_named_as_a_python_model_is_refused(project):
    (project / "dbt_like_sql" / "first_count.sql").write_text("SELECT 1 AS rows")
    with pytest.raises(ModelError, match=r"first_count\.sql: model 'first_count' is a model built in Python"):
        every_model(project / "dbt_like_sql")


def test_a_refresh_builds_python_and_sql_models_in_order_and_tests_each(project):
    with connect(project / "w.duckdb") as connection:
        refreshed = refresh_marts(connection, project / "dbt_like_sql")
        assert [table.name for table in refreshed.tables] == [
            model.name for model in build_order(every_model(project / "dbt_like_sql"))]
        assert connection.execute("SELECT rows FROM first_count").fetchall() == [(1,)]
        assert {name: [outcome.passed for outcome in outcomes] for name, outcomes in refreshed.outcomes.items()} == \
            {"first": [True], "second": [True], "first_count": [True]}
        assert refreshed.skipped == {}


def test_a_failed_key_test_stops_what_reads_the_table_in_a_refresh_but_not_in_a_whole_build(project):
    (project / "dbt_like_sql" / "first.sql").write_text("SELECT NULL::VARCHAR AS trial_id, 1 AS n")
    with connect(project / "w.duckdb") as connection:
        refreshed = refresh_marts(connection, project / "dbt_like_sql")
        assert [table.name for table in refreshed.tables] == ["first"]
        assert refreshed.skipped == {"second": "first: trial_id_not_null", "first_count": "first: trial_id_not_null"}
        assert [outcome.violations for outcome in refreshed.tests] == [1]
    with connect(project / "rebuilt.duckdb") as connection:
        built = build_marts(connection, project / "dbt_like_sql")
        # A whole build replaces the warehouse: every table is there, the failure reported.
        assert {table.name for table in built.tables} == {"first", "second", "first_count"}
        assert built.skipped == {} and [outcome.passed for outcome in built.outcomes["first"]] == [False]


def test_a_selected_model_builds_a_model_it_reads_that_was_never_built(project):
    with connect(project / "w.duckdb") as connection:
        refreshed = refresh_marts(connection, project / "dbt_like_sql", selected={"first_count"})
        assert [table.name for table in refreshed.tables] == ["first", "first_count"]
        refreshed = refresh_marts(connection, project / "dbt_like_sql", selected={"first_count"})
        assert [table.name for table in refreshed.tables] == ["first_count"]


def test_a_failed_key_test_goes_on_stopping_what_reads_the_table_until_it_is_mended(project):
    (project / "dbt_like_sql" / "first.sql").write_text("SELECT NULL::VARCHAR AS trial_id, 1 AS n")
    with connect(project / "w.duckdb") as connection:
        ensure_schema(connection)  # the bookkeeping: a second refresh finds first up to date and does not rebuild it
        refresh_marts(connection, project / "dbt_like_sql")
        again = refresh_marts(connection, project / "dbt_like_sql")
        assert [table.updated for table in again.tables] == [()]  # nothing new for first
        assert again.skipped == {"second": "first: trial_id_not_null", "first_count": "first: trial_id_not_null"}
    (project / "dbt_like_sql" / "first.sql").write_text("SELECT 'a' AS trial_id, 1 AS n")
    with connect(project / "w.duckdb") as connection:
        mended = refresh_marts(connection, project / "dbt_like_sql")
        assert mended.skipped == {} and {table.name for table in mended.tables} == {"first", "second", "first_count"}


def test_a_python_model_built_whole_is_described_by_its_new_columns(project, monkeypatch):
    """The refresh reads every table's columns once, before it builds; a Python model whose build changed its
    columns is described by what it holds now, with no step of its own to forget."""
    with connect(project / "w.duckdb") as connection:
        ensure_schema(connection)  # the bookkeeping, whose columns the refresh reads once
        refresh_marts(connection, project / "dbt_like_sql")

        def count_first_and_more(connection: duckdb.DuckDBPyConnection, books, models) -> None:
            connection.execute("CREATE OR REPLACE TABLE first_count AS SELECT count(*) AS rows, 1 AS more FROM first")

        wider = PythonModel("first_count", ("first",), "How many rows first holds.", "python", count_first_and_more,
                            count_first_and_more)
        monkeypatch.setattr(python_models, "PYTHON_MODELS", (*python_models.PYTHON_MODELS[:-1], wider))
        refreshed = refresh_marts(connection, project / "dbt_like_sql")
        [described] = [table for table in refreshed.tables if table.name == "first_count"]
        assert [name for name, _ in described.columns] == ["rows", "more"]
