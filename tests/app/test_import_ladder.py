"""An upstream ladder run imported through the real ``import`` command into a real DuckDB warehouse: one load point
per step, read off its stats_history.csv by the native ladders' steady-window rule, and its report draws the ladder.
The run (tests/data/upstream_ladder_runs/, made by its make_runs.py) is held out: four steps of unequal holds, unlike
the three equal steps the rule was developed on (tests/telemetry/test_history_steps.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.projects import make_project, project_env

ROOT = Path(__file__).resolve().parents[2]
LADDER_RUNS = ROOT / "tests" / "data" / "upstream_ladder_runs"
LADDER = "glutton_slo_ladder-20261124t000000z"
CLI = str(Path(sys.executable).parent / "substrate-bench")
RUN_TS = 1795478400


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def sql(env: dict[str, str], query: str) -> list[dict]:
    done = run(env, "sql", query, "--format", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    project = tmp_path_factory.mktemp("ladder")
    env = project_env(make_project(project / "project", "suites: []\n"))
    upstream = project / "upstream"
    shutil.copytree(LADDER_RUNS / "runs", upstream / "runs")
    done = run(env, "import", str(upstream), "--slo-failure-ratio", "0.01")
    assert done.returncode == 0, done.stderr[-3000:]
    assert LADDER in done.stdout
    return env, project


def test_an_imported_ladder_has_one_load_point_per_step(imported):
    env, _ = imported
    points = sql(env, "SELECT step, points, target_users, hold_s, users, complete, recorded, started_at, ended_at, "
                      "window_start_ts, window_end_ts, whole_step_because FROM load_points ORDER BY step")
    # Steps 5:20s, 10:30s, 15:25s, 20:40s at 2 users/s: each step's ramp rows (below 0.9 x its level) are cut.
    assert [(p["step"], p["target_users"], p["hold_s"], p["users"]) for p in points] == \
        [(1, 5, 20, 5.0), (2, 10, 30, 10.0), (3, 15, 25, 15.0), (4, 20, 40, 20.0)]
    assert all(p["points"] == 4 and p["complete"] and p["recorded"] and p["whole_step_because"] is None
               for p in points)
    assert [(p["window_start_ts"] - RUN_TS, p["window_end_ts"] - RUN_TS) for p in points] == \
        [(3, 20), (22, 50), (52, 75), (77, 115)]
    # Each step begins where the one before it ended (its ramp first), as a native step does.
    assert [(p["started_at"] - RUN_TS, p["ended_at"] - RUN_TS) for p in points] == \
        [(0, 21), (21, 51), (51, 76), (76, 116)]
    # The run's own trial_summary figures agree with what its files recompute.
    [frontier] = sql(env, "SELECT actors_per_node, frontier_mismatch FROM density_frontiers")
    assert (frontier["actors_per_node"], frontier["frontier_mismatch"]) == (20.0, False)
    [capacity] = sql(env, "SELECT points, planned_steps, complete_points, capacity_step, capacity_users, "
                          "capacity_null_because, knee_step, knee_null_because FROM slo_capacity")
    assert (capacity["points"], capacity["planned_steps"], capacity["complete_points"]) == (4, 4, 4)
    # Judged by the SLO it was imported with: no step failed, so every step meets it and the top one is the capacity.
    assert (capacity["capacity_step"], capacity["capacity_users"], capacity["capacity_null_because"]) == \
        (4, 20.0, None)
    assert (capacity["knee_step"], capacity["knee_null_because"]) == (None, "the SLO is not broken within the ladder")


def test_an_imported_ladder_counts_each_steps_requests_from_its_history(imported):
    """No request log: each window's requests are the Aggregated row's running total at its end less at its start
    (the totals the history shows at seconds 3 and 20, 22 and 50, 52 and 75, 77 and 115), and the wake figures are
    null, not a measured 0."""
    env, _ = imported
    points = sql(env, "SELECT step, requests, failed_requests, failure_ratio, wake_n, wake_failed, wake_p99_ms "
                      "FROM load_points ORDER BY step")
    assert [(p["requests"], p["failed_requests"], p["failure_ratio"]) for p in points] == \
        [(288 - 33, 0, 0.0), (1176 - 336, 0, 0.0), (2289 - 1254, 0, 0.0), (4677 - 2397, 0, 0.0)]
    assert all(p["wake_n"] is None and p["wake_failed"] is None and p["wake_p99_ms"] is None for p in points)
    [slo] = sql(env, "SELECT slo_wake_p99_ms, slo_failure_ratio FROM trial_manifests")
    assert slo == {"slo_wake_p99_ms": None, "slo_failure_ratio": 0.01}


def with_failures(tmp: Path, from_second: int, per_second: int) -> Path:
    """The held-out run whose history's running failure total grows by ``per_second`` from ``from_second`` on."""
    upstream = tmp / "upstream"
    shutil.copytree(LADDER_RUNS / "runs", upstream / "runs")
    [history] = upstream.rglob("stats_history.csv")
    header, *rows = history.read_text().splitlines()
    failing = []
    for row in rows:
        fields = row.split(",")
        second = int(fields[0]) - RUN_TS
        fields[18] = str(max(0, min(second, 115) - from_second + 1) * per_second if second >= from_second else 0)
        failing.append(",".join(fields))
    history.write_text("\n".join([header, *failing]) + "\n")
    return upstream


def test_an_imported_ladder_failing_at_its_top_step_has_its_capacity_below(tmp_path):
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    # 6 of the top step's 60 requests a second fail (10 %) from its first steady second on.
    done = run(env, "import", str(with_failures(tmp_path, 78, 6)), "--slo-failure-ratio", "0.01")
    assert done.returncode == 0, done.stderr[-2000:]
    ratios = [p["failure_ratio"] for p in sql(env, "SELECT failure_ratio FROM load_points ORDER BY step")]
    assert ratios[:3] == [0.0, 0.0, 0.0] and ratios[3] == pytest.approx(0.1, abs=0.005)
    [capacity] = sql(env, "SELECT capacity_step, capacity_users, knee_step, knee_users, broken_by FROM slo_capacity")
    assert capacity == {"capacity_step": 3, "capacity_users": 15.0, "knee_step": 4, "knee_users": 20.0,
                        "broken_by": "failure_ratio"}


def test_an_import_without_an_slo_has_no_capacity_and_says_why(tmp_path):
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    upstream = tmp_path / "upstream"
    shutil.copytree(LADDER_RUNS / "runs", upstream / "runs")
    done = run(env, "import", str(upstream))
    assert done.returncode == 0, done.stderr[-2000:]
    [capacity] = sql(env, "SELECT capacity_users, capacity_null_because FROM slo_capacity")
    # Not judged against a made-up SLO.
    assert capacity == {"capacity_users": None, "capacity_null_because": "the suite sets no SLO"}
    assert not list((tmp_path / "project").rglob("import.json"))


def test_a_bad_slo_is_refused_before_anything_is_stored(tmp_path):
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    done = run(env, "import", str(tmp_path), "--slo-failure-ratio", "1.5")
    assert done.returncode == 2 and "--slo-failure-ratio" in done.stderr
    assert not list((tmp_path / "project").rglob("stats_history.csv"))


def test_the_report_of_an_imported_ladder_draws_it(imported):
    env, project = imported
    page = project / "ladder.html"
    done = run(env, "report", "--trial", LADDER, "-o", str(page))
    assert done.returncode == 0, done.stderr[-2000:]
    text = page.read_text()
    assert "Each ladder step over its steady window" in text
    assert "no ladder to draw" not in text
    # No request log, so no wake p99 per point: the chart says so rather than showing empty axes unexplained.
    assert "no load point measured its wake p99" in text


def upstream_copy(tmp: Path, users: list[int]) -> Path:
    """The held-out run with its history's user counts replaced by ``users``, one row a second."""
    upstream = tmp / "upstream"
    shutil.copytree(LADDER_RUNS / "runs", upstream / "runs")
    [history] = upstream.rglob("stats_history.csv")
    header, first, *_ = history.read_text().splitlines()
    rest = first.split(",")[2:]
    history.write_text("\n".join([header, *(f"{RUN_TS + i},{count}," + ",".join(rest) for i, count in
                                            enumerate(users))]) + "\n")
    return upstream


def test_a_ladder_whose_counts_never_settle_is_refused_saying_why(tmp_path):
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    jittering = [5 + (i % 2) for i in range(60)]
    done = run(env, "import", str(upstream_copy(tmp_path, jittering)))
    assert done.returncode != 0
    message = done.stdout + done.stderr
    assert LADDER in message and "stats_history.csv" in message and "never settles" in message
    assert not list((tmp_path / "project").rglob("stats_history.csv"))  # nothing half-imported


def test_a_step_too_short_to_settle_is_a_point_without_a_window(tmp_path):
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    # Step 2 (10 users) holds for two rows only: not settled; the other three steps are.
    users = [0] + [5] * 20 + [10, 10] + [15] * 25 + [20] * 40 + [0, 0]
    done = run(env, "import", str(upstream_copy(tmp_path, users)))
    assert done.returncode == 0, done.stderr[-2000:]
    points = sql(env, "SELECT step, users, window_start_ts, whole_step_because FROM load_points ORDER BY step")
    assert [p["step"] for p in points] == [1, 2, 3, 4]
    short = points[1]
    assert (short["users"], short["window_start_ts"]) == (None, None)
    assert "never held 10 users" in short["whole_step_because"]
    assert [p["users"] for p in points] == [5.0, None, 15.0, 20.0]
