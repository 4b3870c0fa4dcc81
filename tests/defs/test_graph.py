"""The asset graph: lineage from scripts to marts, the DuckDB writers' pool, and checks from schema.yml."""

import re

import dagster as dg

from substrate_assets.definitions import defs

RAW = ("trial_manifests", "stats_history", "locust_stats", "request_samples", "cluster_facts", "server_telemetry",
       "load_steps")
MARTS = ("trials", "density_frontiers", "wake_latency_distribution", "wake_latency_histogram",
         "wake_latency_windows", "step_latency", "trial_summary", "load_points", "slo_capacity", "capacity_history")


def graph():
    return defs.resolve_asset_graph()


def test_lineage_from_scripts_to_marts():
    assets = graph()
    deps = {key.to_user_string(): {parent.to_user_string() for parent in assets.get(key).parent_keys}
            for key in assets.materializable_asset_keys}
    assert deps["trial_run"] == {"workload_script"}
    assert all(deps[raw] == {"trial_run"} for raw in RAW)
    assert deps["density_frontiers"] == {"trial_manifests", "stats_history", "locust_stats", "cluster_facts"}
    assert deps["trial_summary"] >= {"density_frontiers", "cluster_facts"}
    assert deps["load_points"] == {"load_steps", "trial_manifests", "stats_history", "request_samples",
                                   "cluster_facts"}
    assert deps["slo_capacity"] >= {"load_points", "trial_manifests"}
    assert "slo_capacity" in deps["capacity_history"]
    assert set(MARTS) <= set(deps)


def test_partitions_pools_and_automation():
    assets = graph()
    for name in RAW:
        node = assets.get(dg.AssetKey(name))
        assert node.partitions_def.name == "trial" and node.pools == {"duckdb"}
    for name in MARTS:
        node = assets.get(dg.AssetKey(name))
        assert node.partitions_def is None and node.pools == {"duckdb"}
        assert node.automation_condition is not None
    assert assets.get(dg.AssetKey("trial_run")).pools == {"trials"}  # one trial at a time; never the warehouse
    assert assets.get(dg.AssetKey("workload_script")).partitions_def.name == "script"


def test_schema_tests_are_asset_checks():
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph().asset_check_keys}
    assert {("trials", "key_tests"), ("density_frontiers", "value_tests"), ("trials", "value_tests"),
            ("workload_script", "script_is_valid"), ("trial_run", "trial_completed")} <= checks
    # Each model's tests are two checks: what they test is in the check's description.
    description = graph().get_check_spec(dg.AssetCheckKey(dg.AssetKey("trials"), "key_tests")).description
    assert "trial_id is never null" in description and "trial_id is unique" in description


def test_the_catalog_says_who_owns_what_each_asset_is_and_which_checks_block():
    assets = graph()
    for key in assets.materializable_asset_keys:
        node = assets.get(key)
        assert node.owners == ["team:substrate-bench"], key
        # A description is markdown in the UI: a placeholder such as <suite> outside code is eaten as an HTML tag.
        assert not re.search(r"<[A-Za-z/!]", re.sub(r"`[^`]*`", "", node.description)), (key, node.description)
    kinds = {name: assets.get(dg.AssetKey(name)).kinds for name in ("trial_run", "server_telemetry", "load_steps",
                                                                     "change_points", "trials")}
    assert kinds["trial_run"] >= {"kubernetes", "python", "locust"}
    assert "prometheus" in kinds["server_telemetry"] and "prometheus" in kinds["load_steps"]
    assert kinds["change_points"] == {"duckdb", "python"} and kinds["trials"] == {"duckdb", "sql"}
    blocking = {(key.asset_key.to_user_string(), key.name): assets.get_check_spec(key).blocking
                for key in assets.asset_check_keys}
    # The checks that guard correctness block what is built on a table; the others warn.
    assert blocking[("trials", "key_tests")] and not blocking[("trials", "value_tests")]
    assert blocking[("workload_script", "script_is_valid")]
    assert not blocking[("trial_run", "trial_completed")]
    assert not blocking[("trial_run", "no_regression_against_history")]


def test_every_table_declares_its_columns_described_before_anything_is_built():
    assets = graph()
    for name in (*RAW, *MARTS, "metric_history", "change_points"):
        node = assets.get(dg.AssetKey(name))
        schema = node.metadata["dagster/column_schema"]
        assert schema.columns and all(column.description for column in schema.columns), name
        assert node.metadata["dagster/table_name"] == f"warehouse.main.{name}"
    p50 = {column.name: column for column in assets.get(dg.AssetKey("wake_latency_distribution")).metadata[
        "dagster/column_schema"].columns}["p50_ms"]
    assert p50.type == "DOUBLE" and "p50" in p50.description.lower()
    for name in MARTS:
        assert assets.get(dg.AssetKey(name)).freshness_policy is not None, name


def test_run_trial_is_a_form_that_names_its_trial():
    job = defs.resolve_job_def("run_trial")
    trial = job.run_config_schema.config_type.fields["ops"].config_type.fields["trial"].config_type.fields["config"]
    fields = trial.config_type.fields
    optional = ("users", "duration", "think_scale", "inject_wake_delay_ms", "group", "knobs", "wait_at_most_s", "live")
    assert set(fields) == {"suite", *optional}
    assert fields["suite"].is_required and not any(fields[name].is_required for name in optional)
    assert all(field.description for field in fields.values())
    # The launchpad opens with a suite to edit; the job's description says what it does.
    assert job.run_config_schema.config_type.fields["ops"].default_value == {
        "trial": {"config": {"suite": "quick-smoke"}}}
    assert "names the trial's partition" in job.description
    assert not job.partitions_def  # no partition key to guess at launch
