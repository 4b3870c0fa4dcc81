"""Importing upstream runs: copied unchanged (from a directory or an fsspec object store), loaded into the same
tables, and the newest schema's trial_summary numbers reproduced by density_frontiers."""

import json
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from substrate_assets.results.importer import import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.readers import read_stats_jsonl
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.marts import build_all
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.projects import make_project, project_env

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "upstream_runs"
NEWEST = "glutton_baseline_5_users-20261120t000000z"
OLDEST = "glutton_baseline_1_user-20260502t080000z"
RECORDED = ROOT / "tests" / "data" / "upstream_runs_newest"  # runs with their logs.txt
THREE_PER_USER = "glutton_actors_per_user_3-20261121t000000z"
NO_HISTORY = "glutton_no_stats_history-20261122t000000z"
FLAT_SERVER_SUMMARY = "glutton_flat_server_summary-20261123t000000z"
FIGURES = ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50", "actors_per_pod_p90",
           "actors_per_pod_p99", "aggregate_failure_ratio")


def fetch(connection, sql: str, parameters=None) -> list[dict]:
    cursor = connection.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_runs_are_copied_unchanged_and_once(tmp_path):
    store = RunStore(tmp_path / "store")
    runs = import_runs(str(UPSTREAM), store)
    assert [run.trial_id for run in runs] == [OLDEST, NEWEST]
    assert all(run.copied for run in runs)
    for run in runs:
        for source in Path(run.source).iterdir():
            assert (run.trial_dir / source.name).read_bytes() == source.read_bytes()
    assert not any(run.copied for run in import_runs(str(UPSTREAM), store))
    assert not list((tmp_path / "store" / ".staging").iterdir())


def test_runs_import_from_an_object_store(tmp_path):
    memory = fsspec.filesystem("memory")
    for path in UPSTREAM.rglob("*"):
        if path.is_file() and path.name != "README.md":
            memory.pipe_file(f"/bucket/prefix/{path.relative_to(UPSTREAM).as_posix()}", path.read_bytes())
    runs = import_runs("memory://bucket/prefix", RunStore(tmp_path / "store"))
    assert [run.trial_id for run in runs] == [OLDEST, NEWEST]
    assert (runs[1].trial_dir / "server_summary.json").is_file()


def imported_warehouse(tmp: Path, root: Path):
    """The runs under ``root`` imported into a store in ``tmp``, loaded and modelled: the connection, the runs by
    trial id, and the models."""
    runs = import_runs(str(root), RunStore(tmp / "store"))
    with connect(tmp / "w.duckdb") as connection:
        load_trials(connection, [TrialDirectory(run.trial_dir) for run in runs])
        models = discover(ROOT / "dbt_like_sql")
        build_all(connection, models)
        yield connection, {run.trial_id: run for run in runs}, models


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    for connection, runs, _models in imported_warehouse(tmp_path_factory.mktemp("import"), UPSTREAM):
        yield connection, runs


def test_density_frontiers_match_the_runs_own_trial_summary(loaded):
    connection, runs = loaded
    [summary] = [row["measurements"] for row in read_stats_jsonl(runs[NEWEST].trial_dir / "stats.jsonl")
                 if row["metric"] == "trial_summary"]
    [frontier] = fetch(connection, "SELECT * FROM density_frontiers WHERE trial_id = ?", [NEWEST])
    for key in ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50",
                "actors_per_pod_p90", "actors_per_pod_p99", "aggregate_failure_ratio"):
        assert frontier[key] == float(summary[key]), key
    [trial_summary] = fetch(connection, "SELECT * FROM trial_summary WHERE trial_id = ?", [NEWEST])
    assert trial_summary["multi_actor_worker"] is (summary["multi_actor_worker"] == "true")
    ratios = dict(trial_summary["operation_failure_ratios"])
    assert {key: ratios[key] for key in ("resume_actor_failure_ratio", "create_actor_failure_ratio")} == \
        {"resume_actor_failure_ratio": 0.005, "create_actor_failure_ratio": 0.0}


def test_runs_without_their_records_keep_their_figures_and_no_defaults(loaded):
    connection, _ = loaded
    manifests = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM trial_manifests")}
    # Neither run kept a log: nothing says -u or --actors-per-user, so neither is assumed.
    assert all((manifests[run]["users"], manifests[run]["actors_per_user"]) == (None, None) for run in (NEWEST, OLDEST))
    rows = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM density_frontiers")}
    for run in (NEWEST, OLDEST):
        assert (rows[run]["figures_from"], rows[run]["frontier_mismatch"]) == ("trial_summary", False)
        assert rows[run]["recomputed_actors_per_node"] is None  # not recomputable without actors per user
    assert rows[OLDEST]["actors_per_pod_p50"] == 1.0  # the oldest schema's ap_ratio_p50


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    yield from imported_warehouse(tmp_path_factory.mktemp("recorded"), RECORDED)


def reported(run) -> dict:
    [summary] = [row["measurements"] for row in read_stats_jsonl(run.trial_dir / "stats.jsonl")
                 if row["metric"] == "trial_summary"]
    return {key: None if summary[key] is None else float(summary[key]) for key in FIGURES}


def test_a_run_with_several_actors_per_user_keeps_its_own_numbers(recorded):
    connection, runs, _ = recorded
    [frontier] = fetch(connection, "SELECT * FROM density_frontiers WHERE trial_id = ?", [THREE_PER_USER])
    assert {key: frontier[key] for key in FIGURES} == reported(runs[THREE_PER_USER])
    assert (frontier["actors_per_node"], frontier["actors_per_vcpu"], frontier["actors_per_gb_ram"],
            frontier["actors_per_pod_p50"]) == (30.0, 7.65, 2.31, 6.0)  # 10 users × 3 actors, not 10
    # Recomputed from the run's own records (-u 10, --actors-per-user 3 in its log), the figures agree.
    assert {key: frontier[f"recomputed_{key}"] for key in FIGURES} == reported(runs[THREE_PER_USER])
    assert (frontier["figures_from"], frontier["frontier_mismatch"]) == ("trial_summary", False)
    [manifest] = fetch(connection, "SELECT users, actors_per_user, metadata FROM trial_manifests WHERE trial_id = ?",
                       [THREE_PER_USER])
    assert (manifest["users"], manifest["actors_per_user"]) == (10, 3)
    assert json.loads(manifest["metadata"]) == {"cluster_name": "bench-c3", "nodes": "1"}


def test_a_run_without_stats_history_falls_back_to_its_users(recorded):
    connection, runs, _ = recorded
    [frontier] = fetch(connection, "SELECT * FROM density_frontiers WHERE trial_id = ?", [NO_HISTORY])
    assert (frontier["peak_users"], frontier["actors_per_node"], frontier["actors_per_vcpu"],
            frontier["actors_per_gb_ram"], frontier["actors_per_pod_p50"]) == (10.0, 10.0, 2.55, 0.77, None)
    assert {key: frontier[f"recomputed_{key}"] for key in FIGURES} == reported(runs[NO_HISTORY])
    assert frontier["frontier_mismatch"] is False
    [summary] = fetch(connection, "SELECT multi_actor_worker FROM trial_summary WHERE trial_id = ?", [NO_HISTORY])
    assert summary["multi_actor_worker"] is None


def test_a_flat_server_summary_row_fills_server_telemetry(recorded):
    connection, _, _ = recorded
    [telemetry] = fetch(connection, "SELECT * FROM server_telemetry WHERE trial_id = ?", [FLAT_SERVER_SUMMARY])
    assert (telemetry["cluster_packing_p50"], telemetry["psi_cpu_stall_p95"], telemetry["restore_p99_s"],
            telemetry["checkpoints_in_window"], telemetry["checkpoint_mb_s"]) == (0.4, 4.2, 0.79, 597, 512.25)
    assert telemetry["psi_mem_stall_p50"] is None


def test_the_recorded_runs_pass_every_column_test(recorded):
    connection, _, _ = recorded
    tests = load_tests(ROOT / "dbt_like_sql" / "schema.yml", set(every_model(ROOT / "dbt_like_sql")))
    failed = [outcome for model_tests in tests.values() for test in model_tests
              if not (outcome := run_test(connection, test)).passed]
    assert failed == []


def test_imported_trials_sit_beside_native_ones(loaded):
    connection, _ = loaded
    trials = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM trials")}
    # Locust exited 1: it saw failed requests, and ran to its end; the failures are counted apart.
    assert trials[NEWEST]["backend"] == "import" and trials[NEWEST]["status"] == "completed"
    assert trials[NEWEST]["failed_requests"] == 3 and trials[NEWEST]["locust_exit_code"] == 1
    assert trials[NEWEST]["suite"] == "glutton_baseline_5_users" and len(trials[NEWEST]["tag"]) == 40
    assert trials[NEWEST]["sut_version"] == trials[NEWEST]["tag"]  # upstream tags a run with the commit under test
    assert trials[NEWEST]["started_at"].timestamp() == 1795132800
    facts = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM cluster_facts")}
    assert (facts[NEWEST]["machine_type"], facts[NEWEST]["worker_pod_count"], facts[NEWEST]["allocatable_cores"]) \
        == ("c3-standard-4", 5, 3.92)
    # The oldest schema nests five facts, native numbers, under raw_configuration.
    assert (facts[OLDEST]["node_count"], facts[OLDEST]["allocatable_ram_gb"], facts[OLDEST]["gke_version"]) == \
        (3, 87.1, None)
    telemetry = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM server_telemetry")}
    assert telemetry[NEWEST]["cluster_packing_p50"] == 0.4 and telemetry[NEWEST]["checkpoints_in_window"] == 597
    assert telemetry[NEWEST]["psi_mem_stall_p50"] is None
    assert all(value is None for key, value in telemetry[OLDEST].items() if key != "trial_id")
    wakes = fetch(connection, "SELECT count(*) AS n FROM request_samples")
    assert wakes == [{"n": 0}]  # upstream runs have no request log; their stats are in locust_stats
    assert fetch(connection, "SELECT count(*) AS n FROM locust_stats")[0]["n"] == 10


def test_an_imported_run_is_one_load_point_over_its_steady_window(loaded):
    connection, _ = loaded
    points = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM load_points")}
    telemetry = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM server_telemetry")}
    assert set(points) == {NEWEST, OLDEST}
    newest = points[NEWEST]
    # The window its server_summary.json was measured over; its telemetry is that of the whole trial.
    assert (newest["step"], newest["points"], newest["window_start_ts"], newest["window_end_ts"]) == \
        (1, 1, 1795132805, 1795132810)
    assert {key: newest[key] for key in ("cluster_packing_p50", "checkpoints_in_window")} == \
        {key: telemetry[NEWEST][key] for key in ("cluster_packing_p50", "checkpoints_in_window")}
    # No request log: no wake was measured (null, not 0), and the window's requests are the history's running total
    # at its end less at its start.
    [(at_start, failed_at_start)] = connection.execute(
        "SELECT max(total_request_count), max(total_failure_count) FROM stats_history WHERE trial_id = ? AND "
        "name = 'Aggregated' AND timestamp <= 1795132805", [NEWEST]).fetchall()
    [(at_end, failed_at_end)] = connection.execute(
        "SELECT max(total_request_count), max(total_failure_count) FROM stats_history WHERE trial_id = ? AND "
        "name = 'Aggregated' AND timestamp <= 1795132810", [NEWEST]).fetchall()
    assert at_end - at_start > 0
    assert (newest["wake_n"], newest["wake_p99_ms"], newest["requests"], newest["failed_requests"]) == \
        (None, None, at_end - at_start, failed_at_end - failed_at_start)
    assert newest["failure_ratio"] == (failed_at_end - failed_at_start) / (at_end - at_start)
    capacity = {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM slo_capacity")}
    assert capacity[NEWEST]["capacity_null_because"] == "the suite sets no SLO"
    [history] = fetch(connection, "SELECT sut_version FROM capacity_history WHERE trial_id = ?", [NEWEST])
    assert history["sut_version"] == "4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"  # its run tag: the commit


def test_the_import_command(tmp_path):
    env = project_env(make_project(tmp_path, "suites: []\n"))
    cli = str(Path(sys.executable).parent / "substrate-bench")
    done = subprocess.run([cli, "import", str(UPSTREAM)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert NEWEST in done.stdout and OLDEST in done.stdout
    query = subprocess.run([cli, "sql", "select trial_id, actors_per_vcpu from density_frontiers order by 1",
                            "--format", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(query.stdout) == [{"trial_id": OLDEST, "actors_per_vcpu": 0.42},
                                        {"trial_id": NEWEST, "actors_per_vcpu": 2.55}]
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(tmp_path / ".dagster_home"))
    assert set(instance.get_dynamic_partitions("trial")) == {NEWEST, OLDEST}
    assert instance.get_latest_materialization_event(dg.AssetKey("density_frontiers")) is not None
    again = subprocess.run([cli, "import", str(UPSTREAM)], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and "already in the store" in again.stdout
    empty = subprocess.run([cli, "import", str(tmp_path / "nothing")], capture_output=True, text=True, env=env)
    assert empty.returncode == 1 and "no upstream runs" in empty.stderr
