"""script_change_sensor: a changed script starts each suite's trials that uses it (its repeat, one group); an invalid
one starts nothing and says why."""

import json
import shutil
from pathlib import Path

import dagster as dg

from substrate_assets.definitions import defs
from substrate_assets.defs.resources import (
    DeploymentResource,
    RunStoreResource,
    ScriptLibraryResource,
    SuitesResource,
)
from substrate_assets.defs.scripts.jobs import validate_script_job
from substrate_assets.defs.trials.jobs import run_trial_job
from substrate_assets.defs.trials.sensors import script_change_sensor

ROOT = Path(__file__).resolve().parents[2]
SUITES = """\
suites:
  - {name: smoke-a, script: quick-session, users: 1, repeat: 1}
  - {name: smoke-b, script: quick-session, users: 2, repeat: 2}
  - {name: coding, script: coding-session, users: 1, repeat: 1}
"""


def tick(tmp_path: Path, cursor: str | None):
    context = dg.build_sensor_context(cursor=cursor, instance=dg.DagsterInstance.ephemeral(), resources={
        "script_library": ScriptLibraryResource(directory=str(tmp_path / "scripts")),
        "suites": SuitesResource(path=str(tmp_path / "suites.yaml")),
        "run_store": RunStoreResource(root=str(tmp_path / "store")),
        "deployment": DeploymentResource(),  # SUBSTRATE_BENCH_DEPLOYMENT as this tick sees it
    })
    return script_change_sensor(context)


def suite_of(request: dg.RunRequest) -> str:
    return request.run_config["ops"]["trial"]["config"]["suite"]


def setup(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "suites.yaml").write_text(SUITES)


def test_the_sensor_runs_by_default_and_targets_the_two_jobs():
    assert script_change_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert {job.name for job in script_change_sensor.jobs} == {validate_script_job.name, run_trial_job.name}
    assert defs.resolve_sensor_def("warehouse_refresh").default_status == dg.DefaultSensorStatus.RUNNING


def test_first_tick_records_a_baseline_and_starts_nothing(tmp_path):
    setup(tmp_path)
    result = tick(tmp_path, None)
    assert result.run_requests == [] or result.run_requests is None
    assert "baseline" in result.skip_reason.skip_message
    assert set(json.loads(result.cursor)) == {"coding-session", "quick-session"}


def test_an_edited_think_time_starts_each_suites_trials_using_the_script(tmp_path):
    setup(tmp_path)
    baseline = tick(tmp_path, None).cursor
    unchanged = tick(tmp_path, baseline)
    assert unchanged.skip_reason.skip_message == "no script changed"
    path = tmp_path / "scripts" / "quick-session.yaml"
    path.write_text(path.read_text().replace("think: 700ms", "think: 900ms"))
    result = tick(tmp_path, baseline)
    trials = [r for r in result.run_requests if r.job_name == run_trial_job.name]
    scripts = [r for r in result.run_requests if r.job_name == validate_script_job.name]
    assert sorted(suite_of(r) for r in trials) == ["smoke-a", "smoke-b", "smoke-b"]  # not "coding"
    sha = json.loads(result.cursor)["quick-session"]
    assert sha != json.loads(baseline)["quick-session"]
    # Each run names its trial's partition when it starts; the request carries the suite as run config. smoke-b's
    # repeat of 2 is one group of two trials.
    assert all(r.partition_key is None for r in trials)
    assert sorted(r.run_key for r in trials) == [f"smoke-a:quick-session:{sha}", f"smoke-b:quick-session:{sha}:1",
                                                 f"smoke-b:quick-session:{sha}:2"]
    groups = [r.run_config["ops"]["trial"]["config"].get("group") for r in trials]
    assert groups[0] is None and groups[1] == groups[2] and groups[1].startswith("smoke-b-")
    assert groups[1].endswith("-x2") and trials[1].tags["substrate/group"] == groups[1]
    assert [r.partition_key for r in scripts] == ["quick-session"]
    added = {request.partitions_def_name: request.partition_keys for request in result.dynamic_partitions_requests}
    assert added == {"script": ["quick-session"]}
    # The next tick, from the new cursor, starts nothing more.
    assert tick(tmp_path, result.cursor).skip_reason.skip_message == "no script changed"


def test_an_invalid_script_starts_nothing_and_says_why(tmp_path):
    setup(tmp_path)
    baseline = tick(tmp_path, None).cursor
    path = tmp_path / "scripts" / "quick-session.yaml"
    path.write_text(path.read_text().replace("think: 700ms", "think: 7d"))
    result = tick(tmp_path, baseline)
    assert not result.run_requests
    message = result.skip_reason.skip_message
    assert "invalid script" in message and 'unknown unit "d"' in message and "quick-session.yaml:" in message
    assert json.loads(result.cursor)["quick-session"] == json.loads(baseline)["quick-session"]
    path.write_text(path.read_text().replace("think: 7d", "think: 800ms"))
    assert len(tick(tmp_path, result.cursor).run_requests) == 4  # fixed: the script run and three trials


def test_a_new_script_counts_as_changed(tmp_path):
    setup(tmp_path)
    baseline = tick(tmp_path, None).cursor
    text = (tmp_path / "scripts" / "quick-session.yaml").read_text().replace("name: quick-session", "name: extra")
    (tmp_path / "scripts" / "extra.yaml").write_text(text)
    result = tick(tmp_path, baseline)
    assert [r.partition_key for r in result.run_requests] == ["extra"]  # no suite uses it yet


def test_a_cluster_deployment_starts_only_kubernetes_suites(tmp_path, monkeypatch):
    setup(tmp_path)
    with (tmp_path / "suites.yaml").open("a") as suites:
        suites.write("  - {name: smoke-pods, script: quick-session, users: 4, repeat: 1, backend: kubernetes, "
                     "kubernetes: {image: r/substrate-bench:1, store: gs://b/p}}\n")
    baseline = tick(tmp_path, None).cursor
    path = tmp_path / "scripts" / "quick-session.yaml"
    path.write_text(path.read_text().replace("think: 700ms", "think: 900ms"))
    monkeypatch.setenv("SUBSTRATE_BENCH_DEPLOYMENT", "cluster")
    trials = [r for r in tick(tmp_path, baseline).run_requests if r.job_name == run_trial_job.name]
    assert [suite_of(r) for r in trials] == ["smoke-pods"]
    monkeypatch.setenv("SUBSTRATE_BENCH_DEPLOYMENT", "workstation")
    trials = [r for r in tick(tmp_path, baseline).run_requests if r.job_name == run_trial_job.name]
    assert sorted(suite_of(r) for r in trials) == ["smoke-a", "smoke-b", "smoke-b", "smoke-pods"]
