"""SQL models against the reference's formulas and vectors, on raw tables filled by hand."""

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from substrate_assets.warehouse.checks import SchemaError, load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.discovery import ModelError, discover, referenced_tables
from substrate_assets.warehouse.models.marts import build_all
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.raw_tables import RAW_TABLES, ensure_schema
from substrate_assets.warehouse.trial_writes import replace_rows
from tests.support.raw_rows import insert

MODELS = Path(__file__).resolve().parents[2] / "dbt_like_sql"


def manifest(trial_id: str, users: int = 10, **extra) -> dict:
    return {"trial_id": trial_id, "suite": "s", "backend": "local", "users": users, "actors_per_user": 1,
            "completed": True, **extra}


def facts(trial_id: str, **values) -> dict:
    return {"trial_id": trial_id, "node_count": 1, "allocatable_cores": 3.92, "allocatable_ram_gb": 12.96,
            "worker_pod_count": 5, **values}


def history(trial_id: str, users: list[float]) -> list[dict]:
    return [{"trial_id": trial_id, "timestamp": 1000 + i, "user_count": u, "type": "", "name": "Aggregated"}
            for i, u in enumerate(users)]


def aggregated(trial_id: str, requests: int, failures: int) -> dict:
    return {"trial_id": trial_id, "type": "", "name": "Aggregated", "request_count": requests,
            "failure_count": failures}


@pytest.fixture
def warehouse(tmp_path):
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        yield connection


def fetch(connection, sql: str, parameters: list | None = None) -> list[dict]:
    cursor = connection.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def build(connection):
    return {table.name: table for table in build_all(connection, discover(MODELS))}


def frontier(connection, trial_id: str) -> dict:
    return fetch(connection, "SELECT * FROM density_frontiers WHERE trial_id = ?", [trial_id])[0]


def test_density_frontier_reference_fixture_and_percentile_vector(warehouse):
    insert(warehouse, "trial_manifests", [manifest("fixture"), manifest("vector", users=299)])
    insert(warehouse, "cluster_facts", [facts("fixture"), facts("vector")])
    insert(warehouse, "stats_history", history("fixture", [0, 10, 10]) +
           history("vector", [1, 50, 89, *range(100, 300)]))
    insert(warehouse, "locust_stats", [aggregated("fixture", 200, 0), aggregated("vector", 1000, 7)])
    build(warehouse)
    fixture = frontier(warehouse, "fixture")
    # 10 users, 1 node, 3.92 cores, 12.96 GiB, 5 pods → 10.0, 2.55, 0.77, 2.0
    assert (fixture["peak_users"], fixture["actors_per_node"], fixture["actors_per_vcpu"],
            fixture["actors_per_gb_ram"], fixture["actors_per_pod_p50"]) == (10.0, 10.0, 2.55, 0.77, 2.0)
    assert fixture["aggregate_failure_ratio"] == 0.0  # a measured zero, not null
    vector = frontier(warehouse, "vector")
    # users = [1, 50, 89] + 100..299 over 5 pods → 39.6 / 55.8 / 59.4
    assert (vector["actors_per_pod_p50"], vector["actors_per_pod_p90"], vector["actors_per_pod_p99"]) == \
        (39.6, 55.8, 59.4)
    assert vector["aggregate_failure_ratio"] == 0.007


def test_density_frontier_null_rules(warehouse):
    insert(warehouse, "trial_manifests", [manifest("unobserved", users=6), manifest("nopods"),
                                          manifest("nothing")])
    insert(warehouse, "cluster_facts", [facts("unobserved", node_count=0, allocatable_cores=None),
                                        facts("nopods", worker_pod_count=0, allocatable_ram_gb=0.0)])
    insert(warehouse, "stats_history", history("unobserved", [0, 0]) + history("nopods", [4, 4]))
    insert(warehouse, "locust_stats", [aggregated("nopods", 0, 0)])
    build(warehouse)
    unobserved = frontier(warehouse, "unobserved")
    assert unobserved["peak_users"] == 6.0  # -u only when nothing was observed
    assert unobserved["actors_per_node"] is None and unobserved["actors_per_vcpu"] is None  # 0 and null denominators
    assert unobserved["actors_per_gb_ram"] == 0.46 and unobserved["actors_per_pod_p50"] is None  # no samples
    nopods = frontier(warehouse, "nopods")
    assert nopods["actors_per_pod_p50"] is None and nopods["actors_per_gb_ram"] is None
    assert nopods["aggregate_failure_ratio"] is None  # no requests
    nothing = frontier(warehouse, "nothing")
    assert nothing["peak_users"] == 10.0 and all(nothing[k] is None for k in nothing if k.startswith("actors_"))


def test_python_rounding_not_half_away_from_zero(warehouse):
    insert(warehouse, "trial_manifests", [manifest("t", users=1)])
    insert(warehouse, "cluster_facts", [facts("t", node_count=8)])  # 1 / 8 = 0.125 → 0.12, as Python rounds
    build(warehouse)
    assert frontier(warehouse, "t")["actors_per_node"] == 0.12


def samples(trial_id: str, name: str, latencies: list[float], success: bool = True,
            counted: bool | None = True) -> list[dict]:
    return [{"trial_id": trial_id, "ts": 1.0 + i, "request_type": "http", "name": name, "latency_ms": value,
             "response_time_ms": int(value), "response_length": 0, "success": success, "locust_counted": counted}
            for i, value in enumerate(latencies)]


def test_wake_latency_distribution_reference_vector(warehouse):
    """The main figures count every wake Locust counted, failed or not; ok_ the successful ones (the reference's
    vector 1..200); a wake booked after Locust's last stats write counts in neither."""
    insert(warehouse, "trial_manifests", [manifest("t"), manifest("quiet")])
    insert(warehouse, "request_samples", samples("t", "WakeFirstTouch", [float(v) for v in range(200, 0, -1)])
           + samples("t", "WakeFirstTouch", [99999.0], success=False)
           + samples("t", "WakeFirstTouch", [0.5], counted=False) + samples("t", "Step_x", [5000.0]))
    build(warehouse)
    rows = {row["trial_id"]: row for row in fetch(warehouse, "SELECT * FROM wake_latency_distribution")}
    t = rows["t"]
    assert (t["ok_n"], t["ok_min_ms"], t["ok_p50_ms"], t["ok_p90_ms"], t["ok_p95_ms"], t["ok_p99_ms"],
            t["ok_max_ms"], t["ok_mean_ms"]) == (200, 1.0, 101.0, 181.0, 191.0, 199.0, 200.0, 100.5)
    assert t["ok_p99_9_ms"] == 200.0
    assert (t["n_wakes"], t["n_failed"], t["min_ms"], t["p50_ms"], t["p99_ms"], t["p99_9_ms"], t["max_ms"]) == \
        (201, 1, 1.0, 101.0, 199.0, 99999.0, 99999.0)
    quiet = rows["quiet"]
    assert quiet["n_wakes"] == 0 and quiet["n_failed"] == 0 and quiet["p50_ms"] is None and quiet["mean_ms"] is None
    assert quiet["ok_n"] == 0 and quiet["ok_p50_ms"] is None


def test_wake_latency_distribution_keeps_rows_whose_count_is_unknown(warehouse):
    insert(warehouse, "trial_manifests", [manifest("t")])
    insert(warehouse, "request_samples", samples("t", "WakeFirstTouch", [10.0, 20.0], counted=None))
    build(warehouse)
    assert fetch(warehouse, "SELECT n_wakes FROM wake_latency_distribution") == [{"n_wakes": 2}]


def test_wake_latency_windows_cut_a_trial_into_five_minute_windows(warehouse):
    """Windows count from the trial's first request (of any kind); each holds the counted wakes that started in it,
    with floor-index percentiles (the reference's vector 1..200 in the first window), and the last window ends at the
    trial's last request. A window without wakes has no row; a wake booked after Locust's last write counts in none."""
    insert(warehouse, "trial_manifests", [manifest("t")])
    first = [{**row, "ts": 100.0 + i} for i, row in enumerate(samples("t", "WakeFirstTouch", [float(v) for v in
                                                                                         range(200, 0, -1)]))]
    later = [{**row, "ts": 100.0 + 600 + i} for i, row in enumerate(samples("t", "WakeFirstTouch", [5.0, 9.0, 7.0]))]
    failed = [{**row, "ts": 100.0 + 601.5} for row in samples("t", "WakeFirstTouch", [50.0], success=False)]
    late_uncounted = [{**row, "ts": 100.0 + 650} for row in samples("t", "WakeFirstTouch", [999.0], counted=False)]
    not_a_wake = [{**row, "ts": 95.0 + 1000 * i} for i, row in enumerate(samples("t", "Step_01_a", [1.0, 1.0]))]
    insert(warehouse, "request_samples", first + later + failed + late_uncounted + not_a_wake)
    build(warehouse)
    rows = fetch(warehouse, "SELECT * EXCLUDE (trial_id) FROM wake_latency_windows ORDER BY window_index")
    assert rows == [
        {"window_index": 0, "window_start_s": 0.0, "window_end_s": 300.0, "n_wakes": 200, "n_failed_wakes": 0,
         "p50_ms": 101.0, "p99_ms": 199.0, "max_ms": 200.0},
        {"window_index": 2, "window_start_s": 600.0, "window_end_s": 900.0, "n_wakes": 4, "n_failed_wakes": 1,
         "p50_ms": 9.0, "p99_ms": 50.0, "max_ms": 50.0},
    ]


def test_wake_histogram_is_locusts_own(warehouse):
    """Locust buckets the whole milliseconds it was given (truncated), failed requests included: the table holds
    exactly a real ``locust.stats.StatsEntry``'s ``response_times`` for the same requests (in a process of its
    own: importing Locust patches the interpreter with gevent)."""
    values = [2.5, 3.5, 3.9, 145.0, 155.0, 147.0, 994.0, 995.0, 995.9, 3450.0, 58500.0, 59500.0, 99.4, 99.99,
              104.9, 125.0, 135.0, 1050.0, 1150.0]
    failed = [250.7, 12.2]
    insert(warehouse, "trial_manifests", [manifest("t")])
    insert(warehouse, "request_samples", samples("t", "WakeFirstTouch", values)
           + samples("t", "WakeFirstTouch", failed, success=False)
           + samples("t", "WakeFirstTouch", [7.0], counted=False))
    build(warehouse)
    program = ("import json, sys\nfrom locust.stats import RequestStats, StatsEntry\n"
               "entry = StatsEntry(RequestStats(), 'WakeFirstTouch', 'http')\n"
               "for value in json.load(sys.stdin):\n    entry.log(int(value), 0)\n"  # the locustfile books int(ms)
               "print(json.dumps(sorted(entry.response_times.items())))")
    done = subprocess.run([sys.executable, "-c", program], input=json.dumps(values + failed), capture_output=True,
                          text=True, timeout=120, check=True)
    rows = warehouse.execute("SELECT bucket_ms, count, ok_count FROM wake_latency_histogram").fetchall()
    assert [[bucket, count] for bucket, count, _ in sorted(rows)] == json.loads(done.stdout)
    assert sum(ok for _, _, ok in rows) == len(values)


def test_step_latency_and_trial_summary(warehouse):
    insert(warehouse, "trial_manifests", [manifest("t", metadata='{"run": "x"}')])
    insert(warehouse, "cluster_facts", [facts("t", machine_type="cpu", sandbox_class="process")])
    insert(warehouse, "stats_history", history("t", [10, 10]))
    insert(warehouse, "request_samples", samples("t", "Step_01_a", [10.0, 20.0, 30.0])
           + samples("t", "Step_01_a", [7.0], success=False))
    stats = [{"trial_id": "t", "type": "grpc", "name": name, "request_count": requests, "failure_count": failures}
             for name, requests, failures in [("ResumeActorFirstResume", 10, 1), ("GluttonReadRAM", 4, 0),
                                              ("TimeToReady_10pct", 0, 0), ("DurDirWrite", 8, 2)]]
    insert(warehouse, "locust_stats", [*stats, aggregated("t", 22, 3)])
    build(warehouse)
    step = fetch(warehouse, "SELECT * FROM step_latency")[0]
    assert (step["step"], step["n_ok_steps"], step["failures"], step["p50_ms"], step["p99_ms"]) == ("01_a", 3, 1, 20.0, 30.0)
    summary = fetch(warehouse, "SELECT * FROM trial_summary")[0]
    ratios = dict(summary["operation_failure_ratios"])
    assert ratios == {"resume_actor_first_resume_failure_ratio": 0.1, "glutton_read_ram_failure_ratio": 0.0,
                      "time_to_ready_10pct_failure_ratio": None, "dur_dir_write_failure_ratio": 0.25}
    assert summary["multi_actor_worker"] is True and summary["actors_per_pod_p50"] == 2.0
    assert summary["aggregate_failure_ratio"] == 0.1364 and summary["machine_type"] == "cpu"
    assert summary["metadata"] == '{"run": "x"}'


def test_tests_catch_violations(warehouse):
    insert(warehouse, "trial_manifests", [manifest("t"), {**manifest("t"), "backend": "mars"}])
    build(warehouse)
    tests = load_tests(MODELS / "schema.yml", set(every_model(MODELS)))
    outcomes = {test.name: run_test(warehouse, test) for test in tests["trials"]}
    assert not outcomes["trial_id_unique"].passed and outcomes["trial_id_unique"].violations == 1
    assert not outcomes["backend_accepted_values"].passed
    assert outcomes["backend_accepted_values"].sample[0]["backend"] == "mars"
    assert outcomes["trial_id_not_null"].passed


def test_dependencies_come_from_parsing_the_sql(tmp_path):
    sql = ("WITH recent AS (SELECT * FROM trials WHERE started_at > now() - INTERVAL 1 DAY) "
           "SELECT r.trial_id, d.p50_ms FROM recent r JOIN wake_latency_distribution d USING (trial_id) "
           "WHERE r.trial_id IN (SELECT trial_id FROM cluster_facts)")
    assert referenced_tables(sql, tmp_path / "m.sql") == ("cluster_facts", "trials", "wake_latency_distribution")
    models = discover(MODELS)
    assert models["trial_summary"].upstream == ("cluster_facts", "density_frontiers", "locust_stats",
                                                "trial_manifests")
    assert models["density_frontiers"].description.startswith("Density frontier per trial")


def test_model_errors(tmp_path):
    (tmp_path / "a.sql").write_text("SELECT * FROM b")
    (tmp_path / "b.sql").write_text("SELECT * FROM a")
    from substrate_assets.warehouse.models.discovery import build_order

    with pytest.raises(ModelError, match="cycle"):
        build_order(discover(tmp_path))
    (tmp_path / "b.sql").write_text("SELEC nonsense FROM")
    with pytest.raises(ModelError, match=r"b\.sql"):
        discover(tmp_path)
    (tmp_path / "b.sql").write_text("DELETE FROM a")
    with pytest.raises(ModelError, match="exactly one SELECT"):
        discover(tmp_path)
    # An update narrows the tables a model reads by their names alone: a schema would slip past it.
    (tmp_path / "b.sql").write_text("SELECT * FROM main.trials AS t JOIN cluster_facts USING (trial_id)")
    with pytest.raises(ModelError, match=r"b\.sql: reads main\.trials: .* without a schema"):
        discover(tmp_path)
    (tmp_path / "schema.yml").write_text("models:\n  - name: zzz\n")
    with pytest.raises(SchemaError, match="zzz"):
        load_tests(tmp_path / "schema.yml", {"a"})


def test_a_model_level_test_is_a_unique_combination_of_two_or_more_columns(tmp_path):
    (tmp_path / "schema.yml").write_text(
        "models:\n  - name: a\n    tests:\n      - unique_combination_of_columns: "
        "{combination_of_columns: [trial_id, metric]}\n")
    [test] = load_tests(tmp_path / "schema.yml", {"a"})["a"]
    assert (test.name, test.argument, test.blocking) == \
        ("trial_id__metric_unique_combination_of_columns", ("trial_id", "metric"), True)
    for wrong in ("[unique]", "[{unique_combination_of_columns: {combination_of_columns: [trial_id]}}]",
                  "[{unique_combination_of_columns: [trial_id, metric]}]"):
        (tmp_path / "schema.yml").write_text(f"models:\n  - name: a\n    tests: {wrong}\n")
        with pytest.raises(SchemaError, match=r"schema\.yml: a: model test .* combination_of_columns"):
            load_tests(tmp_path / "schema.yml", {"a"})


def test_two_tests_of_one_kind_on_a_column_are_told_apart(tmp_path):
    """Each test is a Dagster asset check, whose name must be unique on its asset."""
    (tmp_path / "schema.yml").write_text(
        "models:\n  - name: a\n    columns:\n      - name: n\n        tests:\n"
        "          - expression: 'n >= 0'\n          - expression: 'n < 10'\n          - not_null\n")
    tests = load_tests(tmp_path / "schema.yml", {"a"})["a"]
    assert [test.name for test in tests] == ["n_expression", "n_expression_2", "n_not_null"]


def test_a_failed_load_changes_nothing(warehouse):
    insert(warehouse, "trial_manifests", [manifest("t")])
    spec = RAW_TABLES["trial_manifests"]
    broken = pl.DataFrame({"trial_id": ["t"], "run_ts": ["not a number"]})
    with pytest.raises(duckdb.ConversionException):
        replace_rows(warehouse, spec, ["t"], broken)
    assert warehouse.execute("SELECT count(*), any_value(suite) FROM trial_manifests").fetchone() == (1, "s")


def test_a_warehouse_from_before_a_column_gains_it_as_null(tmp_path):
    """Rows loaded before the request log said which rows Locust counted keep an unknown (null) answer."""
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as old:
        old.execute("CREATE TABLE request_samples (trial_id VARCHAR, name VARCHAR, latency_ms DOUBLE)")
        old.execute("INSERT INTO request_samples VALUES ('t', 'WakeFirstTouch', 5.0)")
    with connect(path) as connection:
        ensure_schema(connection)
        ensure_schema(connection)
        assert fetch(connection, "SELECT latency_ms, locust_counted, phase FROM request_samples") == \
            [{"latency_ms": 5.0, "locust_counted": None, "phase": None}]


def test_a_trial_in_which_no_session_started_is_kept_out_of_the_figures(warehouse):
    why = "no session ever started: CreateActor agent-1: no capacity"
    insert(warehouse, "trial_manifests", [manifest("empty", completed=False, sessions_started=0, failure=why),
                                          manifest("ran", sessions_started=4)])
    insert(warehouse, "stats_history", history("empty", [10, 10]) + history("ran", [10, 10]))
    insert(warehouse, "cluster_facts", [facts("empty"), facts("ran")])
    build(warehouse)
    trials = {row["trial_id"]: row for row in fetch(warehouse, "SELECT * FROM trials")}
    assert (trials["empty"]["status"], trials["empty"]["failure"]) == ("failed", why)
    assert trials["ran"]["status"] == "completed" and trials["ran"]["failure"] is None
    assert [row["trial_id"] for row in fetch(warehouse, "SELECT trial_id FROM density_frontiers")] == ["ran"]
    assert [row["trial_id"] for row in fetch(warehouse, "SELECT trial_id FROM wake_latency_distribution")] == ["ran"]


def test_the_tables_each_model_reads_are_kept_between_processes(tmp_path):
    """A process whose models' SQL is in the cache does not import sqlglot (~0.35 s with the parse), and finds the
    same models; a cache that does not read is parsed again and rewritten."""
    env = {**os.environ, "SUBSTRATE_BENCH_CACHE": str(tmp_path / "cache")}
    code = ("import sys, json; from substrate_assets.warehouse.models.discovery import discover; "
            "models = discover(); print(json.dumps([sorted((n, m.upstream) for n, m in models.items()), "
            "'sqlglot' in sys.modules]))")
    def run() -> list:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout)
    first, parsed = run()
    assert parsed and first == json.loads(json.dumps(sorted((n, m.upstream) for n, m in discover(MODELS).items())))
    [cache] = (tmp_path / "cache" / "models").glob("referenced-tables-sqlglot-*.json")
    assert run() == [first, False]
    cache.write_text("{not json")
    assert run() == [first, True]
    assert run() == [first, False]


def wake(trial_id: str, actor: str, start: float, latency_ms: float, **extra) -> dict:
    return {"trial_id": trial_id, "ts": start, "request_type": "http", "name": "WakeFirstTouch",
            "latency_ms": latency_ms, "success": True, "locust_counted": True, "wake": True, "session_id": actor,
            **extra}


def resume(trial_id: str, actor: str, start: float, kind: str = "restore", host_start: str | None = "warm") -> dict:
    return {"trial_id": trial_id, "kind": kind, "atespace": "benchmark", "actor": actor, "start_ts": start,
            "duration_s": 0.01, "host_start": host_start if kind == "restore" else None}


def test_each_wake_takes_the_path_of_its_actors_resume(warehouse):
    """An implicit wake's resume starts inside its request, an explicit one's just before; the resume must follow the
    actor's previous wake, or the wake found its actor running (no path); an event log older than host_start says
    restore; a trial that kept no events has no paths. The distribution counts the slow share of the known paths,
    and the geometric mean of every wake."""
    insert(warehouse, "trial_manifests", [manifest("t"), manifest("cluster")])
    insert(warehouse, "request_samples", [
        wake("t", "a", 10.0, 50.0), wake("t", "a", 20.0, 300.0), wake("t", "a", 30.0, 40.0),
        wake("t", "b", 10.0, 20.0), wake("t", "b", 15.0, 30.0), wake("t", "c", 12.0, 80.0),
        wake("t", "c", 14.0, 5.0, locust_counted=False), wake("cluster", "x", 1.0, 70.0)])
    insert(warehouse, "runtime_events", [
        resume("t", "a", 10.001), resume("t", "a", 20.1, host_start="cold"),  # implicit: inside the request
        resume("t", "a", 29.99, kind="unpause"),  # explicit: ResumeActor just before the wake
        resume("t", "b", 10.002, host_start="cold"),  # b's second wake finds nothing after its first
        resume("t", "c", 12.001, host_start=None),  # an event log from before host_start
        {"trial_id": "t", "kind": "checkpoint", "actor": "a", "start_ts": 25.0, "duration_s": 0.1}])
    build(warehouse)
    paths = {(row["session_id"], row["ts"]): row["wake_path"] for row in fetch(warehouse, "SELECT * FROM wake_samples")}
    assert paths == {("a", 10.0): "restore_warm", ("a", 20.0): "restore_cold", ("a", 30.0): "unpause",
                     ("b", 10.0): "restore_cold", ("b", 15.0): None, ("c", 12.0): "restore", ("x", 1.0): None}
    rows = {row["trial_id"]: row for row in fetch(warehouse, "SELECT * FROM wake_latency_distribution")}
    t = rows["t"]
    assert t["n_wakes"] == 6 and t["n_with_path"] == 5 and t["slow_share"] == pytest.approx(2 / 5)
    assert t["gmean_ms"] == pytest.approx(float(np.exp(np.mean(np.log([50, 300, 40, 20, 30, 80])))))
    assert rows["cluster"]["n_with_path"] == 0 and rows["cluster"]["slow_share"] is None
    assert rows["cluster"]["gmean_ms"] == pytest.approx(70.0)
