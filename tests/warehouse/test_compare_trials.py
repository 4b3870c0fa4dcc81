"""`substrate-bench compare` on trials loaded through the warehouse's real load path: each trial's own figures (the
wake's geometric mean at a common mix of its paths, from the runtime's events), groups of repeated trials, the history
that measures the noise, the noise floor, disturbed trials left out, the rounds of an ab run, and the verdicts and
exit codes."""

import csv
import io
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.analysis.comparison import Side
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.verdicts import NO_NOISE, Thresholds
from substrate_assets.cli import main
from substrate_assets.report.verdict_text import notes
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.compare_trials import compare, history_window, judge_against_history
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.sides import AllDisturbed, SideNotFound, rounds, select_side
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.synthetic_trials import write_trial

RUN_TS = 1_764_547_200
BETWEEN = 0.04
PRIMARY = "WakeFirstTouch path gmean"


def lognormal(seed: int, n: int, median: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), 0.5, n)


def latencies(seed: int, median: float, wakes: int = 400, slow: float = 0.3, between: float = BETWEEN) -> dict:
    """One trial's requests: its own level drawn around ``median`` (the trial-to-trial spread), then its wakes — a
    fast group (warm restores) and a slow one (``slow`` of them: cold restores) — and one step; with the wakes'
    paths, ascending as the wakes are written."""
    rng = np.random.default_rng(seed)
    level = median * math.exp(rng.normal(0, between))
    cold = rng.random(wakes) < slow
    wake = np.where(cold, rng.lognormal(np.log(4 * level), 0.2, wakes), rng.lognormal(np.log(0.6 * level), 0.4, wakes))
    return {"WakeFirstTouch": wake, "Step_01_edit": rng.lognormal(np.log(20.0 * level / median), 0.4, 200),
            "paths": ["restore_cold" if flag else "restore_warm" for flag in cold]}


def loaded(tmp_path, trials) -> tuple:
    """A warehouse of the given trials of suite s, (latencies, write_trial's keywords) each, 100 s apart."""
    store = RunStore(tmp_path / "store")
    ids = []
    for n, (requests, knobs) in enumerate(trials):
        requests = dict(requests)
        paths = requests.pop("paths", None)
        ids.append(write_trial(store, "s", RUN_TS + 100 * n, requests, wake_paths=paths, **knobs))
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


def wake_rows(connection, trial_id: str) -> tuple[np.ndarray, np.ndarray]:
    rows = connection.execute("SELECT latency_ms, wake_path FROM wake_samples WHERE trial_id = ?", [trial_id]).fetchall()
    return np.array([row[0] for row in rows]), np.array([row[1] for row in rows])


def test_each_trial_is_its_own_figure_and_a_group_their_geometric_mean(warehouse):
    """Each trial's p50 (floor index) and geometric mean from its own wakes; its path gmean at the mix every
    compared trial shares (the mean of their shares of each path); a group's figure the geometric mean of its
    trials'."""
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        marts = {row[0]: row[1:] for row in connection.execute(
            "SELECT trial_id, p50_ms, gmean_ms, slow_share FROM wake_latency_distribution").fetchall()}
        wakes = {trial: wake_rows(connection, trial) for trial in ids[6:9] + ids[12:]}
        # Both sides' trials and the history's (the six alone and group B) share one mix.
        cold = float(np.mean([np.mean(wake_rows(connection, trial)[1] == "restore_cold") for trial in ids]))
        result = compare(connection, select_side(connection, GROUP_A), select_side(connection, GROUP_SLOW),
                         Thresholds())
    rows = {row.figure: row for row in result.figures}
    for trial, (values, paths) in wakes.items():
        assert marts[trial][0] == floor_index(np.sort(values), 500)
        assert marts[trial][1] == pytest.approx(math.exp(np.mean(np.log(values))))
        assert marts[trial][2] == pytest.approx(np.mean(paths == "restore_cold"))
        assert set(paths) == {"restore_warm", "restore_cold"}
    p50 = rows["WakeFirstTouch p50"]
    assert p50.baseline == pytest.approx(math.exp(np.mean(np.log([marts[trial][0] for trial in ids[6:9]]))))
    gmean = rows["WakeFirstTouch gmean"]
    assert gmean.candidate == pytest.approx(math.exp(np.mean(np.log([marts[trial][1] for trial in ids[12:]]))))
    expected = [math.exp((1 - cold) * np.mean(np.log(values[paths == "restore_warm"]))
                         + cold * np.mean(np.log(values[paths == "restore_cold"])))
                for values, paths in (wakes[trial] for trial in ids[6:9])]
    primary = rows[PRIMARY]
    assert primary.primary and primary.baseline == pytest.approx(math.exp(np.mean(np.log(expected))), rel=1e-3)
    assert f"restore_cold {cold * 100:.0f} %" in primary.note
    assert (primary.baseline_trials, primary.candidate_trials) == (3, 3)


def test_a_slower_group_regresses_with_its_interval_and_detectable_change(warehouse):
    path, _ids = warehouse
    with connect(path, read_only=True) as connection:
        result = compare(connection, select_side(connection, GROUP_A), select_side(connection, GROUP_SLOW),
                         Thresholds())
    rows = {row.figure: row for row in result.figures}
    primary = rows[PRIMARY]
    assert primary.verdict == "regressed" and 30 < primary.change_pct < 75 and primary.level == pytest.approx(0.04)
    assert primary.interval.low > 0 and primary.equivalence_interval.low > 5
    assert primary.history_trials == 9 and primary.noise_df == 2 + 2 + 8  # both groups' repeats and the history
    assert primary.detectable < primary.change_pct
    assert "9 trials of suite s's configuration" in result.history
    assert "inject_wake_delay_ms: null → 50" in result.differences
    assert rows["actors_per_node"].verdict == "no change" and not result.paired


@pytest.mark.usefixtures("warehouse")
def test_two_groups_of_one_configuration_get_no_verdict_of_change():
    outcome = CliRunner().invoke(main, ["compare", GROUP_A, GROUP_B, "--format", "json"])
    assert outcome.exit_code in (0, 4), outcome.output
    report = json.loads(outcome.output)
    assert report["regressed"] == [] and report["improved"] == []
    assert report["outcome"] in ("no regression", "inconclusive") and report["primary"] == [PRIMARY]
    assert len(report["baseline"]["trial_ids"]) == len(report["candidate"]["trial_ids"]) == 3


def test_two_single_trials_without_history_are_inconclusive_and_exit_4(tmp_path):
    path, ids = loaded(tmp_path, [(latencies(1, 100.0), {}), (latencies(2, 160.0), {})])
    outcome = CliRunner().invoke(main, ["compare", *ids, "--format", "json"],
                                 env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert outcome.exit_code == 4, outcome.output
    report = json.loads(outcome.output)
    wake = report["figures"][0]
    assert wake["figure"] == "WakeFirstTouch gmean" and wake["verdict"] == "inconclusive" and wake["why"] == NO_NOISE
    assert wake["change_pct"] > 10 and wake["interval_low"] is None  # a description of the two trials, not a verdict
    assert report["outcome"] == "inconclusive" and report["regressed"] == []
    table = CliRunner().invoke(main, ["compare", *ids], env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert table.exit_code == 4 and "to settle" in table.output and "inconclusive" in table.output


def test_a_regression_exits_3_in_every_format(warehouse):
    runner = CliRunner()
    table = runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW])
    assert table.exit_code == 3
    assert PRIMARY in table.output and "regressed" in table.output
    rows = {row["figure"]: row for row in csv.DictReader(io.StringIO(
        runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW, "--format", "csv"]).output))}
    assert rows[PRIMARY]["verdict"] == "regressed" and rows[PRIMARY]["primary"] == "True"
    markdown = runner.invoke(main, ["compare", GROUP_A, GROUP_SLOW, "--format", "markdown"])
    assert markdown.exit_code == 3 and f"| {PRIMARY} * |" in markdown.output
    assert f"Regressed: WakeFirstTouch gmean, {PRIMARY}" in markdown.output


def test_a_figure_too_thin_to_judge_is_named_and_exit_0_is_not_claimed(tmp_path):
    """Every figure no change but the p99s, which 400 wakes a trial cannot judge: the outcome is inconclusive
    (exit 4), naming them, rather than a claim that every figure was judged."""
    trials = [(latencies(100 + seed, 100.0), {}) for seed in range(8)]
    path, ids = loaded(tmp_path, trials)
    outcome = CliRunner().invoke(main, ["compare", ids[-2], ids[-1], "--format", "json"],
                                 env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    report = json.loads(outcome.output)
    assert "WakeFirstTouch p99" in report["unjudged"] and outcome.exit_code == 4
    assert report["regressed"] == []


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
    assert all(row.verdict not in ("regressed", "improved") for row in judged.figures)


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
    assert report["regressed"] == []
    assert report["lost"] == ["WakeFirstTouch gmean", "WakeFirstTouch p50", "WakeFirstTouch p99"]
    wake = report["figures"][0]
    assert wake["verdict"] is None and wake["why"] == "not measured by the candidate" and wake["candidate"] is None


def test_disturbed_trials_are_left_out_named_and_kept_when_asked(tmp_path, monkeypatch):
    """A group of four, one run while other work took 24 % of the CPU: compare leaves it out and says so (its label,
    a note); --include-disturbed keeps it and says that; a group all disturbed cannot be judged (exit 4)."""
    group, busy = "s-20251202t000000z-x4", "s-20251202t010000z-x2"
    trials = [(latencies(seed, 100.0), {"foreign_cpu_share": 0.01}) for seed in range(6)]
    trials += [(latencies(10 + seed, 100.0), {"group": group, "foreign_cpu_share": 0.24 if seed == 2 else 0.01})
               for seed in range(4)]
    trials += [(latencies(20 + seed, 100.0), {"group": busy, "foreign_cpu_share": 0.3}) for seed in range(2)]
    path, ids = loaded(tmp_path, trials)
    monkeypatch.setenv("SUBSTRATE_BENCH_WAREHOUSE", str(path))
    with connect(path, read_only=True) as connection:
        side = select_side(connection, group)
        assert side.trial_ids == (ids[6], ids[7], ids[9]) and side.left_out[0].startswith(f"{ids[8]} (disturbed:")
        assert side.label == f"group {group} (3 trials, 1 disturbed left out)"
        assert select_side(connection, group, include_disturbed=True).trial_ids == tuple(ids[6:10])
        with pytest.raises(AllDisturbed, match="every trial is disturbed"):
            select_side(connection, busy)
        disturbed = dict(connection.execute("SELECT trial_id, disturbed FROM trials").fetchall())
        assert disturbed[ids[8]] is True and disturbed[ids[0]] is False
        in_history = {row[0] for row in connection.execute("SELECT DISTINCT trial_id FROM metric_history").fetchall()}
        assert ids[8] not in in_history and ids[10] not in in_history and ids[0] in in_history
    runner = CliRunner()
    report = json.loads(runner.invoke(main, ["compare", ids[0], group, "--format", "json"]).output)
    assert any(ids[8] in warning and "left out of the candidate" in warning for warning in report["warnings"])
    kept = json.loads(runner.invoke(main, ["compare", ids[0], group, "--include-disturbed", "--format", "json"]).output)
    assert any(ids[8] in warning and "kept as asked" in warning for warning in kept["warnings"])
    refused = runner.invoke(main, ["compare", ids[0], busy])
    assert refused.exit_code == 4 and "too busy to judge" in refused.output


def test_the_groups_of_an_ab_run_are_judged_round_by_round(tmp_path):
    """The a and b groups of one ab run, alternating: analysed as rounds, the rounds' correlation reported; two
    groups of different runs are not."""
    stamp = "s-20251203t000000z"
    trials = []
    for index in range(8):
        side = "a" if index % 4 in (0, 3) else "b"
        trials.append((latencies(40 + index, 100.0 if side == "a" else 130.0), {"group": f"{stamp}-{side}4"}))
    path, _ids = loaded(tmp_path, trials)
    with connect(path, read_only=True) as connection:
        result = compare(connection, select_side(connection, f"{stamp}-a4"), select_side(connection, f"{stamp}-b4"),
                         Thresholds())
        primary = next(row for row in result.figures if row.primary)
        assert result.paired and primary.correlation is not None and primary.verdict == "regressed"
        assert primary.noise_df == 3  # four rounds' differences, no history of this configuration yet
        assert any("analysed as 4 rounds" in warning for warning in notes(result))
        unpaired = compare(connection, select_side(connection, f"{stamp}-a4", last=3),
                           select_side(connection, f"{stamp}-b4"), Thresholds())
        assert not unpaired.paired
    assert rounds(Side("a", ("x",), group="glutton-20251203t000000z-a1"),
                  Side("b", ("y",), group="glutton-pause-20251203t000000z-b1")) == ((0, 0),)
    assert rounds(Side("a", ("x",), group="glutton-20251203t000000z-a1"),
                  Side("b", ("y",), group="glutton-20251203t000001z-b1")) is None
    assert rounds(Side("a", ("x",), group="glutton-20251203t000000z-x1"),
                  Side("b", ("y",), group="glutton-20251203t000000z-b1")) is None


def test_a_drifting_history_is_counted_in_the_error_and_said(tmp_path):
    """Twelve trials whose level climbs 1 % a trial, too slowly for a change point: a new trial judged against them
    differs from their mean by the drift as well as by its noise; the comparison counts the drift between moments in
    the primary figure's error (its interval and detectable change widen) and says so. Twelve trials of one level do
    not drift."""
    climbing = [(latencies(60 + n, 100.0 * 1.01 ** n, between=0.005), {}) for n in range(12)]
    path, ids = loaded(tmp_path, climbing)
    with connect(path, read_only=True) as connection:
        judged = judge_against_history(connection, select_side(connection, ids[-1]), Thresholds())
    primary = next(row for row in judged.figures if row.primary)
    assert len(judged.baseline.trial_ids) == 11 and primary.drift is not None and primary.drift > primary.noise
    assert any("history drifted" in warning and "Rounds (ab) cancel it" in warning for warning in notes(judged))
    flat = [(latencies(80 + n, 100.0, between=0.005), {}) for n in range(12)]
    path, ids = loaded(tmp_path / "flat", flat)
    with connect(path, read_only=True) as connection:
        judged = judge_against_history(connection, select_side(connection, ids[-1]), Thresholds())
    primary = next(row for row in judged.figures if row.primary)
    assert primary.drift is None and not any("drifted" in warning for warning in notes(judged))


def test_a_suite_names_its_primary_figures_and_a_name_that_matches_none_is_said(warehouse):
    path, _ids = warehouse
    with connect(path, read_only=True) as connection:
        sides = select_side(connection, GROUP_A), select_side(connection, GROUP_SLOW)
        chosen = compare(connection, *sides, Thresholds(primary=("WakeFirstTouch p50", "Step_01_edit p50")))
        typo = compare(connection, *sides, Thresholds(primary=("WakeFirstTouch p5O",)))
    primary = {row.figure: row.level for row in chosen.figures if row.primary}
    assert primary == {"WakeFirstTouch p50": pytest.approx(0.02), "Step_01_edit p50": pytest.approx(0.02)}
    assert not any(row.primary for row in typo.figures)
    assert any("'WakeFirstTouch p5O' is not one of this comparison's figures" in line for line in typo.warnings)
