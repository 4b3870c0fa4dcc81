"""Every load is recorded the same way: a raw asset in a run, an import and a rebuild give a (table, trial) partition
the same metadata, on a temporary Dagster instance and DuckDB file."""

from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.app.loads import rebuild_warehouse
from substrate_assets.defs.resources import RunStoreResource, SuitesResource
from substrate_assets.defs.warehouse.metadata import report_loads, trial_figures
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.importer import import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.preview import PREVIEW_ROWS
from substrate_assets.warehouse.raw_tables import RAW_TABLES
from substrate_assets.warehouse.trial_writes import load_trials

ROOT = Path(__file__).resolve().parents[2]
NEWEST = "glutton_baseline_5_users-20261120t000000z"


@pytest.fixture
def store(tmp_path) -> RunStore:
    store = RunStore(tmp_path / "store")
    import_runs(str(ROOT / "tests" / "data" / "upstream_runs"), store)
    return store


def metadata_of(instance: dg.DagsterInstance, table: str, trial_id: str) -> dict:
    [record] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[trial_id]), limit=1).records
    return {key: value.value for key, value in record.asset_materialization.metadata.items()}


def test_a_raw_asset_and_an_outside_load_record_the_same_metadata(store, tmp_path):
    in_run = dg.DagsterInstance.ephemeral()
    in_run.add_dynamic_partitions("trial", [NEWEST])
    result = dg.materialize(raw_assets, partition_key=NEWEST, instance=in_run, resources={
        "run_store": RunStoreResource(root=str(store.root)), "suites": SuitesResource(),
        "warehouse": WarehouseResource(database=str(tmp_path / "run.duckdb"))})
    assert result.success
    outside = dg.DagsterInstance.ephemeral()
    trial = TrialDirectory(store.find(NEWEST))
    with connect(tmp_path / "outside.duckdb") as connection:
        raw = load_trials(connection, [trial], preview_rows=PREVIEW_ROWS)
        figures = trial_figures(connection, [NEWEST])
    assert report_loads(outside, [trial], raw, [], figures=figures) == len(RAW_TABLES)
    for table in raw:
        recorded, reported = metadata_of(in_run, table, NEWEST), metadata_of(outside, table, NEWEST)
        assert set(recorded) == set(reported) >= {"dagster/row_count", "dagster/column_schema", "trial_dir", "preview"}
        assert recorded["dagster/row_count"] == reported["dagster/row_count"]
        assert recorded["dagster/column_schema"] == reported["dagster/column_schema"]
        assert recorded["preview"] == reported["preview"]
    # The trial's densities ride on its one manifest row, as floats Dagster's Plots chart across trials.
    # Each under a key of the trial's suite: a chart never mixes suites.
    suite = "glutton_baseline_5_users"
    assert {f"{suite}/{name}" for name in ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram")} <= set(
        metadata_of(in_run, "trial_manifests", NEWEST))
    assert metadata_of(outside, "locust_stats", NEWEST)["dagster/row_count"] == 5


def test_a_rebuild_records_new_partitions_models_and_tests_only_once(store, tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    rebuilt = rebuild_warehouse(store, tmp_path / "w.duckdb", instance)
    assert len(rebuilt.trials) == 2 and set(instance.get_dynamic_partitions("trial")) == \
        {trial.trial_id for trial in rebuilt.trials}
    assert instance.get_materialized_partitions(dg.AssetKey("request_samples")) == set(instance.get_dynamic_partitions(
        "trial"))
    assert instance.get_latest_materialization_event(dg.AssetKey("density_frontiers")) is not None
    evaluations = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trials"), "key_tests"), limit=5)
    assert len(evaluations) == 1
    assert len(instance.fetch_materializations(dg.AssetKey("request_samples"), limit=10).records) == 2
    rebuild_warehouse(store, tmp_path / "w.duckdb", instance)  # the same trials again: nothing new to record
    assert len(instance.fetch_materializations(dg.AssetKey("request_samples"), limit=10).records) == 2
    assert len(instance.fetch_materializations(dg.AssetKey("density_frontiers"), limit=10).records) == 2


def test_a_raw_asset_over_an_unreadable_trial_fails_in_one_line_and_writes_nothing(store, tmp_path):
    with (store.find(NEWEST) / "stats.jsonl").open("a") as stats:
        stats.write("{not json\n")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("trial", [NEWEST])
    warehouse = tmp_path / "run.duckdb"
    result = dg.materialize(raw_assets, partition_key=NEWEST, instance=instance, raise_on_error=False, resources={
        "run_store": RunStoreResource(root=str(store.root)), "suites": SuitesResource(),
        "warehouse": WarehouseResource(database=str(warehouse))})
    assert not result.success
    failed = {event.step_key: event.step_failure_data for event in result.all_events if event.is_step_failure}
    assert set(failed) == {"load_trial"}  # one step loads every raw table of the trial
    line = failed["load_trial"].user_failure_data.description
    assert line.startswith(f"trial {NEWEST} does not load: stats.jsonl:7: not JSON: ") and "\n" not in line
    with connect(warehouse) as connection:  # not even the tables stats.jsonl does not feed
        present = {row[0] for row in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in present & set(RAW_TABLES):
            assert connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_a_cluster_trial_missing_from_the_local_store_is_mirrored_from_its_suites_run_store(tmp_path):
    """A run pod's local store starts empty: load_trial mirrors a kubernetes suite's trial from the object-store run
    store the suite names (a file:// URL here, the same fsspec path as gs://), then loads it."""
    import numpy as np

    from tests.support.synthetic_trials import write_trial

    remote = RunStore(tmp_path / "bucket")
    trial_id = write_trial(remote, "coding-session-cluster", 1_795_000_000, {"WakeFirstTouch": np.full(50, 80.0)},
                           tag="main")
    suites = tmp_path / "suites.yaml"
    suites.write_text((ROOT / "deploy" / "suites.cluster.yaml").read_text().replace(
        "gs://BUCKET/substrate-bench", f"file://{remote.root}"))
    local = RunStore(tmp_path / "pod-store")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("trial", [trial_id])
    result = dg.materialize(raw_assets, partition_key=trial_id, instance=instance, resources={
        "run_store": RunStoreResource(root=str(local.root)), "suites": SuitesResource(path=str(suites)),
        "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb"))})
    assert result.success
    assert local.find(trial_id).is_dir()
    with connect(tmp_path / "w.duckdb") as connection:
        assert connection.execute("SELECT count(*) FROM request_samples WHERE trial_id = ?", [trial_id]).fetchone() \
            == (50,)
    # A trial of no kubernetes suite, missing locally, is still refused by name.
    instance.add_dynamic_partitions("trial", ["quick-smoke-20000101t000000z"])
    missing = dg.materialize(raw_assets, partition_key="quick-smoke-20000101t000000z", instance=instance,
                             raise_on_error=False, resources={
                                 "run_store": RunStoreResource(root=str(local.root)), "suites": SuitesResource(),
                                 "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb"))})
    assert not missing.success
