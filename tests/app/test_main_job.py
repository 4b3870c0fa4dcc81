"""The main job through the command line, in a project of its own: run, run again as a group of two repeated
trials, SQL across runs, reload without duplicates, and a rebuild that gives back the same marts."""

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from substrate_assets.app.pipes_trial import STARTED_AHEAD
from tests.support.projects import SMOKE_SUITES, make_project, project_env

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")
MARTS = ("trials", "density_frontiers", "wake_latency_distribution", "wake_latency_histogram",
         "wake_latency_windows", "step_latency", "trial_summary")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("project"), SMOKE_SUITES)


def cli(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=project_env(project),
                          cwd=project)


def sql(project: Path, statement: str) -> list[dict]:
    """Rows of the project's warehouse, read in-process and read-only (the `sql` command itself is tested below,
    and starting it per check would cost seconds each)."""
    with duckdb.connect(str(project / "warehouse.duckdb"), read_only=True) as connection:
        cursor = connection.execute(statement)
        columns = [description[0] for description in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def marts(project: Path) -> dict[str, list[dict]]:
    return {table: sql(project, f"SELECT * FROM {table} ORDER BY ALL") for table in MARTS}


@pytest.fixture(scope="module")
def two_runs(project):
    """One trial (the suite's repeat), then a group of two."""
    first = cli(project, "run", "smoke")
    second = cli(project, "run", "smoke", "--repeat", "2")
    return first, second


def test_run_prints_the_trials_frontier_and_wake_latency(two_runs, project):
    first, _ = two_runs
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "density_frontiers (smoke-" in first.stdout and "wake_latency_distribution (smoke-" in first.stdout
    assert "actors_per_node" in first.stdout and "p99_ms" in first.stdout
    # The successful wakes' twins (ok_*) are printed only when a wake failed.
    failed = sql(project, "select n_failed from wake_latency_distribution")[0]["n_failed"]
    assert ("ok_p99_ms" in first.stdout) == (failed > 0)
    [insight] = [line for line in first.stdout.splitlines() if line.startswith("time to insight: ")]
    seconds = float(insight.split()[3])  # the figure, whatever the machine made of it: a test times nothing
    assert seconds > 0 and "rows in every mart +" in insight and "recorded in Dagster +" in insight, insight
    assert "Warning" not in first.stderr, first.stderr[-3000:]  # nothing that does not mean something to the user
    assert (project / ".dagster_home" / "dagster.yaml").read_text().count("default_limit: 1") == 1
    assert (project / "warehouse.duckdb").is_file()


def test_a_second_run_adds_a_group_judged_against_the_first(two_runs, project):
    first, second = two_runs
    assert second.returncode == 0, second.stderr[-3000:]
    # The script and the code that validates it are as the first run left them: one validation run in all.
    assert "script quick-session: valid, unchanged since run " in second.stdout
    assert "not validated again" not in first.stdout
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(project / ".dagster_home"))
    assert len(instance.fetch_materializations(dg.AssetKey("workload_script"), limit=5).records) == 1
    rows = sql(project, "select trial_id, p50_ms, p99_ms from wake_latency_distribution")
    assert len(rows) == 3 and len({row["trial_id"] for row in rows}) == 3
    assert all(row["p50_ms"] is not None and row["p50_ms"] <= row["p99_ms"] for row in rows)
    trials = sql(project, "select trial_id, status, backend from trials")
    assert [(t["status"], t["backend"]) for t in trials] == [("completed", "local")] * 3
    groups = sql(project, "select group_id, list(trial_id order by trial_id) as trials from trial_manifests "
                          "group by all order by group_id nulls first")
    first_id = min(row["trial_id"] for row in rows)
    assert groups[0] == {"group_id": None, "trials": [first_id]}
    group = groups[1]["group_id"]
    assert group.startswith("smoke-") and group.endswith("-x2") and len(groups[1]["trials"]) == 2
    assert "verdict: none yet, no earlier trial of this suite and configuration" in first.stdout
    assert f"group {group}: " in second.stdout
    # One earlier trial of a few seconds: its latency percentiles have too few samples to judge, and nothing is
    # called regressed.
    assert "verdict against history: 1 trial of suite smoke's configuration" in second.stdout
    verdict = [line for line in second.stdout.splitlines() if "regress" in line.lower() or "│" in line]
    assert "No figure regressed" in second.stdout and "Regressed:" not in second.stdout, "\n".join(verdict)
    # Where the group's seconds went outside its two loads: the parts, each to 0.1 s, make up the whole.
    [dead] = [line for line in second.stdout.splitlines() if line.startswith("dead time: ")]
    total, load = float(dead.split()[2]), float(dead.split()[5])
    parts = {name: float(seconds.removesuffix(" s")) for name, seconds in
             (part.rsplit(" ", 2)[0:2] for part in dead.split("): ", 1)[1].split(", "))}
    assert load > 0 and {"start", "trial start", "landing", "raw tables", "raw tables and marts", "records", "site",
                         "verdict", "end"} <= set(parts), dead
    # Each part is printed to 0.1 s and one under 0.05 s not at all: at most 0.05 s off for each of the dozen.
    assert total == pytest.approx(sum(parts.values()), abs=0.6), dead


def test_csv_and_table_output(two_runs, project):
    done = cli(project, "sql", "select count(*) as n from trials", "--format", "csv")
    assert done.stdout == "n\n3\n"
    done = cli(project, "sql", "select count(*) as n from trials", "--format", "json")
    assert json.loads(done.stdout) == [{"n": 3}]
    assert "3" in cli(project, "sql", "select count(*) as n from trials").stdout
    bad = cli(project, "sql", "select * from no_such_table")
    assert bad.returncode != 0 and "no_such_table" in bad.stderr


def test_materialize_reloads_without_duplicates(two_runs, project):
    trial_id = sql(project, "select min(trial_id) as t from trials")[0]["t"]
    before = sql(project, "select count(*) as n from request_samples")[0]["n"]
    done = cli(project, "materialize", trial_id)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"trial {trial_id} reloaded" in done.stdout
    assert "verdict: none yet, no earlier trial of this suite and configuration" in done.stdout  # the first trial
    assert sql(project, "select count(*) as n from request_samples")[0]["n"] == before
    for table in ("trial_manifests", "cluster_facts", "server_telemetry", "trials", "density_frontiers"):
        assert sql(project, f"select count(*) as n, count(distinct trial_id) as d from {table}")[0] == \
            {"n": 3, "d": 3}
    assert cli(project, "materialize", "smoke-20000101t000000z").returncode == 2


def test_rebuild_from_the_run_store_gives_the_same_marts(two_runs, project):
    before = marts(project)
    (project / "warehouse.duckdb").unlink()
    done = cli(project, "rebuild")
    assert done.returncode == 0, done.stderr
    assert "from 3 trials" in done.stdout
    assert marts(project) == before


def test_the_instance_holds_the_lineage_and_the_pipes_metadata(two_runs, project):
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(project / ".dagster_home"))
    trial_ids = set(instance.get_dynamic_partitions("trial"))
    assert len(trial_ids) == 3
    records = instance.fetch_materializations(dg.AssetKey("trial_run"), limit=10).records
    assert {record.partition_key for record in records} == trial_ids
    metadata = records[0].asset_materialization.metadata
    # A figure charted across trials is keyed by its suite: a chart never mixes suites.
    assert metadata["completed"].value is True and metadata["smoke/wake_p50_ms"].value > 0
    assert "wake_p50_ms" not in metadata
    assert metadata["trial_dir"].value.startswith(str(project / "store" / "runs" / "smoke"))
    # How busy the machine was with other work, as measured; this suite judges no disturbance (it runs beside the
    # rest of the test suite), so no verdict of it is recorded.
    assert 0 <= metadata["smoke/steal_share"].value < 1 and metadata["smoke/cpu_pressure"].value > 0
    assert "smoke/foreign_cpu_share" in metadata and "disturbed" not in metadata
    for key in ("request_samples", "density_frontiers", "wake_latency_distribution"):
        latest = instance.fetch_materializations(dg.AssetKey(key), limit=1).records[0]
        assert latest.asset_materialization.metadata["dagster/row_count"].value >= 1
    checks = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trial_run"), "trial_completed"), limit=5)
    assert len(checks) == 3
    # Every trial's Pipes child was started ahead of its run (the first while the script was validated, the next
    # while the trial before loaded), and its run's log says so.
    trial_runs = instance.get_runs(dg.RunsFilter(job_name="run_trial"))
    assert len(trial_runs) == 3
    for run in trial_runs:
        said = [entry.user_message for entry in instance.all_logs(run.run_id)]
        assert any(STARTED_AHEAD in message for message in said), said
    compared = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trial_run"), "no_regression_against_history"), limit=5)
    # A trial of its own and a group's last were judged when they loaded (the group's earlier trial is judged with
    # its group); the reload of materialize judged its trial again.
    group = sorted(trial_ids)[1:]
    assert len(compared) == 3 and {check.partition for check in compared} == trial_ids - {group[0]}
    # The group's earlier trial loaded its raw tables only; the marts were refreshed once per run (with a group's
    # last trial), once by the reload of materialize and recorded once by the rebuild.
    refreshed = instance.fetch_materializations(dg.AssetKey("density_frontiers"), limit=10).records
    assert {record.partition_key for record in refreshed} == {None} and len(refreshed) == 2 + 1 + 1
    raw = instance.fetch_materializations(dg.AssetKey("request_samples"), limit=10).records
    assert sorted(record.partition_key for record in raw) == sorted([*trial_ids, min(trial_ids)])
    # Every trial of a job is loaded outside a run (the group's earlier one its raw tables only, the last whole) and
    # recorded as a load run would have recorded it; the reload of materialize is a run.
    [earlier] = [record for record in raw if record.partition_key == group[0]]
    [last] = [record for record in raw if record.partition_key == group[1]]
    [reloaded, _loaded] = [record for record in raw if record.partition_key == min(trial_ids)]
    assert not earlier.run_id and not last.run_id and reloaded.run_id
    assert set(earlier.asset_materialization.metadata) == set(last.asset_materialization.metadata) == set(
        reloaded.asset_materialization.metadata)
    # The marts as the marts step records them: the change points' table beside its rows, the histories drawn after.
    marts = instance.fetch_materializations(dg.AssetKey("change_points"), limit=10).records
    whole = [record for record in marts if not record.run_id and "committed_at" in record.asset_materialization.metadata]
    assert len(whole) == 2 and all({"change_points", "dagster/row_count"} <= set(record.asset_materialization.metadata)
                                   for record in whole)
    [drawn] = instance.fetch_observations(dg.AssetKey("change_points"), limit=1).records
    assert any(key.startswith("history/") for key in drawn.asset_observation.metadata)
    assert earlier.asset_materialization.metadata["dagster/row_count"].value >= 1
