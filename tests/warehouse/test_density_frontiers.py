"""density_frontiers reports a run's own trial_summary figures and keeps its recomputation beside them; it never
assumes actors per user; and an empty Name in stats_history.csv is a total row, as "Aggregated" is."""

import json
from pathlib import Path

import pytest

from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.marts import build_all
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.raw_tables import ensure_schema
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.raw_rows import insert

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "dbt_like_sql"
FIGURES = ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50", "actors_per_pod_p90",
           "actors_per_pod_p99", "aggregate_failure_ratio")
# What the reference's fixture recomputes to: 10 users, 1 node, 3.92 cores, 12.96 GiB, 5 pods, 0 failures.
FIXTURE = dict(zip(FIGURES, (10.0, 2.55, 0.77, 2.0, 2.0, 2.0, 0.0), strict=True))


def fetch(connection, sql: str, parameters: list | None = None) -> list[dict]:
    cursor = connection.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def frontiers(connection) -> dict[str, dict]:
    build_all(connection, discover(MODELS))
    return {row["trial_id"]: row for row in fetch(connection, "SELECT * FROM density_frontiers")}


def column_tests_pass(connection) -> bool:
    tests = load_tests(MODELS / "schema.yml", set(every_model(MODELS)))["density_frontiers"]
    return all(run_test(connection, test).passed for test in tests)


@pytest.fixture
def warehouse(tmp_path):
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        yield connection


def a_fixture_trial(connection, trial_id: str, *, actors_per_user: int | None = 1, **reported) -> None:
    insert(connection, "trial_manifests", [{"trial_id": trial_id, "suite": "s", "backend": "import", "users": 10,
                                            "actors_per_user": actors_per_user}])
    insert(connection, "cluster_facts", [{"trial_id": trial_id, "node_count": 1, "allocatable_cores": 3.92,
                                          "allocatable_ram_gb": 12.96, "worker_pod_count": 5, **reported}])
    insert(connection, "stats_history", [{"trial_id": trial_id, "timestamp": 1000 + i, "user_count": u, "type": "",
                                          "name": "Aggregated"} for i, u in enumerate([0, 10, 10])])
    insert(connection, "locust_stats", [{"trial_id": trial_id, "type": "", "name": "Aggregated",
                                         "request_count": 200, "failure_count": 0}])


def reported(figures: dict) -> dict:
    return {"has_trial_summary": True, **{f"reported_{key}": value for key, value in figures.items()}}


def test_the_runs_own_figures_are_reported_and_a_disagreement_is_recorded(warehouse):
    a_fixture_trial(warehouse, "agrees", **reported(FIXTURE))
    a_fixture_trial(warehouse, "disagrees", **reported({**FIXTURE, "actors_per_node": 30.0}))
    a_fixture_trial(warehouse, "unreported")
    rows = frontiers(warehouse)
    agrees, disagrees, unreported = rows["agrees"], rows["disagrees"], rows["unreported"]
    assert {key: agrees[key] for key in FIGURES} == FIXTURE
    assert (agrees["figures_from"], agrees["frontier_mismatch"]) == ("trial_summary", False)
    # The run's figure stands; ours sits beside it, and the row says they differ.
    assert (disagrees["actors_per_node"], disagrees["recomputed_actors_per_node"]) == (30.0, 10.0)
    assert (disagrees["figures_from"], disagrees["frontier_mismatch"]) == ("trial_summary", True)
    assert {key: unreported[key] for key in FIGURES} == FIXTURE == \
        {key: unreported[f"recomputed_{key}"] for key in FIGURES}
    assert (unreported["figures_from"], unreported["frontier_mismatch"]) == ("recomputed", None)
    assert column_tests_pass(warehouse)


def test_a_null_the_run_reported_is_its_figure(warehouse):
    """A run that reported a figure as unmeasured keeps it null; recomputing a number there is a disagreement."""
    a_fixture_trial(warehouse, "t", **reported({**FIXTURE, "actors_per_pod_p50": None}))
    row = frontiers(warehouse)["t"]
    assert (row["actors_per_pod_p50"], row["recomputed_actors_per_pod_p50"], row["frontier_mismatch"]) == \
        (None, 2.0, True)


def test_actors_per_user_is_never_assumed(warehouse):
    a_fixture_trial(warehouse, "unknown", actors_per_user=None)
    a_fixture_trial(warehouse, "three", actors_per_user=3)
    a_fixture_trial(warehouse, "reported", actors_per_user=None, **reported(FIXTURE))
    rows = frontiers(warehouse)
    unknown = rows["unknown"]
    assert all(unknown[key] is None for key in FIGURES[:6]) and unknown["aggregate_failure_ratio"] == 0.0
    assert unknown["peak_users"] == 10.0  # users are known; what each drove is not
    assert (rows["three"]["actors_per_node"], rows["three"]["actors_per_vcpu"], rows["three"]["actors_per_pod_p50"]) \
        == (30.0, 7.65, 6.0)
    # Nothing to recompute with is not a disagreement: the run's figures stand, unquestioned.
    assert (rows["reported"]["actors_per_node"], rows["reported"]["frontier_mismatch"]) == (10.0, False)


def native_trial(root: Path, suite: str, history: str) -> TrialDirectory:
    directory = root / f"runs/{suite}/run_date=2026-11-30/run_ts=1796033700/run_tag=local"
    directory.mkdir(parents=True)
    (directory / "trial.json").write_text(json.dumps({
        "trial_id": f"{suite}-20261130t101500z", "suite": suite, "backend": "local", "knobs": {"users": 6},
        "cluster_facts": {"node_count": 1, "allocatable_cores": 3.92, "allocatable_ram_gb": 12.96,
                          "worker_pod_count": 5}, "run_start": 1796033700, "run_end": 1796033760}))
    (directory / "stats_history.csv").write_text(history)
    return TrialDirectory(directory)


def test_an_empty_name_in_stats_history_counts_as_aggregated(tmp_path):
    """The same history, its total rows named "Aggregated" or left empty, gives the same frontier."""
    header = "Timestamp,User Count,Type,Name,Requests/s,Failures/s\n"
    users = [0, 2, 4, 6, 8, 10, 10, 10, 10, 10, 10]
    aggregated = header + "".join(f"{1796033700 + i},{u},,Aggregated,1.0,0.0\n" for i, u in enumerate(users))
    trials = [native_trial(tmp_path, "named", aggregated),
              native_trial(tmp_path, "unnamed", aggregated.replace(",Aggregated,", ",,"))]
    with connect(tmp_path / "w.duckdb") as connection:
        load_trials(connection, trials)
        rows = frontiers(connection)
    named, unnamed = rows["named-20261130t101500z"], rows["unnamed-20261130t101500z"]
    assert {key: unnamed[key] for key in ("peak_users", *FIGURES[:6])} == \
        {key: named[key] for key in ("peak_users", *FIGURES[:6])}
    assert (unnamed["peak_users"], unnamed["actors_per_node"], unnamed["actors_per_pod_p50"]) == (10.0, 10.0, 2.0)


def test_the_trial_summary_mart_follows_the_runs_figures(warehouse):
    a_fixture_trial(warehouse, "t", **reported({**FIXTURE, "actors_per_pod_p50": 0.5}))
    build_all(warehouse, discover(MODELS))
    [row] = fetch(warehouse, "SELECT actors_per_pod_p50, multi_actor_worker FROM trial_summary")
    assert row == {"actors_per_pod_p50": 0.5, "multi_actor_worker": False}
