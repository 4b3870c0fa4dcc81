"""`substrate-bench compare` on trials loaded through the warehouse's real load path: each trial's own figures, groups
of repeated trials, the history that measures the noise, the noise floor, and the verdicts and exit codes."""

import csv
import io
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.verdicts import NO_NOISE, Thresholds
from substrate_assets.cli import main
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.compare_trials import (
    SideNotFound,
    compare,
    history_window,
    judge_against_history,
    select_side,
)
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.synthetic_trials import write_trial

RUN_TS = 1_764_547_200
BETWEEN = 0.08


def lognormal(seed: int, n: int, median: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), 0.5, n)


def latencies(seed: int, median: float, wakes: int = 400) -> dict[str, np.ndarray]:
    """One trial's requests: its own median drawn around ``median`` (the trial-to-trial spread), then its wakes and
    one step around it."""
    rng = np.random.default_rng(seed)
    level = median * math.exp(rng.normal(0, BETWEEN))
    return {"WakeFirstTouch": rng.lognormal(np.log(level), 0.5, wakes),
            "Step_01_edit": rng.lognormal(np.log(20.0 * level / median), 0.4, 200)}


def loaded(tmp_path, trials) -> tuple:
    """A warehouse of the given trials of suite s, (latencies, write_trial's keywords) each, 100 s apart."""
    store = RunStore(tmp_path / "store")
    ids = [write_trial(store, "s", RUN_TS + 100 * n, requests, **knobs) for n, (requests, knobs) in
           enumerate(trials)]
    path = tmp_path / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    return path, ids


GROUP_A, GROUP_B, GROUP_SLOW = "s-20251201t000000z-x3", "s-20251201t010000z-x3", "s-20251201t020000z-x3"


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """Suite s: six trials alone at v1, a group of three at v1, another of three at v1, and a group of three with a
    wake delay injected (a configuration of its own), 50 % slower."""
    trials = [(latencies(seed, 100.0), {"tag": "v1", "sut_version": "v1aaaaaaaa"}) for seed in range(6)]
    trials += [(latencies(10 + seed, 100.0), {"tag": "v1", "sut_version": "v1aaaaaaaa", "group": GROUP_A})
               for seed in range(3)]
    trials += [(latencies(20 + seed, 100.0), {"tag": "v1", "sut_version": "v1aaaaaaaa", "group": GROUP_B})
               for seed in range(3)]
    trials += [(latencies(30 + seed, 150.0), {"tag": "v2", "sut_version": "v2bbbbbbbb", "group": GROUP_SLOW,
                                              "inject_wake_delay_ms": 50}) for seed in range(3)]
    path, ids = loaded(tmp_path, trials)
    monkeypatch.setenv("SUBSTRATE_BENCH_WAREHOUSE", str(path))
    return path, ids


def test_each_trial_is_its_own_figure_and_a_group_their_geometric_mean(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        p50s = dict(connection.execute("SELECT trial_id, p50_ms FROM wake_latency_distribution").fetchall())
        samples = {trial: np.sort([row[0] for row in connection.execute(
            "SELECT latency_ms FROM request_samples WHERE trial_id = ? AND name = 'WakeFirstTouch'",
            [trial]).fetchall()]) for trial in ids[6:9]}
        result = compare(connection, select_side(connection, GROUP_A), select_side(connection, GROUP_SLOW),
                         Thresholds())
    assert [floor_index(samples[trial], 500) for trial in ids[6:9]] == [p50s[trial] for trial in ids[6:9]]
    wake = next(row for row in result.figures if row.figure == "WakeFirstTouch p50")
    assert wake.baseline == pytest.approx(math.exp(np.mean(np.log([p50s[trial] for trial in ids[6:9]]))))
    assert wake.candidate == pytest.approx(math.exp(np.mean(np.log([p50s[trial] for trial in ids[12:]]))))
    assert wake.change_pct == pytest.approx((wake.candidate / wake.baseline - 1) * 100)
    assert (wake.baseline_trials, wake.candidate_trials) == (3, 3)


def test_a_slower_group_regresses_with_its_interval_and_detectable_change(warehouse):
    path, _ids = warehouse
    with connect(path, read_only=True) as connection:
        result = compare(connection, select_side(connection, GROUP_A), select_side(connection, GROUP_SLOW),
                         Thresholds())
    rows = {row.figure: row for row in result.figures}
    wake = rows["WakeFirstTouch p50"]
    assert wake.verdict == "regressed" and 30 < wake.change_pct < 75
    assert wake.interval.low > 0 and wake.noise_interval.low > 0
    assert wake.history_trials == 9 and wake.noise_df == 2 + 2 + 8  # both groups' repeats and the history
    assert wake.detectable < wake.change_pct
    assert "9 trials of suite s's configuration" in result.history
    assert "inject_wake_delay_ms: null → 50" in result.differences
    assert rows["actors_per_node"].verdict == "no change"


@pytest.mark.usefixtures("warehouse")
def test_two_groups_of_one_configuration_do_not_regress():
    outcome = CliRunner().invoke(main, ["compare", GROUP_A, GROUP_B, "--format", "json"])
    assert outcome.exit_code in (0, 4), outcome.output
    report = json.loads(outcome.output)
    assert report["regressed"] == [] and report["outcome"] in ("no regression", "inconclusive")
    assert all(row["verdict"] != "regressed" for row in report["figures"])
    assert len(report["baseline"]["trial_ids"]) == len(report["candidate"]["trial_ids"]) == 3


def test_two_single_trials_without_history_are_inconclusive_and_exit_4(tmp_path):
    path, ids = loaded(tmp_path, [(latencies(1, 100.0), {}), (latencies(2, 160.0), {})])
    outcome = CliRunner().invoke(main, ["compare", *ids, "--format", "json"],
                                 env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert outcome.exit_code == 4, outcome.output
    report = json.loads(outcome.output)
    wake = report["figures"][0]
    assert wake["figure"] == "WakeFirstTouch p50" and wake["verdict"] == "inconclusive" and wake["why"] == NO_NOISE
    assert wake["change_pct"] > 10 and wake["interval_low"] > 0  # a description of the two trials, not a verdict
    assert report["outcome"] == "inconclusive" and report["regressed"] == []
    table = CliRunner().invoke(main, ["compare", *ids], env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert table.exit_code == 4 and "to settle" in table.output and "inconclusive" in table.output


def test_a_regression_exits_3_in_every_format(warehouse):
    runner = CliRunner()
    table = runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW])
    assert table.exit_code == 3
    assert "WakeFirstTouch p50" in table.output and "regressed" in table.output
    rows = list(csv.DictReader(io.StringIO(runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW, "--format", "csv"])
                                           .output)))
    assert rows[0]["figure"] == "WakeFirstTouch p50" and rows[0]["verdict"] == "regressed"
    markdown = runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW, "--format", "markdown"])
    assert markdown.exit_code == 3 and "| WakeFirstTouch p50 |" in markdown.output
    assert "Regressed: WakeFirstTouch p50" in markdown.output


def test_a_group_is_judged_against_the_history_before_it(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        window = history_window(connection, "s", configuration(connection, ids[9]), before=10)
        assert window.trial_ids == tuple(ids[:9])
        judged = judge_against_history(connection, select_side(connection, GROUP_B), Thresholds())
        assert judged is not None and judged.baseline.trial_ids == tuple(ids[:9])
        assert judge_against_history(connection, select_side(connection, ids[0]), Thresholds()) is None
        # The slow group is a configuration of its own, with no history of its own.
        assert judge_against_history(connection, select_side(connection, GROUP_SLOW), Thresholds()) is None
    assert all(row.verdict != "regressed" for row in judged.figures)


def configuration(connection, trial_id: str) -> str:
    return connection.execute("SELECT configuration FROM capacity_history WHERE trial_id = ?",
                              [trial_id]).fetchone()[0]


def test_the_noise_floor_is_the_spread_of_the_window(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        p50s = dict(connection.execute("SELECT trial_id, p50_ms FROM wake_latency_distribution").fetchall())
        floor = connection.execute("SELECT trials_used, first_trial_id, last_trial_id, scale, level, noise, noise_df, "
                                   "robust_noise FROM noise_floor WHERE configuration = ? AND metric = 'wake_p50_ms'",
                                   [configuration(connection, ids[0])]).fetchone()
        slow = connection.execute("SELECT trials_used, noise FROM noise_floor WHERE configuration = ? AND "
                                  "metric = 'wake_p50_ms'", [configuration(connection, ids[12])]).fetchone()
        densities = connection.execute("SELECT scale, noise FROM noise_floor WHERE configuration = ? AND "
                                       "metric = 'actors_per_node'", [configuration(connection, ids[0])]).fetchone()
    logs = np.log([p50s[trial] for trial in ids[:12]])
    assert floor[:4] == (12, ids[0], ids[11], "ratio")
    assert floor[4] == pytest.approx(math.exp(logs.mean()))
    assert floor[5] == pytest.approx(np.std(logs, ddof=1)) and floor[6] == 11
    values = np.exp(logs)
    assert floor[7] == pytest.approx(1.4826 * np.median(np.abs(values - np.median(values))) / np.median(values))
    assert slow == (3, pytest.approx(np.std(np.log([p50s[trial] for trial in ids[12:]]), ddof=1)))
    assert densities == ("ratio", 0.0)


def test_groups_by_id_version_tag_and_last(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        assert select_side(connection, GROUP_A).trial_ids == tuple(ids[6:9])
        assert select_side(connection, GROUP_A).label == f"group {GROUP_A} (3 trials)"
        assert select_side(connection, GROUP_A, last=2).trial_ids == tuple(ids[7:9])
        assert select_side(connection, "v1aaaaa", suite="s").trial_ids == tuple(reversed(ids[:12]))
        assert select_side(connection, "v1", suite="s", last=2).trial_ids == (ids[11], ids[10])
        with pytest.raises(SideNotFound, match=r"tags: v1, v2; versions: v1aaaaaaaa, v2bbbbbbbb"):
            select_side(connection, "v3", suite="s")
        with pytest.raises(SideNotFound, match="no trial or group 'nope'"):
            select_side(connection, "nope")


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


def test_a_stopped_trial_is_in_no_group_and_no_history(tmp_path):
    trials = [(latencies(seed, 100.0), {"tag": "v1"}) for seed in range(3)]
    trials += [(latencies(3, 100.0), {"tag": "v1", "completed": False}), (latencies(4, 100.0), {"tag": "v2"})]
    path, ids = loaded(tmp_path, trials)
    with connect(path, read_only=True) as connection:
        assert select_side(connection, "v1", suite="s").trial_ids == (ids[2], ids[1], ids[0])
        in_history = dict(connection.execute("SELECT trial_id, count(*) FROM metric_history GROUP BY ALL").fetchall())
        assert ids[3] not in in_history and in_history[ids[0]] == in_history[ids[4]] > 0
        judged = judge_against_history(connection, select_side(connection, ids[4]), Thresholds())
        assert judged is not None and judged.baseline.trial_ids == tuple(ids[:3])
        result = compare(connection, select_side(connection, ids[3]), select_side(connection, ids[4]), Thresholds())
    assert result.differences == [f"trial {ids[3]} did not run to its end: its figures are of part of a run"]


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
