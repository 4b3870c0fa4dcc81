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

ROOT = Path(__file__).resolve().parents[1]
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
    done = run(env, "import", str(upstream))
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
    [capacity] = sql(env, "SELECT points, planned_steps, complete_points, capacity_null_because FROM slo_capacity")
    assert (capacity["points"], capacity["planned_steps"], capacity["complete_points"]) == (4, 4, 4)
    # The upstream run records no SLO: capacity is null with its reason, not judged against a made-up one.
    assert capacity["capacity_null_because"] == "the suite sets no SLO"


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
