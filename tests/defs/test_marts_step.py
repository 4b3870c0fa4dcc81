"""The marts refreshed in one step: every model still its own asset with its own checks, any subset materializable,
and a failed blocking test keeps what reads its table from being refreshed (as separate steps would), on a real
DuckDB file and a real (ephemeral) Dagster instance."""

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from substrate_assets.defs.warehouse.models import COMMITTED_AT, model_assets
from substrate_assets.defs.warehouse.resources import WarehouseResource
from tests.support.projects import two_models

SCHEMA = """\
models:
  - name: first
    columns:
      - name: trial_id
        tests: [not_null]
      - name: n
        tests:
          - expression: "n >= 0"
  - name: second
    columns:
      - name: trial_id
        tests: [not_null]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    return two_models(tmp_path, SCHEMA)


def refresh(project: Path, first_sql: str, selection: list[str] | None = None) -> dg.ExecuteInProcessResult:
    (project / "dbt_like_sql" / "first.sql").write_text(first_sql)
    [marts] = model_assets()
    return dg.materialize([marts], selection=[dg.AssetKey(name) for name in selection] if selection else None,
                          instance=dg.DagsterInstance.ephemeral(), raise_on_error=False,
                          resources={"warehouse": WarehouseResource(database=str(project / "warehouse.duckdb"))})


def materialized(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {event.asset_key.to_user_string(): event.metadata for event in result.get_asset_materialization_events()
            for event in [event.event_specific_data.materialization]}


def rows(project: Path, table: str) -> list[tuple]:
    with duckdb.connect(str(project / "warehouse.duckdb"), read_only=True) as connection:
        return connection.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def test_every_model_is_its_own_asset_with_its_own_checks(project):
    [marts] = model_assets()
    assert {key.to_user_string() for key in marts.keys} == {"first", "second"}
    assert {(key.asset_key.to_user_string(), key.name) for key in marts.check_keys} == {
        ("first", "key_tests"), ("first", "value_tests"), ("second", "key_tests")}
    result = refresh(project, "SELECT 'a' AS trial_id, 1 AS n")
    assert result.success
    metadata = materialized(result)
    assert set(metadata) == {"first", "second"} and metadata["first"][COMMITTED_AT].value > 0
    assert [(evaluation.asset_key.to_user_string(), evaluation.check_name, evaluation.passed)
            for evaluation in result.get_asset_check_evaluations()] == [
        ("first", "key_tests", True), ("first", "value_tests", True), ("second", "key_tests", True)]
    assert rows(project, "second") == [("a", 2)]


def test_a_subset_refreshes_only_what_was_selected(project):
    refresh(project, "SELECT 'a' AS trial_id, 1 AS n")
    result = refresh(project, "SELECT 'b' AS trial_id, 5 AS n", selection=["first"])
    assert result.success and set(materialized(result)) == {"first"}
    assert rows(project, "first") == [("b", 5)] and rows(project, "second") == [("a", 2)]


def test_a_failed_blocking_test_stops_what_reads_the_table(project):
    result = refresh(project, "SELECT NULL::VARCHAR AS trial_id, 1 AS n")
    assert not result.success
    assert set(materialized(result)) == {"first"}  # second read a table with a null key: not refreshed
    [evaluation, _] = result.get_asset_check_evaluations()
    assert (evaluation.asset_key.to_user_string(), evaluation.check_name, evaluation.passed) == (
        "first", "key_tests", False)
    assert evaluation.metadata["violations"].value == 1
    assert evaluation.metadata["failed_tests"].value == "trial_id_not_null"
    assert "| trial_id_not_null | trial_id is never null | 1 |" in evaluation.metadata["tests"].value
    [failure] = [event for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
    assert "second (after first: trial_id_not_null)" in failure.event_specific_data.error.to_string()


def test_a_failed_value_test_warns_and_blocks_nothing(project):
    result = refresh(project, "SELECT 'a' AS trial_id, -1 AS n")
    assert result.success and set(materialized(result)) == {"first", "second"}
    [values] = [evaluation for evaluation in result.get_asset_check_evaluations()
                if evaluation.check_name == "value_tests"]
    assert not values.passed and values.severity == dg.AssetCheckSeverity.WARN
    assert rows(project, "second") == [("a", -2)]


def test_a_subset_whose_input_was_never_built_builds_it_and_reports_the_selection_only(project):
    result = refresh(project, "SELECT 'a' AS trial_id, 1 AS n", selection=["second"])
    assert result.success and set(materialized(result)) == {"second"}
    assert rows(project, "second") == [("a", 2)]
