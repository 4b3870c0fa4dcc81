"""`substrate-bench compare` on trials loaded through the warehouse's real load path, checked against the figures
computed directly from request_samples."""

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.analysis.comparison import Thresholds
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.cli import main
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.comparison import SideNotFound, compare, previous_trial, select_side
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models import build_marts
from substrate_assets.warehouse.raw import load_trials
from tests.support.synthetic_trials import write_trial

RUN_TS = 1_764_547_200


def lognormal(seed: int, n: int, median: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), 0.5, n)


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """Five trials of suite s: three at version v1 (p50 ≈ 100 ms), a copy of the first one's samples at v1, and
    one at v2 30 % slower, with a failing step and fewer actors per node."""
    store = RunStore(tmp_path / "store")
    wake = lognormal(1, 3000, 100.0)
    step = lognormal(2, 1000, 20.0)
    ids = [write_trial(store, "s", RUN_TS, {"WakeFirstTouch": wake, "Step_01_edit": step}, tag="v1",
                       sut_version="v1aaaaaaaa"),
           write_trial(store, "s", RUN_TS + 100, {"WakeFirstTouch": lognormal(3, 3000, 100.0),
                                                   "Step_01_edit": lognormal(4, 1000, 20.0)},
                       tag="v1", sut_version="v1aaaaaaaa"),
           write_trial(store, "s", RUN_TS + 200, {"WakeFirstTouch": wake.copy(), "Step_01_edit": step.copy()},
                       tag="v1", sut_version="v1aaaaaaaa"),
           write_trial(store, "s", RUN_TS + 300, {"WakeFirstTouch": lognormal(5, 3000, 130.0),
                                                   "Step_01_edit": lognormal(6, 1000, 20.0)},
                       tag="v2", sut_version="v2bbbbbbbb", failures=200, node_count=2)]
    path = tmp_path / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    monkeypatch.setenv("SUBSTRATE_BENCH_WAREHOUSE", str(path))
    return path, ids


def test_the_p50_change_and_its_interval_match_request_samples(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        latencies = {trial_id: np.sort([row[0] for row in connection.execute(
            "SELECT latency_ms FROM request_samples WHERE trial_id = ? AND name = 'WakeFirstTouch'",
            [trial_id]).fetchall()]) for trial_id in (ids[0], ids[3])}
        distribution = dict(connection.execute(
            "SELECT trial_id, p50_ms FROM wake_latency_distribution WHERE trial_id IN (?, ?)", ids[::3]).fetchall())
        result = compare(connection, select_side(connection, ids[0]), select_side(connection, ids[3]),
                         Thresholds())
    p50 = next(row for row in result.figures if row.figure == "WakeFirstTouch p50")
    before, after = floor_index(latencies[ids[0]], 500), floor_index(latencies[ids[3]], 500)
    assert (p50.baseline, p50.candidate) == (before, after) == (distribution[ids[0]], distribution[ids[3]])
    assert p50.change_pct == pytest.approx((after / before - 1) * 100)
    rng = np.random.default_rng(0)
    naive = [floor_index(np.sort(rng.choice(latencies[ids[3]], 3000)), 500)
             - floor_index(np.sort(rng.choice(latencies[ids[0]], 3000)), 500) for _ in range(3000)]
    low, high = np.quantile(naive, [0.025, 0.975])
    assert abs(p50.difference.low - low) < 0.1 * (high - low) and abs(p50.difference.high - high) < 0.1 * (high - low)
    assert p50.verdict == "regressed"
    by_figure = {row.figure: row for row in result.figures}
    assert by_figure["Step_01_edit p50"].verdict == "no change"
    assert by_figure["actors_per_node"].verdict == "regressed"  # the same actors on twice the nodes
    assert by_figure["failure_ratio"].candidate == pytest.approx(200 / 4200)
    assert "capacity_users" not in by_figure  # no SLO: no capacity on either side
    assert result.differences == ["sut_version: v1aaaaaaaa → v2bbbbbbbb", "node_count: 1 → 2"]


def test_identical_trials_compare_as_no_change_with_p_one(warehouse):
    _, ids = warehouse
    outcome = CliRunner().invoke(main, ["compare", ids[0], ids[2], "--format", "json"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    latency = [row for row in report["figures"] if row["unit"] == "ms"]
    assert len(latency) == 4 and all(row["p_value"] == pytest.approx(1.0) for row in latency)
    assert {row["verdict"] for row in report["figures"]} == {"no change"} and report["regressed"] == []


def test_a_regression_exits_3_in_every_format(warehouse):
    _, ids = warehouse
    runner = CliRunner()
    table = runner.invoke(main, ["compare", ids[0], ids[3]])
    assert table.exit_code == 3
    assert "WakeFirstTouch p50" in table.output and "regressed" in table.output
    rows = list(csv.DictReader(io.StringIO(runner.invoke(main, ["compare", ids[0], ids[3], "--format", "csv"])
                                           .output)))
    assert rows[0]["figure"] == "WakeFirstTouch p50" and rows[0]["verdict"] == "regressed"
    markdown = runner.invoke(main, ["compare", ids[0], ids[3], "--format", "markdown"])
    assert markdown.exit_code == 3 and "| WakeFirstTouch p50 |" in markdown.output
    assert "Regressed: WakeFirstTouch p50" in markdown.output


def test_groups_by_version_tag_and_last(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        assert select_side(connection, "v1aaaaa", suite="s").trial_ids == (ids[2], ids[1], ids[0])
        assert select_side(connection, "v1", suite="s", last=2).trial_ids == (ids[2], ids[1])
        with pytest.raises(SideNotFound, match=r"tags: v1, v2; versions: v1aaaaaaaa, v2bbbbbbbb"):
            select_side(connection, "v3", suite="s")
        with pytest.raises(SideNotFound, match="no trial 'nope'"):
            select_side(connection, "nope")
        assert previous_trial(connection, ids[2]) == ids[1]
        assert previous_trial(connection, ids[0]) is None
    outcome = CliRunner().invoke(main, ["compare", "--suite", "s", "--last", "3", "v1", "v2", "--format", "json"])
    assert outcome.exit_code == 3
    report = json.loads(outcome.output)
    assert report["baseline"]["trial_ids"] == [ids[2], ids[1], ids[0]]
    wake = report["figures"][0]
    assert wake["baseline_n"] == 9000 and wake["candidate_n"] == 3000


def loaded(tmp_path, trials) -> tuple:
    store = RunStore(tmp_path / "store")
    ids = [write_trial(store, "s", RUN_TS + 100 * n, latencies, **knobs) for n, (latencies, knobs) in
           enumerate(trials)]
    path = tmp_path / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    return path, ids


def test_sides_must_be_told_apart(tmp_path):
    wakes = {"WakeFirstTouch": lognormal(1, 100, 50.0)}
    path, ids = loaded(tmp_path, [(wakes, {"sut_version": "abcdef1aaaa"}), (wakes, {"sut_version": "abcdef1bbbb"})])
    with connect(path, read_only=True) as connection:
        with pytest.raises(SideNotFound, match=r"'abcdef1' is the start of 2 versions .*abcdef1aaaa, abcdef1bbbb"):
            select_side(connection, "abcdef1", suite="s")
        assert select_side(connection, "abcdef1b", suite="s").trial_ids == (ids[1],)
        side = select_side(connection, ids[0])
        with pytest.raises(SideNotFound, match="both sides hold"):
            compare(connection, side, side, Thresholds())


def test_a_stopped_trial_is_no_baseline_nor_part_of_a_group(tmp_path):
    wakes = {"WakeFirstTouch": lognormal(1, 100, 50.0)}
    path, ids = loaded(tmp_path, [(wakes, {"tag": "v1"}), (wakes, {"tag": "v1", "completed": False}),
                                  (wakes, {"tag": "v2"})])
    with connect(path, read_only=True) as connection:
        assert previous_trial(connection, ids[2]) == ids[0]
        assert select_side(connection, "v1", suite="s").trial_ids == (ids[0],)
        in_history = dict(connection.execute("SELECT trial_id, count(*) FROM metric_history GROUP BY ALL").fetchall())
        assert ids[1] not in in_history and in_history[ids[0]] == in_history[ids[2]] > 0
        result = compare(connection, select_side(connection, ids[1]), select_side(connection, ids[2]), Thresholds())
    assert result.differences == [f"trial {ids[1]} did not run to its end: its figures are of part of a run"]


def test_a_figure_the_candidate_stopped_measuring_fails_the_gate(tmp_path):
    path, ids = loaded(tmp_path, [({"WakeFirstTouch": lognormal(1, 500, 50.0), "Step_01_edit": lognormal(2, 50, 9.0)},
                                   {}),
                                  ({"Step_01_edit": lognormal(3, 50, 9.0)}, {})])
    outcome = CliRunner().invoke(main, ["compare", *ids, "--format", "json"],
                                 env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert outcome.exit_code == 3, outcome.output
    report = json.loads(outcome.output)
    assert report["regressed"] == [] and report["lost"] == ["WakeFirstTouch p50", "WakeFirstTouch p99"]
    wake = report["figures"][0]
    assert wake["verdict"] is None and wake["why"] == "not measured by the candidate" and wake["candidate"] is None
