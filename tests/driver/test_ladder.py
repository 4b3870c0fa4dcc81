"""A real step ladder: Locust's LoadTestShape against the embedded runtime, its load steps, and every load point's
figures checked against the exact request samples of that step's window."""

import itertools
import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from substrate_assets.analysis.statistics import floor_index
from substrate_assets.driver.trial import run_local_trial
from substrate_assets.project import code_version
from substrate_assets.results.layout import RunStore
from substrate_assets.results.load_steps import read_load_steps
from substrate_assets.results.readers import read_requests, read_stats_history
from substrate_assets.results.trial_directory import TOTAL_ROW_NAMES, TrialDirectory
from substrate_assets.suites import Suite
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from substrate_assets.workload import ScriptLibrary

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
STEPS = (1, 2, 3)
HOLD_S = 8


@pytest.fixture(scope="module")
def ladder_trial(tmp_path_factory):
    """Three steps of quick-session (one lap of think is 0.7 s at scale 0.2), loaded into a real warehouse."""
    suite = Suite.model_validate({
        "name": "quick-ladder", "script": "quick-session", "think_scale": 0.2, "spawn_rate": 4,
        "ladder": {"users": list(STEPS), "hold": f"{HOLD_S}s"},
        # A wake never takes an hour and no request fails here: every point meets, so the knee is not reached.
        "slo": {"wake_p99_ms": 3_600_000, "failure_ratio": 0.5},
        "workers": 2, "actors_per_worker": 2})
    store = RunStore(tmp_path_factory.mktemp("store"))
    result = run_local_trial(suite, store, ScriptLibrary(SCRIPTS))
    warehouse = tmp_path_factory.mktemp("warehouse") / "w.duckdb"
    with connect(warehouse) as connection:
        load_trials(connection, [TrialDirectory(Path(result.trial_dir))])
        outcomes = build_marts(connection).tests
    assert [outcome.test.name for outcome in outcomes if not outcome.passed] == []
    return result, Path(result.trial_dir), warehouse


def rows(warehouse: Path, sql: str, parameters: list | None = None) -> list[dict]:
    with connect(warehouse, read_only=True) as connection:
        cursor = connection.execute(sql, parameters or [])
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_the_shape_ran_each_step_in_turn(ladder_trial):
    result, trial_dir, _ = ladder_trial
    assert result.completed, result
    manifest = json.loads((trial_dir / "trial.json").read_text())
    assert "--ladder" in manifest["locust_command"] and "-u" not in manifest["locust_command"]
    assert manifest["knobs"]["ladder"] == list(STEPS) and manifest["knobs"]["users"] == 3
    assert manifest["sut_version"] == code_version()  # the embedded runtime is this checkout
    steps = read_load_steps(trial_dir / "load_steps.json")
    assert [(step.step, step.target_users, step.hold_s) for step in steps] == [(1, 1, 8), (2, 2, 8), (3, 3, 8)]
    for before, after in itertools.pairwise(steps):
        assert before.started_at < before.ended_at == after.started_at  # one step ends as the next begins
    # The shape ends the ladder by Locust's run time, never early, however late a busy machine ticks.
    assert steps[-1].ended_at - steps[0].started_at >= len(STEPS) * HOLD_S - 0.5
    for step in steps:
        assert step.started_at <= step.window_start <= step.window_end <= step.ended_at
        assert step.whole_step_because is None and step.complete
        assert step.server_summary is not None and step.server_summary["metadata"]["steady_start_ts"] == \
            step.window_start
    # The user count reached each step's target inside its window.
    history = read_stats_history(trial_dir / "stats_history.csv").filter(pl.col("name").is_in(TOTAL_ROW_NAMES))
    for step in steps:
        inside = history.filter(pl.col("timestamp").is_between(step.window_start, step.window_end))
        assert inside["user_count"].max() == step.target_users


def test_every_load_point_matches_the_requests_of_its_window(ladder_trial):
    _, trial_dir, warehouse = ladder_trial
    requests = read_requests(trial_dir / "requests.parquet").filter(pl.col("locust_counted").is_not_null()
                                                                     & pl.col("locust_counted"))
    points = rows(warehouse, "SELECT * FROM load_points ORDER BY step")
    assert [point["step"] for point in points] == [1, 2, 3]
    for point in points:
        # The history row stamped window_end_ts was written during that second: requests in it are in the window.
        window = requests.filter((pl.col("ts") >= point["window_start_ts"]) & (pl.col("ts") < point["window_end_ts"] + 1))
        wakes = sorted(window.filter(pl.col("name") == "WakeFirstTouch")["latency_ms"].to_list())
        assert wakes, f"step {point['step']} measured no wake"
        assert point["wake_n"] == len(wakes)
        assert point["wake_p50_ms"] == floor_index(wakes, 500)
        assert point["wake_p90_ms"] == floor_index(wakes, 900)
        assert point["wake_p99_ms"] == floor_index(wakes, 990)
        assert point["wake_max_ms"] == wakes[-1]
        assert point["requests"] == window.height
        assert point["failure_ratio"] == window.filter(~pl.col("success")).height / window.height
        assert point["users"] == point["target_users"] == point["step"]
        assert point["complete"] and point["recorded"] and point["hold_s"] == HOLD_S
        assert point["actors"] == point["users"]  # one actor per agent session
        assert point["checkpoints_in_window"] is not None  # the step's own telemetry, from the runtime's events


def test_capacity_under_the_suites_slo(ladder_trial):
    _, _, warehouse = ladder_trial
    [capacity] = rows(warehouse, "SELECT * FROM slo_capacity")
    assert capacity["slo_wake_p99_ms"] == 3_600_000 and capacity["slo_failure_ratio"] == 0.5
    assert (capacity["points"], capacity["complete_points"], capacity["planned_steps"]) == (3, 3, 3)
    assert capacity["capacity_step"] == 3 and capacity["capacity_users"] == 3
    assert capacity["knee_step"] is None
    assert capacity["knee_null_because"] == "the SLO is not broken within the ladder"


def test_the_command_line_prints_the_points_and_the_capacity(ladder_trial, monkeypatch):
    from substrate_assets.cli.job_results import show_capacity

    result, _, warehouse = ladder_trial
    monkeypatch.setenv("SUBSTRATE_BENCH_WAREHOUSE", str(warehouse))
    console = Console(record=True, width=250)
    show_capacity(console, result.trial_id)
    text = console.export_text()
    assert f"load_points ({result.trial_id})" in text and f"slo_capacity ({result.trial_id})" in text
    assert "the SLO is not broken within the ladder" in text
