"""Every workload family as a whole trial: its suite through Locust (the locustfile's user class, flags and knobs)
against the embedded runtime, then into the warehouse, where its wake rows, and only those, are the wakes.

The families' rows and counts request by request are the virtual users' own tests (test_<family>_user.py); these
check what only a real run shows: the options reach the user, the rows reach stats.csv and the request log alike,
and the marts read each family's wake."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from substrate_assets.driver.trial import run_local_trial
from substrate_assets.results.layout import RunStore
from substrate_assets.results.readers import read_json, read_requests, read_stats
from substrate_assets.suites import get_suite
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.workload import ScriptLibrary

ROOT = Path(__file__).resolve().parents[2]
SHORT = "5s"
# Each suite, cut to a few seconds, and the rows its trial must book.
FAMILIES = {
    # Two actors per glutton user: a family's actors per user other than one reaches its density figures.
    "glutton-mem-1gi": ({"users": 2, "knobs": {"min_wait_time": 0.2, "max_wait_time": 0.2, "mem_target": "8Mi",
                                                "mem_churn": "1Mi", "mem_read": "all", "cpu_cores": 1,
                                                "cpu_duty_cycle": 0.1, "actors_per_user": 2},
                         "actor_memory": "64Mi"},
                        {"ResumeActorFirstResume", "ResumeActor", "SuspendActor", "GluttonPing", "GluttonFillRAM",
                         "GluttonUseCPU", "GluttonReadRAM", "GluttonChurnRAM", "DeleteActor"}),
    "durdir-baseline": ({"users": 2, "knobs": {"min_wait_time": 0.2, "max_wait_time": 0.2,
                                               "durdir_file_size_bytes": 1 << 20}},
                        {"DurDirWrite", "DurDirServeInitial", "SuspendActor", "ResumeActor", "DurDirServeAfterResume",
                         "DurDirServeWarm", "DurDirOverwrite", "DeleteActor"}),
    "spawn-smoke-10-actors": ({"knobs": {"total_actors": 4, "spawn_concurrency": 2, "actor_deadline": 30}},
                              {"CreateActor", "ResumeActor", "GluttonPing", "ActorTimeToReady", "TimeToReady_10pct",
                               "TimeToReady_100pct", "TimeToAllReady"}),
    "burst-cohort": ({"knobs": {"total_actors": 3, "actor_deadline": 30, "min_wait_time": 0.5, "max_wait_time": 0.5,
                                "min_live_time": 0.2, "max_live_time": 0.2}},
                     {"CreateActor", "ResumeActorFirstResume", "GluttonReadyPing", "ActorTimeToFirstResume",
                      "TimeToFirstResume_100pct", "TimeToAllFirstResumed", "ActorTimeToFirstSuspend",
                      "TimeToAllFirstSuspended"}),
    "sweperf": ({"users": 1, "knobs": {"min_wait_time": 0.1, "max_wait_time": 0.1, "sweperf_total_steps": 4,
                                       "sweperf_num_cycles": 2}},
                {"ResumeActor", "ResumeActor_rtt", "ResumeToFirstExec", "Workload_Cycle_1", "Workload_Cycle_2",
                 "CycleCEL", "SuspendActor"}),
}
# Rows whose Locust response length is the bytes of the reply (or walked), never 0 on a success.
SIZED = ("GluttonPing", "GluttonReadRAM", "DurDirServeAfterResume", "DurDirServeWarm", "Workload_Cycle_1")


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("store"))
    results = {}
    for name, (changes, _rows) in FAMILIES.items():
        suite = get_suite(name).with_overrides(duration=SHORT, workers=2, actors_per_worker=4, **changes)
        results[name] = run_local_trial(suite, store, ScriptLibrary(ROOT / "scripts"),
                                        runtime_overrides={"warm_hosts": 1})
    warehouse = tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb"
    rebuild(store, warehouse, ROOT / "dbt_like_sql")
    return results, warehouse


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_books_its_rows_through_locust(trials, name):
    results, _ = trials
    result = results[name]
    assert result.completed, result
    manifest = read_json(Path(result.trial_dir) / "trial.json")
    suite = get_suite(name)
    assert manifest["script"] is None and manifest["knobs"]["family"] == suite.family
    assert manifest["locust_command"][-1] == suite.user_class
    requests = read_requests(Path(result.trial_dir) / "requests.parquet")
    booked = set(requests["name"])
    assert FAMILIES[name][1] <= booked, FAMILIES[name][1] - booked
    stats = read_stats(Path(result.trial_dir) / "stats.csv").filter(pl.col("name") != "Aggregated")
    counted = requests.filter(pl.col("locust_counted")).group_by("name").len()
    assert dict(zip(stats["name"], stats["request_count"], strict=True)) == \
        dict(zip(counted["name"], counted["len"], strict=True))
    sized = requests.filter(pl.col("name").is_in(SIZED) & pl.col("success"))
    assert sized["response_length"].min() is None or sized["response_length"].min() > 0
    assert requests["wake"].null_count() == 0


def test_the_wakes_are_each_familys_wake_row(trials):
    results, _ = trials
    wakes = {name: read_requests(Path(result.trial_dir) / "requests.parquet").filter(pl.col("wake"))
             for name, result in results.items()}
    assert set(wakes["durdir-baseline"]["name"]) == {"DurDirServeAfterResume"}
    assert set(wakes["sweperf"]["name"]) == {"ResumeToFirstExec"}
    assert wakes["spawn-smoke-10-actors"].is_empty() and wakes["burst-cohort"].is_empty()
    # Glutton: the first ping after each resume, one per resume that succeeded, not every ping.
    glutton = read_requests(Path(results["glutton-mem-1gi"].trial_dir) / "requests.parquet")
    resumes = glutton.filter(pl.col("name").str.starts_with("ResumeActor") & pl.col("success")).height
    assert set(wakes["glutton-mem-1gi"]["name"]) == {"GluttonPing"}
    assert 0 < wakes["glutton-mem-1gi"].height <= resumes


def test_the_marts_read_each_familys_wake_and_family(trials):
    results, warehouse = trials
    with duckdb.connect(str(warehouse), read_only=True) as connection:
        rows = dict(connection.execute("""
            SELECT t.family, w.n_wakes FROM trials t JOIN wake_latency_distribution w USING (trial_id)""").fetchall())
    for name, result in results.items():
        requests = read_requests(Path(result.trial_dir) / "requests.parquet")
        expected = requests.filter(pl.col("wake") & pl.col("locust_counted").ne_missing(False)).height
        assert rows[get_suite(name).family] == expected, name
    assert rows["durdir"] > 0 and rows["sweperf"] > 0 and rows["glutton"] > 0 and rows["spawn"] == 0


def test_each_familys_reported_density_is_its_recomputed_one(trials):
    """The trial_summary a trial writes counts each user's actors as its family drives them (a glutton user's round
    robin, a spawn batch, a burst cohort), as density_frontiers recomputes them: no trial of ours is a mismatch."""
    results, warehouse = trials
    with duckdb.connect(str(warehouse), read_only=True) as connection:
        rows = {trial_id: (per_user, reported, recomputed, mismatch) for trial_id, per_user, reported, recomputed,
                mismatch in connection.execute("""
                    SELECT d.trial_id, m.actors_per_user, d.actors_per_node, d.recomputed_actors_per_node,
                           d.frontier_mismatch
                    FROM density_frontiers d JOIN trial_manifests m USING (trial_id)""").fetchall()}
    per_user = {"glutton-mem-1gi": 2, "durdir-baseline": 1, "spawn-smoke-10-actors": 4, "burst-cohort": 3,
                "sweperf": 1}
    for name, result in results.items():
        actors, reported, recomputed, mismatch = rows[result.trial_id]
        assert actors == per_user[name], name
        assert reported is not None and reported == recomputed and mismatch is False, (name, rows[result.trial_id])
