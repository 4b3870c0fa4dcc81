"""metric_history through its real SQL and change_points from it, on a DuckDB file filled by hand.

Every model is first built over the empty raw tables, so each has its real columns; then the upstream models of
metric_history (slo_capacity, density_frontiers, wake_latency_distribution) get rows written by hand, the raw
trial_manifests and cluster_facts rows as a load (or the importer) writes them, and capacity_history, trial_figures,
metric_history and change_points are built from those with their real code. The schema.yml tests of those three
models run over the rows and must all pass.
"""

import random
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.defs.warehouse.models import model_assets
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.warehouse.change_points import COLUMNS, replace_change_points
from substrate_assets.warehouse.checks import load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.build import build
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.marts import build_all, build_marts
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.raw_tables import ensure_schema
from tests.support.raw_rows import insert

MODELS = Path(__file__).resolve().parents[2] / "dbt_like_sql"
MINE = ("capacity_history", "trial_figures", "metric_history")
SHA = "4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
NO_SLO = "the suite sets no SLO"


@pytest.fixture
def path(tmp_path):
    return tmp_path / "w.duckdb"


@pytest.fixture
def warehouse(path):
    with connect(path) as connection:
        ensure_schema(connection)
        build_all(connection, discover(MODELS))
        yield connection


def insert_model_rows(connection, table: str, rows: list[dict]) -> None:
    for row in rows:
        connection.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                           list(row.values()))


def fetch(connection, sql: str, parameters: list | None = None) -> list[dict]:
    cursor = connection.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def at(trial: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=trial)


def noisy(level: float, rng: random.Random) -> float:
    return round(level * (1 + rng.uniform(-0.03, 0.03)), 4)


def native_trial(connection, trial_id: str, number: int, script: str, wake_p99_ms: float | None,
                 rng: random.Random) -> None:
    """A native kubernetes ladder trial with an SLO: manifest, facts, capacity, frontier and wake figures."""
    insert(connection, "trial_manifests", [{
        "trial_id": trial_id, "suite": "ladder", "backend": "kubernetes", "users": 40, "actors_per_user": 2,
        "completed": True, "started_at": at(number), "script_sha256": script, "lifecycle_mode": "suspend",
        "actor_memory": "1Gi", "sut_version": "v1", "slo_wake_p99_ms": 1000.0, "planned_steps": 4}])
    insert(connection, "cluster_facts", [{"trial_id": trial_id, "sandbox_class": "gvisor",
                                          "machine_type": "c3-standard-4"}])
    insert_model_rows(connection, "slo_capacity", [{
        "trial_id": trial_id, "suite": "ladder", "slo_wake_p99_ms": 1000.0, "points": 4, "planned_steps": 4,
        "complete_points": 4, "capacity_step": 4, "capacity_users": noisy(40.0, rng),
        "knee_null_because": "the SLO is not broken within the ladder", "highest_meeting_step": 4}])
    per_node = noisy(80.0, rng)
    insert_model_rows(connection, "density_frontiers", [{
        "trial_id": trial_id, "peak_users": 40.0, "actors_per_node": per_node, "actors_per_vcpu": per_node / 4,
        "actors_per_gb_ram": per_node / 16, "aggregate_failure_ratio": noisy(0.002, rng),
        "figures_from": "recomputed"}])
    p50 = noisy(50.0, rng)
    figures = {"n_wakes": 0, "n_failed": 0, "ok_n": 0} if wake_p99_ms is None else {
        "n_wakes": 400, "n_failed": 0, "ok_n": 400, "min_ms": 5.0, "p50_ms": p50, "p90_ms": p50 * 2, "p95_ms": p50 * 2,
        "p99_ms": wake_p99_ms, "p99_9_ms": wake_p99_ms, "max_ms": wake_p99_ms}
    insert_model_rows(connection, "wake_latency_distribution", [{"trial_id": trial_id, **figures}])


def imported_trial(connection, trial_id: str, number: int, actors_per_node: float) -> None:
    """An upstream run as the importer loads it: backend 'import', its tag as sut_version, no script, knobs or
    requests; its density figures are its own trial_summary row's; no SLO."""
    started = at(number)
    run_ts = int(started.timestamp())
    insert(connection, "trial_manifests", [{
        "trial_id": trial_id, "suite": "glutton_baseline_5_users", "backend": "import", "tag": SHA,
        "run_ts": run_ts, "started_at": started, "ended_at": started + timedelta(seconds=90), "completed": True,
        "locust_exit_code": 1, "stats_generated": True, "planned_steps": 1, "sut_version": SHA,
        "trial_dir": f"/store/runs/glutton_baseline_5_users/run_date={started:%Y-%m-%d}/run_ts={run_ts}/"
                     f"run_tag={SHA}", "metadata": '{"runner": "nightly"}'}])
    insert(connection, "cluster_facts", [{
        "trial_id": trial_id, "machine_type": "c3-standard-4", "node_count": 1, "allocatable_cores": 3.92,
        "allocatable_ram_gb": 12.96, "worker_pod_count": 5, "sandbox_class": "gvisor", "run_start": run_ts,
        "run_end": run_ts + 90, "has_trial_summary": True, "reported_actors_per_node": actors_per_node,
        "reported_aggregate_failure_ratio": 0.0017}])
    insert_model_rows(connection, "slo_capacity", [{
        "trial_id": trial_id, "suite": "glutton_baseline_5_users", "points": 1, "planned_steps": 1,
        "complete_points": 1, "capacity_null_because": NO_SLO, "knee_null_because": NO_SLO}])
    insert_model_rows(connection, "density_frontiers", [{
        "trial_id": trial_id, "actors_per_node": actors_per_node, "actors_per_vcpu": round(actors_per_node / 3.92, 2),
        "actors_per_gb_ram": round(actors_per_node / 12.96, 2), "aggregate_failure_ratio": 0.0017,
        "figures_from": "trial_summary", "frontier_mismatch": False}])
    insert_model_rows(connection, "wake_latency_distribution", [{"trial_id": trial_id, "n_wakes": 0, "n_failed": 0,
                                                                 "ok_n": 0}])


def build_and_check(connection) -> list:
    """capacity_history and metric_history from their SQL, their schema.yml tests (all must pass), then
    change_points. Its rows."""
    models = discover(MODELS)
    for name in MINE:
        build(connection, models[name])
    tests = load_tests(MODELS / "schema.yml", set(every_model(MODELS)))
    assert all(tests.get(name) for name in MINE)
    failed = [(outcome.test.model, outcome.test.name, outcome.sample)
              for name in MINE for outcome in (run_test(connection, test) for test in tests[name])
              if not outcome.passed]
    assert failed == []
    return replace_change_points(connection)


def history(warehouse) -> dict[str, list[float]]:
    """Configuration A: 12 trials, the last 6 with wake p99 30 % higher, trial 3 without wakes. B: 12 trials, no
    change. Upstream: 12 imported runs, the last 6 with 30 % fewer actors per node. Each one's wake p99s."""
    rng = random.Random(11)
    wakes = {"a": [noisy(200.0 if number <= 6 else 260.0, rng) for number in range(1, 13)],
             "b": [noisy(200.0, rng) for _ in range(1, 13)]}
    wakes["a"][2] = None
    for name, script in (("a", "aaa"), ("b", "bbb")):
        for number, wake in enumerate(wakes[name], start=1):
            native_trial(warehouse, f"{name}-{number:02}", number, script, wake, rng)
    for number in range(1, 13):
        imported_trial(warehouse, f"glutton_baseline_5_users-202601{number:02}t000000z", number,
                       noisy(10.0 if number <= 6 else 7.0, rng))
    return wakes


def test_a_step_in_wake_p99_is_one_regression_at_its_first_trial(warehouse):
    wakes = history(warehouse)
    build_and_check(warehouse)
    rows = fetch(warehouse, "SELECT * FROM change_points WHERE suite = 'ladder'")
    [configuration_a] = {row["configuration"] for row in
                         fetch(warehouse, "SELECT configuration FROM capacity_history WHERE trial_id = 'a-01'")}
    measured = [value for value in wakes["a"] if value is not None]
    before, after = statistics.fmean(measured[:5]), statistics.fmean(measured[5:])
    assert len(rows) == 1
    [row] = rows
    assert row == {
        "suite": "ladder", "configuration": configuration_a, "metric": "wake_p99_ms", "trial_id": "a-07",
        "trial_number": 7, "started_at": at(7), "sut_version": "v1", "previous_trial_id": "a-06",
        "mean_before": pytest.approx(before), "mean_after": pytest.approx(after),
        "change_pct": pytest.approx((after / before - 1) * 100), "p_value": row["p_value"], "direction": "regressed",
        "unit": "ms"}
    assert 0 <= row["p_value"] < 0.001 and 25 < row["change_pct"] < 35


def test_an_unmeasured_figure_has_no_row_and_is_not_filled(warehouse):
    history(warehouse)
    build_and_check(warehouse)
    a03 = fetch(warehouse, "SELECT metric, value FROM metric_history WHERE trial_id = 'a-03' ORDER BY metric")
    assert [row["metric"] for row in a03] == ["actors_per_gb_ram", "actors_per_node", "actors_per_vcpu",
                                              "capacity_users", "failure_ratio"]
    wake_trials = fetch(warehouse, "SELECT trial_number FROM metric_history WHERE trial_id LIKE 'a-%' "
                                   "AND metric = 'wake_p99_ms'")
    assert [row["trial_number"] for row in wake_trials] == [1, 2, *range(4, 13)]


def test_a_configuration_without_change_has_no_rows(warehouse):
    history(warehouse)
    build_and_check(warehouse)
    configurations = fetch(warehouse, "SELECT DISTINCT configuration FROM capacity_history WHERE trial_id LIKE 'b-%'")
    assert len(configurations) == 1
    assert fetch(warehouse, "SELECT * FROM change_points WHERE configuration = ?",
                 [configurations[0]["configuration"]]) == []
    assert len(fetch(warehouse, "SELECT * FROM metric_history WHERE configuration = ?",
                     [configurations[0]["configuration"]])) == 12 * 7


def test_imported_runs_take_part_in_the_history(warehouse):
    history(warehouse)
    build_and_check(warehouse)
    metrics = fetch(warehouse, "SELECT metric, count(*) AS trials, min(trial_number) AS first, "
                               "max(trial_number) AS last FROM metric_history "
                               "WHERE suite = 'glutton_baseline_5_users' GROUP BY metric ORDER BY metric")
    # No wakes recorded and no SLO: only the run's own density figures and failure ratio are measured.
    assert metrics == [{"metric": metric, "trials": 12, "first": 1, "last": 12}
                       for metric in ("actors_per_gb_ram", "actors_per_node", "actors_per_vcpu", "failure_ratio")]
    rows = fetch(warehouse, "SELECT metric, trial_id, previous_trial_id, sut_version, direction, unit "
                            "FROM change_points WHERE suite = 'glutton_baseline_5_users'")
    assert rows == [{"metric": metric, "trial_id": "glutton_baseline_5_users-20260107t000000z",
                     "previous_trial_id": "glutton_baseline_5_users-20260106t000000z", "sut_version": SHA,
                     "direction": "regressed", "unit": unit}
                    for metric, unit in (("actors_per_gb_ram", "actors/GiB"), ("actors_per_node", "actors"),
                                         ("actors_per_vcpu", "actors/vCPU"))]


METRIC_HISTORY_COLUMNS = [
    ("suite", "VARCHAR"), ("configuration", "VARCHAR"), ("trial_id", "VARCHAR"),
    ("started_at", "TIMESTAMP WITH TIME ZONE"), ("trial_number", "BIGINT"), ("sut_version", "VARCHAR"),
    ("metric", "VARCHAR"), ("value", "DOUBLE"), ("unit", "VARCHAR"), ("better", "VARCHAR"),
]


def test_the_tables_have_their_columns_in_order_and_change_points_is_replaced_whole(warehouse):
    history(warehouse)
    assert len(build_and_check(warehouse)) == 4
    assert [tuple(row[:2]) for row in warehouse.execute("DESCRIBE metric_history").fetchall()] == \
        METRIC_HISTORY_COLUMNS
    order = fetch(warehouse, "SELECT suite, configuration, metric, trial_number FROM metric_history")
    assert order == sorted(order, key=lambda row: tuple(row.values()))
    assert [tuple(row[:2]) for row in warehouse.execute("DESCRIBE change_points").fetchall()] == list(COLUMNS)
    order = fetch(warehouse, "SELECT suite, configuration, metric, trial_number FROM change_points")
    assert order == sorted(order, key=lambda row: tuple(row.values()))
    warehouse.execute("DELETE FROM wake_latency_distribution WHERE trial_id LIKE 'a-%'")
    assert len(build_and_check(warehouse)) == 3
    assert fetch(warehouse, "SELECT count(*) AS n FROM change_points") == [{"n": 3}]


def test_build_marts_builds_change_points_after_metric_history_even_without_history(tmp_path):
    with connect(tmp_path / "empty.duckdb") as connection:
        ensure_schema(connection)
        marts = build_marts(connection)
        built, outcomes = marts.tables, marts.tests
        names = [table.name for table in built]
        assert names.index("change_points") > names.index("metric_history")
        assert all(outcome.passed for outcome in outcomes)
        [table] = [table for table in built if table.name == "change_points"]
        assert (table.rows, table.columns) == (0, list(COLUMNS))


def test_the_asset_reports_the_change_points(warehouse, path):
    history(warehouse)
    build_and_check(warehouse)
    warehouse.close()
    [marts] = model_assets()
    result = dg.materialize([marts], selection=[dg.AssetKey("change_points")],
                            instance=dg.DagsterInstance.ephemeral(),
                            resources={"warehouse": WarehouseResource(database=str(path))})
    [materialization] = result.asset_materializations_for_node(marts.node_def.name)  # only change_points selected
    metadata = materialization.metadata
    assert metadata["dagster/row_count"].value == 4
    table = metadata["change_points"].value.splitlines()
    assert len(table) == 2 + 4
    [wake] = [line for line in table if "wake_p99_ms" in line]
    cells = [cell.strip() for cell in wake.strip("|").split("|")]
    assert cells[2:4] == ["wake_p99_ms", "a-07 (#7)"] and cells[-1] == "regressed"
    assert cells[5].endswith(" ms") and len(cells[5].split()[0].split(".")[1]) == 1  # ms to 0.1
    assert cells[7].startswith("+") and cells[7].endswith(" %") and len(cells[7].split()[0].split(".")[1]) == 1
    assert not [key for key in metadata if key.startswith("history/")]  # drawn after it is recorded
    [observation] = result.asset_observations_for_node(marts.node_def.name)
    assert observation.asset_key == dg.AssetKey("change_points")
    histories = [key for key in observation.metadata if key.startswith("history/")]
    assert histories and all(observation.metadata[key].value.startswith("![history of suite ")
                             for key in histories)
    recorded = (dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION)
    assert [event.event_type for event in result.all_node_events if event.event_type in recorded] == list(recorded)


def test_change_points_and_noise_floor_are_assets_only_beside_the_model_they_read(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    assert model_assets() == []  # a project without models: nothing to read, no asset to fail
    (tmp_path / "dbt_like_sql").mkdir()
    (tmp_path / "dbt_like_sql" / "metric_history.sql").write_text("SELECT 1 AS value")
    assert {key.to_user_string() for asset in model_assets() for key in asset.keys} == {"metric_history",
                                                                                        "change_points",
                                                                                        "noise_floor"}


def series(values: list[float], metric: str = "wake_p50_ms") -> list:
    from substrate_assets.warehouse.change_points import Measurement

    return [Measurement("s", "cfg", metric, f"t-{n:03d}", n, at(n), "v1", value, "ms", "lower")
            for n, value in enumerate(values, start=1)]


def test_an_a_a_history_of_trial_level_figures_shows_no_change_point():
    """Identical configurations, trial after trial: 100 seeded histories of 40 trials whose figures move 12 % from
    trial to trial (log-normal), with an isolated outlying trial (three times the level) now and then, as this
    machine's wake p50 has under load. The noise gate (a change at least the series' own trial-to-trial spread,
    between the levels' medians) leaves none, the last trials of a series included."""
    from substrate_assets.warehouse.change_points import series_changes

    found = 0
    for seed in range(100):
        rng = random.Random(seed)
        values, last_outlier = [], -10
        for number in range(40):
            outlier = rng.random() < 0.05 and number - last_outlier > 4
            last_outlier = number if outlier else last_outlier
            values.append(100.0 * rng.lognormvariate(0, 0.12) * (3.0 if outlier else 1.0))
        found += len(series_changes(series(values)))
    assert found == 0


def test_a_step_of_three_noise_floors_is_still_found():
    """A level that moves by three times the series' trial-to-trial spread (12 %: +40 %) after 20 trials is one
    regression at its first trial, through the gate."""
    from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS
    from substrate_assets.warehouse.change_points import above_the_noise, series_changes

    rng = random.Random(7)
    values = [100.0 * rng.lognormvariate(0, 0.12) for _ in range(20)] + \
             [140.0 * rng.lognormvariate(0, 0.12) for _ in range(20)]
    gated = above_the_noise(values, DEFAULT_PARAMETERS)
    assert gated.min_magnitude > 0.05
    [change] = series_changes(series(values))
    assert (change.trial_number, change.direction) == (21, "regressed")


def test_a_change_point_a_refresh_finds_is_a_warning_naming_it_once(warehouse, path):
    history(warehouse)
    build_and_check(warehouse)
    warehouse.execute("DELETE FROM change_points")  # as before the trials that moved the levels landed
    warehouse.close()
    [marts] = model_assets()

    def judged() -> dg.AssetCheckEvaluation:
        result = dg.materialize([marts], selection=dg.AssetSelection.assets("change_points"),
                                instance=dg.DagsterInstance.ephemeral(),
                                resources={"warehouse": WarehouseResource(database=str(path))})
        [evaluation] = [found for found in result.get_asset_check_evaluations()
                        if found.check_name == "no_new_change_point"]
        return evaluation

    found = judged()
    assert not found.passed and found.severity == dg.AssetCheckSeverity.WARN
    assert found.metadata["new_change_points"].value == 4
    assert "ladder wake_p99_ms regressed +" in found.description and "at trial a-07 (after a-06)" in found.description
    assert len(found.metadata["found"].value.splitlines()) == 2 + 4
    # The next refresh finds the same change points: nothing new to warn of.
    again = judged()
    assert again.passed and again.metadata["new_change_points"].value == 0 and "found" not in again.metadata
