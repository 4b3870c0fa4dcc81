"""slo_capacity and capacity_history through their real SQL, on a DuckDB file filled by hand.

load_points is another model's table: here it is a plain table with that model's columns, rows written by hand.
Every build also runs the schema.yml tests of both models over the rows, and they must all pass.
"""

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from substrate_assets.warehouse.checks import load_tests, run_test
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.build import build
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.raw_tables import ensure_schema
from tests.support.raw_rows import insert

MODELS = Path(__file__).resolve().parents[2] / "dbt_like_sql"
MINE = ("slo_capacity", "capacity_history")

LOAD_POINTS_DDL = """
CREATE TABLE load_points (
    trial_id VARCHAR, step INTEGER, target_users INTEGER, users DOUBLE, actors DOUBLE, actors_per_node DOUBLE,
    actors_per_vcpu DOUBLE, actors_per_gb_ram DOUBLE, window_start_ts BIGINT, window_end_ts BIGINT, wake_n BIGINT,
    wake_p50_ms DOUBLE, wake_p90_ms DOUBLE, wake_p99_ms DOUBLE, wake_max_ms DOUBLE, requests BIGINT,
    failed_requests BIGINT, failure_ratio DOUBLE, hold_s BIGINT, complete BOOLEAN, recorded BOOLEAN
)"""

SLO_CAPACITY_COLUMNS = [
    "trial_id", "suite", "slo_wake_p99_ms", "slo_failure_ratio", "points", "planned_steps", "complete_points",
    "capacity_step", "capacity_target_users", "capacity_users", "capacity_actors", "capacity_actors_per_node",
    "capacity_actors_per_vcpu", "capacity_actors_per_gb_ram", "capacity_wake_p99_ms", "capacity_failure_ratio",
    "capacity_null_because",
    "knee_step", "knee_target_users", "knee_users", "knee_actors", "knee_actors_per_node", "knee_wake_p99_ms",
    "knee_failure_ratio", "broken_by", "knee_null_because",
    "met_above_knee", "highest_meeting_step", "highest_meeting_users",
]
CAPACITY_HISTORY_COLUMNS = [
    "configuration", "script_sha256", "sandbox_class", "lifecycle_mode", "actor_memory", "sut_version",
    "machine_type", "slo_wake_p99_ms", "slo_failure_ratio", "think_scale", "ladder", "node_count", "users",
    "actors_per_user", "duration_s", "inject_wake_delay_ms", "suite", "trial_id",
    "started_at", "trial_number",
    "capacity_users", "capacity_actors_per_node", "capacity_actors_per_vcpu", "capacity_actors_per_gb_ram",
    "capacity_wake_p99_ms", "knee_users", "broken_by", "capacity_null_because",
    "previous_trial_id", "previous_capacity_users", "capacity_change_users",
]

NO_SLO = "the suite sets no SLO"
UNMEASURED = "no complete load point measured the SLO's figures"
NO_POINTS = "the trial has no load points"
STOPPED = "the SLO is not broken in the steps that ran: the trial stopped before its ladder ended"
BROKEN_AT_LOWEST = "the SLO is broken at the lowest measured load point"
NOT_BROKEN = "the SLO is not broken within the ladder"


@pytest.fixture
def warehouse(tmp_path):
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        connection.execute(LOAD_POINTS_DDL)
        yield connection


def manifest(trial_id: str, wake: float | None = None, failure: float | None = None, **extra) -> dict:
    return {"trial_id": trial_id, "suite": "ladder", "backend": "kubernetes", "users": 40, "actors_per_user": 2,
            "completed": True, "slo_wake_p99_ms": wake, "slo_failure_ratio": failure, "planned_steps": 1, **extra}


def point(trial_id: str, step: int, wake_p99_ms: float | None, failure_ratio: float | None) -> dict:
    """A load point whose figures all follow from its step (10 users a step, 2 actors a user, 4 nodes...)."""
    users = 10.0 * step
    return {"trial_id": trial_id, "step": step, "target_users": 10 * step, "users": users, "actors": 2 * users,
            "actors_per_node": 2 * users / 4, "actors_per_vcpu": 2 * users / 16, "actors_per_gb_ram": 2 * users / 64,
            "window_start_ts": 1000 * step, "window_end_ts": 1000 * step + 600, "wake_n": 0 if wake_p99_ms is None else 50,
            "wake_p50_ms": None if wake_p99_ms is None else wake_p99_ms / 4,
            "wake_p90_ms": None if wake_p99_ms is None else wake_p99_ms / 2, "wake_p99_ms": wake_p99_ms,
            "wake_max_ms": None if wake_p99_ms is None else wake_p99_ms * 2,
            "requests": 0 if failure_ratio is None else 1000,
            "failed_requests": 0 if failure_ratio is None else round(1000 * failure_ratio),
            "failure_ratio": failure_ratio, "hold_s": 600, "complete": True, "recorded": True}


def ladder(connection, trial_id: str, figures: list[tuple[float | None, float | None]],
           wake: float | None = None, failure: float | None = None, planned: int | None = None,
           cut_short: bool = False, **manifested) -> list[dict]:
    """A trial with an SLO and one load point per (wake_p99_ms, failure_ratio), steps 1, 2, ... of ``planned``
    (default: as many as the figures); with ``cut_short`` the trial stopped during its last point; ``manifested``
    more fields of its manifest. Its points."""
    insert(connection, "trial_manifests", [manifest(trial_id, wake, failure, planned_steps=planned or len(figures),
                                                    **manifested)])
    points = [point(trial_id, step, *pair) for step, pair in enumerate(figures, start=1)]
    if cut_short:
        points[-1]["complete"] = False
    columns = list(points[0])
    connection.executemany(f"INSERT INTO load_points ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           [[p[c] for c in columns] for p in points])
    return points


def fetch(connection, sql: str, parameters: list | None = None) -> list[dict]:
    cursor = connection.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def build_and_check(connection) -> None:
    """Build the two models in order, then every schema.yml test of theirs, each of which must pass."""
    models = discover(MODELS)
    for name in MINE:
        build(connection, models[name])
    tests = load_tests(MODELS / "schema.yml", set(every_model(MODELS)))
    assert {name: len(tests.get(name, [])) > 0 for name in MINE} == dict.fromkeys(MINE, True)
    failed = [(outcome.test.model, outcome.test.name, outcome.test.argument, outcome.sample)
              for name in MINE for outcome in (run_test(connection, test) for test in tests[name])
              if not outcome.passed]
    assert failed == []


def capacity(connection, trial_id: str) -> dict:
    rows = fetch(connection, "SELECT * FROM slo_capacity WHERE trial_id = ?", [trial_id])
    assert len(rows) == 1
    return rows[0]


def expected(trial_id: str, points: list[dict], *, wake: float | None = None, failure: float | None = None,
             capacity_step: int | None, knee_step: int | None, broken_by: str | None = None,
             capacity_null_because: str | None = None, knee_null_because: str | None = None,
             met_above_knee: int | None = None, highest_meeting_step: int | None = None,
             planned: int | None = None) -> dict:
    """The whole slo_capacity row, its figures copied from the chosen points."""
    by_step = {p["step"]: p for p in points}
    cap = by_step.get(capacity_step, {})
    knee = by_step.get(knee_step, {})
    return {
        "trial_id": trial_id, "suite": "ladder", "slo_wake_p99_ms": wake, "slo_failure_ratio": failure,
        "points": len(points), "planned_steps": planned or len(points),
        "complete_points": sum(1 for p in points if p["complete"]),
        "capacity_step": capacity_step, "capacity_target_users": cap.get("target_users"),
        "capacity_users": cap.get("users"), "capacity_actors": cap.get("actors"),
        "capacity_actors_per_node": cap.get("actors_per_node"), "capacity_actors_per_vcpu": cap.get("actors_per_vcpu"),
        "capacity_actors_per_gb_ram": cap.get("actors_per_gb_ram"), "capacity_wake_p99_ms": cap.get("wake_p99_ms"),
        "capacity_failure_ratio": cap.get("failure_ratio"), "capacity_null_because": capacity_null_because,
        "knee_step": knee_step, "knee_target_users": knee.get("target_users"), "knee_users": knee.get("users"),
        "knee_actors": knee.get("actors"), "knee_actors_per_node": knee.get("actors_per_node"),
        "knee_wake_p99_ms": knee.get("wake_p99_ms"), "knee_failure_ratio": knee.get("failure_ratio"),
        "broken_by": broken_by, "knee_null_because": knee_null_because,
        "met_above_knee": met_above_knee, "highest_meeting_step": highest_meeting_step,
        "highest_meeting_users": by_step.get(highest_meeting_step, {}).get("users"),
    }


def test_columns(warehouse):
    ladder(warehouse, "t", [(10.0, 0.0)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert list(capacity(warehouse, "t")) == SLO_CAPACITY_COLUMNS
    assert [row[0] for row in warehouse.execute("DESCRIBE capacity_history").fetchall()] == CAPACITY_HISTORY_COLUMNS


def test_every_point_meets_capacity_is_the_top_and_no_knee(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.0), (50.0, 0.005), (100.0, 0.01)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    # Equal to the threshold meets it.
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, failure=0.01, capacity_step=3, knee_step=None,
                                                knee_null_because=NOT_BROKEN, highest_meeting_step=3)


def test_lowest_point_breaks_no_capacity_knee_at_one(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.2), (20.0, 0.3)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, failure=0.01, capacity_step=None,
                                                knee_step=1, broken_by="failure_ratio",
                                                capacity_null_because=BROKEN_AT_LOWEST, met_above_knee=0)


def test_knee_in_the_middle(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.0), (60.0, 0.0), (150.0, 0.0), (400.0, 0.0)], wake=100.0,
                    failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, failure=0.01, capacity_step=2, knee_step=3,
                                                broken_by="wake_p99_ms", met_above_knee=0, highest_meeting_step=2)


def test_noisy_ladder_keeps_capacity_below_the_knee(warehouse):
    # Meets, breaks, meets again: the third point does not count as capacity, but is recorded.
    points = ladder(warehouse, "t", [(10.0, 0.0), (150.0, 0.0), (90.0, 0.0), (300.0, 0.0)], wake=100.0)
    build_and_check(warehouse)
    row = capacity(warehouse, "t")
    assert row == expected("t", points, wake=100.0, capacity_step=1, knee_step=2, broken_by="wake_p99_ms",
                           met_above_knee=1, highest_meeting_step=3)
    assert (row["capacity_users"], row["highest_meeting_users"]) == (10.0, 30.0)


def test_only_wake_threshold_set_failure_ratio_does_not_matter(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.9), (20.0, None), (300.0, 1.0)], wake=100.0)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, capacity_step=2, knee_step=3,
                                                broken_by="wake_p99_ms", met_above_knee=0, highest_meeting_step=2)


def test_only_failure_threshold_set_wake_does_not_matter(warehouse):
    points = ladder(warehouse, "t", [(1e9, 0.0), (None, 0.001), (5e9, 0.05)], failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, failure=0.01, capacity_step=2, knee_step=3,
                                                broken_by="failure_ratio", met_above_knee=0, highest_meeting_step=2)


def test_both_thresholds_break_at_the_knee(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.0), (500.0, 0.5)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, failure=0.01, capacity_step=1, knee_step=2,
                                                broken_by="wake_p99_ms, failure_ratio", met_above_knee=0,
                                                highest_meeting_step=1)


def test_unmeasured_point_neither_meets_nor_breaks(warehouse):
    # Step 2 has no wake_p99_ms: skipped, so capacity is step 3 (below the knee at 4).
    skipped = ladder(warehouse, "skipped", [(10.0, 0.0), (None, 0.0), (20.0, 0.0), (200.0, 0.0)], wake=100.0,
                     failure=0.01)
    # Step 1 unmeasured, step 2 breaks: the lowest *measured* point breaks.
    below = ladder(warehouse, "below", [(None, 0.0), (200.0, 0.0)], wake=100.0, failure=0.01)
    # failure_ratio null (no requests) with a failure threshold: unmeasured even though wake meets; a wake that
    # exceeds still breaks when failure_ratio is unmeasured.
    partial = ladder(warehouse, "partial", [(10.0, 0.0), (20.0, None), (200.0, None)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "skipped") == expected(
        "skipped", skipped, wake=100.0, failure=0.01, capacity_step=3, knee_step=4, broken_by="wake_p99_ms",
        met_above_knee=0, highest_meeting_step=3)
    assert capacity(warehouse, "below") == expected(
        "below", below, wake=100.0, failure=0.01, capacity_step=None, knee_step=2, broken_by="wake_p99_ms",
        capacity_null_because=BROKEN_AT_LOWEST, met_above_knee=0)
    assert capacity(warehouse, "partial") == expected(
        "partial", partial, wake=100.0, failure=0.01, capacity_step=1, knee_step=3, broken_by="wake_p99_ms",
        met_above_knee=0, highest_meeting_step=1)


def test_every_point_unmeasured(warehouse):
    wake_only = ladder(warehouse, "wake_only", [(None, 0.0), (None, 0.9)], wake=100.0)
    failure_only = ladder(warehouse, "failure_only", [(10.0, None)], failure=0.01)
    # Each point measures one figure, meets it, and lacks the other: still no point measured the SLO.
    halves = ladder(warehouse, "halves", [(10.0, None), (None, 0.0)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "wake_only") == expected(
        "wake_only", wake_only, wake=100.0, capacity_step=None, knee_step=None,
        capacity_null_because=UNMEASURED, knee_null_because=UNMEASURED)
    assert capacity(warehouse, "failure_only") == expected(
        "failure_only", failure_only, failure=0.01, capacity_step=None, knee_step=None,
        capacity_null_because=UNMEASURED, knee_null_because=UNMEASURED)
    assert capacity(warehouse, "halves") == expected(
        "halves", halves, wake=100.0, failure=0.01, capacity_step=None, knee_step=None,
        capacity_null_because=UNMEASURED, knee_null_because=UNMEASURED)


def test_no_slo(warehouse):
    points = ladder(warehouse, "t", [(10.0, 0.0), (1e9, 1.0)])
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, capacity_step=None, knee_step=None,
                                                capacity_null_because=NO_SLO, knee_null_because=NO_SLO)


def test_flat_trial_is_a_ladder_of_one(warehouse):
    meets = ladder(warehouse, "meets", [(50.0, 0.0)], wake=100.0, failure=0.01)
    breaks = ladder(warehouse, "breaks", [(50.0, 0.02)], wake=100.0, failure=0.01)
    build_and_check(warehouse)
    assert capacity(warehouse, "meets") == expected("meets", meets, wake=100.0, failure=0.01, capacity_step=1,
                                                    knee_step=None, knee_null_because=NOT_BROKEN,
                                                    highest_meeting_step=1)
    assert capacity(warehouse, "breaks") == expected("breaks", breaks, wake=100.0, failure=0.01, capacity_step=None,
                                                     knee_step=1, broken_by="failure_ratio",
                                                     capacity_null_because=BROKEN_AT_LOWEST, met_above_knee=0)


def test_a_trial_without_load_points_has_a_row_saying_so(warehouse):
    """No session started, or no step's start was recorded: the trial stays in its configuration's history."""
    ladder(warehouse, "t", [(10.0, 0.0)], wake=100.0)
    insert(warehouse, "trial_manifests", [manifest("none", 100.0)])
    build_and_check(warehouse)
    [row] = fetch(warehouse, "SELECT * FROM slo_capacity WHERE trial_id = 'none'")
    assert (row["points"], row["complete_points"], row["capacity_step"], row["knee_step"]) == (0, 0, None, None)
    assert row["capacity_null_because"] == row["knee_null_because"] == NO_POINTS
    assert [row["trial_id"] for row in fetch(warehouse, "SELECT trial_id FROM capacity_history ORDER BY 1")] == \
        ["none", "t"]


def test_a_point_cut_short_is_not_judged(warehouse):
    """The trial stopped during step 3 of 4: that point broke the SLO, but ran seconds, not its hold."""
    points = ladder(warehouse, "t", [(10.0, 0.0), (20.0, 0.0), (900.0, 0.0)], wake=100.0, planned=4,
                    cut_short=True)
    build_and_check(warehouse)
    assert capacity(warehouse, "t") == expected("t", points, wake=100.0, capacity_step=2, knee_step=None,
                                                knee_null_because=STOPPED, highest_meeting_step=2, planned=4)
    alone = ladder(warehouse, "alone", [(900.0, 0.0)], wake=100.0, planned=4, cut_short=True)
    build_and_check(warehouse)
    assert capacity(warehouse, "alone") == expected("alone", alone, wake=100.0, capacity_step=None, knee_step=None,
                                                    capacity_null_because=UNMEASURED, knee_null_because=UNMEASURED,
                                                    planned=4)


def configuration_id(**values) -> str:
    keys = ("script_sha256", "sandbox_class", "lifecycle_mode", "actor_memory", "machine_type",
            "slo_wake_p99_ms", "slo_failure_ratio", "think_scale", "ladder", "node_count", "users", "actors_per_user",
            "duration_s")
    text = json.dumps({key: values.get(key) for key in keys}, separators=(",", ":"))
    if values.get("inject_wake_delay_ms") is not None:
        text += f" inject_wake_delay_ms={values['inject_wake_delay_ms']}"
    return hashlib.md5(text.encode()).hexdigest()[:12]


def at(hour: int) -> datetime:
    return datetime(2025, 1, 1, hour, tzinfo=UTC)


def test_capacity_history_groups_trials_by_configuration(warehouse):
    config_a = {"script_sha256": "aaa", "lifecycle_mode": "suspend", "actor_memory": "1Gi", "sut_version": "v1"}
    facts_a = {"sandbox_class": "gvisor", "machine_type": "e2-standard-4"}
    # Configuration A: three trials, out of order by id, one without started_at (last) and one without capacity.
    ladder(warehouse, "a-late", [(10.0, 0.0), (20.0, 0.0), (30.0, 0.0)], wake=100.0)
    ladder(warehouse, "a-first", [(10.0, 0.0), (200.0, 0.0)], wake=100.0)
    ladder(warehouse, "a-broken", [(500.0, 0.0)], wake=100.0)
    ladder(warehouse, "a-undated", [(10.0, 0.0), (20.0, 0.0)], wake=100.0)
    insert(warehouse, "trial_manifests", [
        manifest("a-late", 100.0, started_at=at(3), **config_a),
        manifest("a-first", 100.0, started_at=at(1), **config_a),
        manifest("a-broken", 100.0, started_at=at(2), **config_a),
        manifest("a-undated", 100.0, **config_a),
    ])
    insert(warehouse, "cluster_facts", [{"trial_id": t, **facts_a} for t in ("a-late", "a-first", "a-broken",
                                                                              "a-undated")])
    # Configuration B: only the script known; one trial has a cluster_facts row of nulls, the other none at all,
    # and both start at the same moment (trial_id decides).
    ladder(warehouse, "b-2", [(10.0, 0.0), (20.0, 0.0)], wake=100.0)
    ladder(warehouse, "b-1", [(10.0, 0.0), (20.0, 0.0), (30.0, 0.0), (40.0, 0.0)], wake=100.0)
    insert(warehouse, "trial_manifests", [manifest("b-2", 100.0, started_at=at(5), script_sha256="bbb"),
                                          manifest("b-1", 100.0, started_at=at(5), script_sha256="bbb")])
    insert(warehouse, "cluster_facts", [{"trial_id": "b-1"}])
    build_and_check(warehouse)

    load = {"users": 40, "actors_per_user": 2}  # every manifest's (and no node count, duration)
    a = configuration_id(**config_a, **facts_a, **load, slo_wake_p99_ms=100.0)
    b = configuration_id(script_sha256="bbb", **load, slo_wake_p99_ms=100.0)
    assert a != b

    def row(configuration, trial_id, started_at, number, users, previous_trial, previous, change, knee_users=None,
            broken_by=None, because=None):
        config = {**config_a, **facts_a, **load, "slo_wake_p99_ms": 100.0} if configuration == a else \
            {"script_sha256": "bbb", **load, "slo_wake_p99_ms": 100.0}
        # Every point's wake_p99_ms here is its users in ms, and its actors per node, vCPU, GiB users / 2, 8, 32.
        return {"configuration": configuration,
                **{key: config.get(key) for key in CAPACITY_HISTORY_COLUMNS[1:16]},
                "suite": "ladder", "trial_id": trial_id, "started_at": started_at, "trial_number": number,
                "capacity_users": users,
                "capacity_actors_per_node": None if users is None else users / 2,
                "capacity_actors_per_vcpu": None if users is None else users / 8,
                "capacity_actors_per_gb_ram": None if users is None else users / 32,
                "capacity_wake_p99_ms": users,
                "knee_users": knee_users, "broken_by": broken_by, "capacity_null_because": because,
                "previous_trial_id": previous_trial, "previous_capacity_users": previous,
                "capacity_change_users": change}

    rows_a = [
        row(a, "a-first", at(1), 1, 10.0, None, None, None, knee_users=20.0, broken_by="wake_p99_ms"),
        # No capacity: no change from it, nor to the next trial.
        row(a, "a-broken", at(2), 2, None, "a-first", 10.0, None, knee_users=10.0, broken_by="wake_p99_ms",
            because=BROKEN_AT_LOWEST),
        row(a, "a-late", at(3), 3, 30.0, "a-broken", None, None),
        row(a, "a-undated", None, 4, 20.0, "a-late", 30.0, -10.0),
    ]
    rows_b = [
        row(b, "b-1", at(5), 1, 40.0, None, None, None),
        row(b, "b-2", at(5), 2, 20.0, "b-1", 40.0, -20.0),
    ]
    assert fetch(warehouse, "SELECT * FROM capacity_history") == (rows_a + rows_b if a < b else rows_b + rows_a)


def test_an_injected_wake_delay_is_another_configuration_and_leaves_the_others_ids(warehouse):
    """A trial with a wake delay injected is a configuration of its own; one without keeps the id it had before the
    delay was a column (the delay joins the configuration's JSON only when set)."""
    ladder(warehouse, "plain", [(10.0, 0.0)], wake=100.0)
    ladder(warehouse, "delayed", [(10.0, 0.0)], wake=100.0, inject_wake_delay_ms=45)
    build_and_check(warehouse)
    rows = {row["trial_id"]: row for row in fetch(warehouse, "SELECT * FROM capacity_history")}
    load = {"users": 40, "actors_per_user": 2, "slo_wake_p99_ms": 100.0}
    assert rows["plain"]["configuration"] == configuration_id(**load)
    assert rows["delayed"]["configuration"] == configuration_id(**load, inject_wake_delay_ms=45)
    assert rows["delayed"]["inject_wake_delay_ms"] == 45 and rows["delayed"]["trial_number"] == 1


def test_a_changed_slo_is_another_configuration(warehouse):
    """Capacity under 1000 ms and under 800 ms answer two questions: neither is the other's baseline."""
    ladder(warehouse, "strict", [(10.0, 0.0)], wake=800.0)
    ladder(warehouse, "loose", [(10.0, 0.0)], wake=1000.0)
    build_and_check(warehouse)
    rows = fetch(warehouse, "SELECT configuration, trial_number FROM capacity_history")
    assert len({row["configuration"] for row in rows}) == 2 and {row["trial_number"] for row in rows} == {1}


def test_the_load_is_part_of_the_configuration_and_each_suite_a_series_of_its_own(warehouse):
    """Twice the users is another question (its densities differ by construction); the same configuration run by two
    suites is two series."""
    ladder(warehouse, "eight-1", [(10.0, 0.0)], wake=100.0, users=8)
    ladder(warehouse, "eight-2", [(10.0, 0.0)], wake=100.0, users=8)
    ladder(warehouse, "four", [(10.0, 0.0)], wake=100.0, users=4)
    ladder(warehouse, "other", [(10.0, 0.0)], wake=100.0, users=8, suite="other-suite")
    build_and_check(warehouse)
    rows = {row["trial_id"]: row for row in fetch(warehouse, "SELECT * FROM capacity_history")}
    assert rows["eight-1"]["configuration"] == rows["eight-2"]["configuration"] == rows["other"]["configuration"]
    assert rows["four"]["configuration"] != rows["eight-1"]["configuration"]
    assert (rows["eight-2"]["trial_number"], rows["eight-2"]["previous_trial_id"]) == (2, "eight-1")
    assert (rows["other"]["trial_number"], rows["other"]["previous_trial_id"]) == (1, None)

