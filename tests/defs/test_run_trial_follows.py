"""run_trial launched with run config through the Dagster API, as the UI's launchpad and the script sensor launch it:
it names its trial, and the raw tables, the marts and the comparison with the previous trial follow on their own,
driven by their automation conditions tick by tick (as the daemon's warehouse_refresh sensor would), on a real
instance, store and DuckDB file of a project of its own."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITES = """\
suites:
  - {name: smoke, script: quick-session, users: 2, spawn_rate: 2, duration: 30s, think_scale: 0.2, workers: 4}
"""
# In a process of its own: the definitions read the project's paths when they load.
PROGRAM = """
import json
import dagster as dg
from dagster._core.definitions.partitions.context import partition_loading_context
from substrate_assets.definitions import defs
from substrate_assets.defs.trials.jobs import TRIAL_TAG, TrialConfig, run_config

instance = dg.DagsterInstance.get()
graph = defs.resolve_asset_graph()
ticks = []


def tick(cursor):
    evaluation = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    # What the sensor would launch, one run per partition (and one for the unpartitioned marts).
    by_partition = {}
    # Dagster's tester lists requested asset partitions only; a check's need its partitions' loading context.
    with partition_loading_context(new_ctx=evaluation._partition_loading_context):
        for result in evaluation.results:
            subset = result.true_subset
            partitions = subset.expensively_compute_partition_keys() if subset.is_partitioned else [None]
            for partition in partitions if subset.size else ():
                by_partition.setdefault(partition, []).append(result.key)
    requested = []
    for partition, keys in by_partition.items():
        assets = [key for key in keys if isinstance(key, dg.AssetKey)]
        checks = [key for key in keys if isinstance(key, dg.AssetCheckKey)]
        requested.append([partition, *sorted([key.to_user_string() for key in assets] + [key.name for key in checks])])
        # A run of the implicit asset job over the selection, tagged with the partition, as the daemon launches it.
        # (Dagster runs the checks that execute with an asset along with it.)
        checks += [check for asset in assets for check in graph.get(asset).check_keys]
        subset = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection=set(assets), asset_check_selection=set(checks))
        result = subset.execute_in_process(instance=instance, tags={"dagster/partition": partition} if partition
                                           else None)
        assert result.success, (partition, keys)
    ticks.append(requested)
    return evaluation.cursor


cursor = tick(None)  # the sensor's first tick, before any trial
trials = []
for users in (2, 1):
    launched = defs.resolve_job_def("run_trial").execute_in_process(
        run_config=run_config(TrialConfig(suite="smoke", users=users, duration="6s")), instance=instance)
    trials.append(instance.get_run_by_id(launched.run_id).tags[TRIAL_TAG])
    for _ in range(5):
        cursor = tick(cursor)
print(json.dumps({"trials": trials, "ticks": ticks}))
"""


def test_a_trial_launched_with_run_config_is_followed_by_the_raw_tables_marts_and_comparison(tmp_path):
    import dagster as dg

    project = tmp_path / "project"
    shutil.copytree(ROOT / "scripts", project / "scripts")
    shutil.copytree(ROOT / "dbt_like_sql", project / "dbt_like_sql")
    (project / "suites.yaml").write_text(SUITES)
    env = {key: value for key, value in os.environ.items()
           if key not in ("SUBSTRATE_BENCH_STORE", "SUBSTRATE_BENCH_WAREHOUSE")}
    env.update(SUBSTRATE_BENCH_ROOT=str(project), DAGSTER_HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    first, second = outcome["trials"]
    assert first.startswith("smoke-") and second.startswith("smoke-") and first != second
    # Tick by tick after each trial: its raw tables (one step), the marts, then its comparison; then nothing.
    raw = sorted(["cluster_facts", "load_steps", "locust_stats", "request_samples", "server_telemetry",
                  "stats_history", "trial_manifests"])
    launched = [runs for runs in outcome["ticks"][1:]]
    for trial, ticks in ((first, launched[:5]), (second, launched[5:])):
        assert [[run[0] for run in runs] for runs in ticks] == [[trial], [None], [trial], [], []]
        assert ticks[0][0][1:] == raw and "capacity_history" in ticks[1][0]
        assert ticks[2][0][1:] == ["no_regression_against_previous_trial"]

    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    assert set(instance.get_dynamic_partitions("trial")) == {first, second}
    for trial in (first, second):
        assert trial in instance.get_materialized_partitions(dg.AssetKey("trial_run"))
        assert trial in instance.get_materialized_partitions(dg.AssetKey("request_samples"))
    capacity = instance.fetch_materializations(dg.AssetKey("capacity_history"), limit=1).records[0]
    trial_run = instance.fetch_materializations(dg.AssetKey("trial_run"), limit=1).records[0]
    assert capacity.storage_id > trial_run.storage_id  # the marts were rebuilt after the second trial landed
    compared = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trial_run"), "no_regression_against_previous_trial"), limit=5)
    assert sorted(check.partition for check in compared) == sorted([first, second])  # each once
