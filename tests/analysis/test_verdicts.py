"""The verdict rule, tested the way it fails: on synthetic hierarchical data whose truth the test sets (each trial's
level drawn around its configuration's, then its requests around the trial's), over many seeded draws. Identical
configurations rarely get any verdict; "no change" is claimed at a true 0 and almost never at the threshold; the
stated minimal detectable change is where the rule as applied finds 80 %; a change and its mirror get mirrored
verdicts; the interval covers the truth as often as it says; counts with no spread never make p = 0; rounds cancel
the machine's drift."""

import math
from dataclasses import replace

import numpy as np
import pytest

from substrate_assets.analysis.measured import Measured, count_figure, latency_figures, scalar_figure, wake_figures
from substrate_assets.analysis.noise import pooled_noise, step_floor
from substrate_assets.analysis.rule import Estimate, call, detectable, trials_to_settle
from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.analysis.verdicts import NO_NOISE, SHOWN_REACH_PCT, _evidence, judge, levels
from substrate_assets.analysis.wake_figures import TrialWakes

THRESHOLDS = Thresholds()
MARGIN = math.log1p(THRESHOLDS.latency_change_pct / 100)
# The spread of a trial's level (log scale) and of one request's log latency around its trial's: with 400 requests a
# trial's figure moves 2.5 % from trial to trial, as this machine's quiet quick-smoke path gmean does.
BETWEEN, WITHIN, REQUESTS = 0.02, 0.3, 400


def trial_levels(rng: np.random.Generator, k: int, shift: float = 0.0, between: float = BETWEEN) -> np.ndarray:
    """``k`` trials' log levels around log 100 ms + ``shift``, each with its own requests' sampling noise."""
    return np.log(100.0) + shift + rng.normal(0, between, k) + rng.normal(0, WITHIN / math.sqrt(REQUESTS), k)


def latency(rng: np.random.Generator, k: int, shift: float = 0.0, history: int = 0, primary: bool = True):
    """One latency figure of k trials a side (the candidate shifted by ``shift`` on the log scale), with a
    history of the baseline's configuration."""
    row = scalar_figure("Wake gmean", "ms", "lower", "latency", np.exp(trial_levels(rng, k)),
                        np.exp(trial_levels(rng, k, shift)), np.exp(trial_levels(rng, history)))
    return row.as_primary() if primary else row


def verdict_of(row, thresholds=THRESHOLDS):
    return judge([row], thresholds)[0]


def test_one_primary_figure_takes_the_whole_budget_and_with_others_its_share():
    rng = np.random.default_rng(1)
    primary, other = latency(rng, 3), latency(rng, 3, primary=False)
    evidence = [_evidence(row, None) for row in (primary, other, other, other, other)]
    assert levels(evidence, THRESHOLDS) == pytest.approx((0.04, 0.0025))
    assert levels(evidence[:1], THRESHOLDS) == pytest.approx((0.05, 0.05))
    assert levels(evidence[1:], THRESHOLDS) == pytest.approx((0.05, 0.0125))


def test_no_change_is_claimed_at_a_true_zero_and_almost_never_at_the_threshold():
    """TOST at the suite's false-alarm rate: with 4 trials a side and a history of 20, a true 0 is "no change" in
    most comparisons (the normal approximation: 2Φ((m − t·SE)/SE) − 1, about 70 % here); a true change of exactly the
    threshold (either way) is "no change" in at most 5 %."""
    rng = np.random.default_rng(2)
    draws = 1500
    at_zero = sum(verdict_of(latency(rng, 4, 0.0, 20)).verdict == "no change" for _ in range(draws)) / draws
    at_bound = sum(verdict_of(latency(rng, 4, sign * MARGIN, 20)).verdict == "no change"
                   for sign in (1, -1) for _ in range(draws // 2)) / draws
    assert at_zero >= 0.6
    assert at_bound <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / draws)


@pytest.mark.parametrize(("k", "history", "between"), [(4, 20, 0.02), (3, 0, 0.02), (2, 10, 0.05), (4, 0, 0.06)])
def test_the_stated_detectable_change_is_the_simulated_80_percent_point(k, history, between):
    """The rule's minimal detectable change, stated from the true spread, is found in 80 % (within a few points)
    of seeded comparisons whose true change is exactly it, judged as compare judges."""
    rng = np.random.default_rng(3 + k + history)
    noise_of_a_trial = math.sqrt(between ** 2 + WITHIN ** 2 / REQUESTS)
    df = 2 * (k - 1) + max(history - 1, 0)
    stated = detectable(noise_of_a_trial * math.sqrt(2 / k), df, THRESHOLDS.false_alarm_rate, MARGIN)
    assert stated > MARGIN
    draws = 1500
    found = 0
    for _ in range(draws):
        row = scalar_figure("Wake gmean", "ms", "lower", "latency", np.exp(trial_levels(rng, k, 0, between)),
                            np.exp(trial_levels(rng, k, stated, between)),
                            np.exp(trial_levels(rng, history, 0, between))).as_primary()
        found += verdict_of(row).verdict == "regressed"
    assert abs(found / draws - 0.8) <= 0.04


def test_a_change_and_its_mirror_on_the_log_scale_get_mirrored_verdicts():
    """A change beyond +5 % (log 1.05) is regressed exactly when its mirror of the same noise (log 1/1.05, −4.76 %)
    is improved; a change just short of the threshold on either side is never called; exactly at the threshold,
    either way, the rule calls both."""
    rng = np.random.default_rng(4)
    for _ in range(300):
        base, cand, past = trial_levels(rng, 4), trial_levels(rng, 4), trial_levels(rng, 10)
        noise = cand - cand.mean()
        verdicts = []
        for sign in (1, -1):
            row = scalar_figure("W", "ms", "lower", "latency", np.exp(base),
                                np.exp(base.mean() + sign * 1.2 * MARGIN + noise), np.exp(past)).as_primary()
            verdicts.append(verdict_of(row).verdict)
        assert (verdicts[0] == "regressed") == (verdicts[1] == "improved")
        short = scalar_figure("W", "ms", "lower", "latency", np.exp(base), np.exp(base.mean() - 0.99 * MARGIN + noise),
                              np.exp(past)).as_primary()
        assert verdict_of(short).verdict in ("no change", "inconclusive")
    assert math.expm1(-MARGIN) * 100 == pytest.approx(-4.7619, abs=1e-3)
    assert call(Estimate(MARGIN, 0.001, 20), 0.04, MARGIN, 0.05) == "changed"
    assert call(Estimate(-MARGIN, 0.001, 20), 0.04, MARGIN, 0.05) == "changed"
    assert call(Estimate(math.log(0.95), 0.001, 20), 0.04, MARGIN, 0.05) == "changed"  # −5 % is beyond −4.76 %


@pytest.mark.parametrize("history", [0, 20])
def test_the_interval_covers_the_true_change_95_percent_of_the_time_at_three_trials_a_side(history):
    rng = np.random.default_rng(5 + history)
    truth = 0.08
    draws, covered = 2000, 0
    for _ in range(draws):
        row = verdict_of(latency(rng, 3, truth, history))
        covered += row.interval.holds(math.expm1(truth) * 100)
    assert abs(covered / draws - 0.95) <= 0.015


def test_identical_configurations_get_a_verdict_in_at_most_the_false_alarm_rate_either_way():
    """A/A with a primary figure and twelve others, 4 trials a side and a history of 20: a comparison with any figure
    regressed or improved is a false verdict; the budget holds them to 5 %, and false "improved" are counted too."""
    rng = np.random.default_rng(6)
    draws, regressed, improved = 800, 0, 0
    for _ in range(draws):
        rows = [latency(rng, 4, 0.0, 20), *(latency(rng, 4, 0.0, 20, primary=False) for _ in range(12))]
        verdicts = {row.verdict for row in judge(rows, THRESHOLDS)}
        regressed += "regressed" in verdicts
        improved += "improved" in verdicts
    assert (regressed + improved) / draws <= 0.05
    assert regressed / draws <= 0.03 and improved / draws <= 0.03


def test_a_ten_percent_slowdown_of_the_primary_figure_is_found_at_four_trials_a_side():
    rng = np.random.default_rng(7)
    draws = 600
    found = sum(verdict_of(latency(rng, 4, math.log1p(0.10), 20)).verdict == "regressed" for _ in range(draws))
    assert found / draws >= 0.9


def test_two_single_trials_without_history_are_inconclusive_however_far_apart():
    rng = np.random.default_rng(8)
    row = verdict_of(latency(rng, 1, math.log(2.0)))
    assert row.verdict == "inconclusive" and row.why == NO_NOISE
    assert row.noise is None and row.detectable is None and row.p_value is None and row.interval is None
    assert row.change_pct == pytest.approx(row.candidate / row.baseline * 100 - 100)


def test_a_history_of_two_trials_is_no_noise_floor():
    rng = np.random.default_rng(9)
    assert verdict_of(latency(rng, 1, 0.5, history=2)).why == NO_NOISE
    row = verdict_of(latency(rng, 1, 0.5, history=3))
    assert row.history_trials == 3 and row.noise_df == 2


def test_failure_counts_with_no_spread_never_make_a_p_value_of_zero():
    """One failed request beside none — a candidate trial at 1 of 83, a baseline and history at 0 — is p = 1, not
    p = 0: no verdict from one event. Five failures in a hundred in every candidate trial is a regression."""
    one = count_figure("failure_ratio", [(0, 80)], [(1, 83)], [(0, 90)] * 20)
    row = verdict_of(one)
    assert row.candidate == pytest.approx(1 / 83) and row.p_value == 1.0 and row.verdict != "regressed"
    assert row.interval.low < 0 < row.interval.high
    failing = verdict_of(count_figure("failure_ratio", [(0, 1000)] * 4, [(50, 1000)] * 4, [(0, 1000)] * 10))
    assert failing.verdict == "regressed" and failing.p_value < 1e-10
    none = verdict_of(count_figure("failure_ratio", [(0, 1000)] * 4, [(0, 1000)] * 4))
    assert none.verdict == "no change" and none.p_value == 1.0 and none.equivalence_interval.high < 0.01


def test_overdispersed_failures_are_judged_by_their_scatter_between_trials():
    """Trials whose failures scatter far beyond binomial (a burst in one, none in others): the dispersion is
    measured from them, and a candidate within that scatter is no regression, where a binomial test would call it
    one."""
    history = [(0, 1000), (40, 1000), (2, 1000), (0, 1000), (35, 1000), (1, 1000)] * 3
    row = verdict_of(count_figure("failure_ratio", [(0, 1000), (30, 1000), (1, 1000)],
                                  [(45, 1000), (20, 1000), (38, 1000)], history))
    assert row.noise > 10 and row.verdict != "regressed"


def test_rounds_cancel_the_drift_the_rounds_share():
    """Trials drifting far more between rounds (12 %) than within one (2 %): as rounds, a true +10 % is found and an
    A/A rarely called, and the rounds' correlation is reported; the same trials taken as two plain groups cannot
    see the change."""
    rng = np.random.default_rng(10)
    pairs = tuple((index, index) for index in range(4))
    found_paired = found_unpaired = aa_paired = 0
    draws = 400
    for _ in range(draws):
        for effect in (math.log1p(0.10), 0.0):
            moments = rng.normal(0, 0.12, 4)
            base = np.log(100) + moments + rng.normal(0, 0.02, 4)
            cand = np.log(100) + effect + moments + rng.normal(0, 0.02, 4)
            row = scalar_figure("W", "ms", "lower", "latency", np.exp(base), np.exp(cand)).as_primary()
            paired = judge([row], THRESHOLDS, pairs)[0]
            if effect:
                found_paired += paired.verdict == "regressed"
                found_unpaired += judge([row], THRESHOLDS)[0].verdict == "regressed"
                assert paired.correlation is not None and paired.correlation > -1
            else:
                aa_paired += paired.verdict in ("regressed", "improved")
    assert found_paired / draws >= 0.5 and found_unpaired / draws <= 0.1
    assert aa_paired / draws <= 0.05


def test_the_rule_is_exclusive_and_says_inconclusive_when_the_data_cannot_know():
    margin = MARGIN
    assert call(Estimate(0.2, 0.01, 20), 0.04, margin, 0.05) == "changed"
    assert call(Estimate(0.0, 0.001, 20), 0.04, margin, 0.05) == "no change"
    assert call(Estimate(0.0, 0.2, 20), 0.04, margin, 0.05) == "inconclusive"
    # Significant but short of the threshold, and sure to be inside it: no change that counts.
    assert call(Estimate(0.02, 0.004, 20), 0.04, margin, 0.05) == "no change"


def test_trials_to_settle_is_where_equivalence_reaches_80_percent():
    k = trials_to_settle(math.sqrt(BETWEEN ** 2 + WITHIN ** 2 / REQUESTS), 19, 0.05, MARGIN)
    assert k is not None
    rng = np.random.default_rng(11)
    draws = 1000
    for sides, expect_enough in ((k, True), (max(k - 2, 1), False)):
        rate = sum(verdict_of(latency(rng, sides, 0.0, 20, primary=True), THRESHOLDS).verdict == "no change"
                   for _ in range(draws)) / draws
        assert (rate >= 0.75) == expect_enough
    assert trials_to_settle(0.0, 0, 0.05, MARGIN) == 1 and trials_to_settle(1.0, 0, 0.05, MARGIN) is None


def test_wake_figures_hold_the_mix_fixed_where_the_paths_are_known():
    """Two groups of wakes (fast warm restores, slow cold ones): a candidate whose slow share rose from 30 % to 45 %
    with every path as fast as before moves the plain geometric mean and the slow share, not the path gmean."""
    rng = np.random.default_rng(12)

    def trial(slow: float) -> TrialWakes:
        paths = np.where(rng.random(400) < slow, "restore_cold", "restore_warm")
        latencies = np.where(paths == "restore_cold", rng.lognormal(np.log(280), 0.2, 400),
                             rng.lognormal(np.log(40), 0.4, 400))
        return TrialWakes.of(latencies, list(paths))

    rows = {row.figure: row for row in wake_figures("Wake", [trial(0.3) for _ in range(4)],
                                                    [trial(0.45) for _ in range(4)], [trial(0.3) for _ in range(10)])}
    judged = {row.figure: row for row in judge(list(rows.values()), THRESHOLDS)}
    assert judged["Wake gmean"].verdict == "regressed" and judged["Wake slow share"].verdict == "regressed"
    assert judged["Wake path gmean"].verdict in ("no change", "inconclusive")
    assert abs(judged["Wake path gmean"].change_pct) < 3
    assert "restore_warm" in rows["Wake path gmean"].note and set(judged) >= {"Wake p50 (restore_warm)",
                                                                               "Wake p50 (restore_cold)"}


def wakes_of(rng: np.random.Generator, wakes: int, slow: float) -> TrialWakes:
    """A trial of ``wakes`` wakes, each a slow cold restore with chance ``slow``, else a fast warm one."""
    cold = rng.random(wakes) < slow
    latencies = np.where(cold, rng.lognormal(np.log(300), 0.2, wakes), rng.lognormal(np.log(40), 0.4, wakes))
    return TrialWakes.of(latencies, ["restore_cold" if taken else "restore_warm" for taken in cold])


def test_slow_shares_that_tie_are_no_evidence_of_a_change():
    """As `run smoke --repeat 2` meets it: one trial of a few dozen wakes against a group of two. Two trials' slow
    shares tie often (4 of 16 and 4 of 16), and a spread of zero from them is no proof that the share never varies:
    judged as counts, a tie is no change found, and identical configurations are rarely called changed either way.
    Judged as one value per trial, a tie made p = 0, and 14 % of these A/As were called changed."""
    rng = np.random.default_rng(21)

    def trial(slow: int, wakes: int) -> TrialWakes:
        return TrialWakes.of(np.arange(1.0, wakes + 1), ["restore_cold"] * slow + ["restore_warm"] * (wakes - slow))

    [tie] = [row for row in wake_figures("Wake", [trial(2, 13)], [trial(4, 16), trial(4, 16)])
             if row.figure == "Wake slow share"]
    judged = verdict_of(tie)
    assert judged.candidate - judged.baseline > THRESHOLDS.share_change
    assert judged.p_value > 0.3 and judged.verdict == "inconclusive" and judged.counted
    draws, called = 1000, 0
    for _ in range(draws):
        rows = [row for row in wake_figures("Wake", [wakes_of(rng, 16, 0.25)],
                                            [wakes_of(rng, 16, 0.25) for _ in range(2)])
                if row.figure == "Wake slow share"]
        called += bool(rows) and verdict_of(rows[0]).verdict in ("regressed", "improved")
    assert called / draws <= THRESHOLDS.false_alarm_rate


def test_trials_that_wake_by_different_paths_share_no_mix():
    """Suspend against pause, as ab glutton-baseline glutton-baseline-pause met it: the baseline restores, the
    candidate unpauses and restores a few actors (6 of 200 wakes). Both took restore_warm five times or more, but a
    figure of those 6 wakes would judge the candidate's minority: no path gmean, and the plain gmean is the figure."""
    rng = np.random.default_rng(16)

    def trial(paths: list[str]) -> TrialWakes:
        latencies = [rng.lognormal(np.log(8 if path == "restore_warm" else 2), 0.3) for path in paths]
        return TrialWakes.of(np.array(latencies), paths)

    suspend = [trial(["restore_warm"] * 200) for _ in range(4)]
    pause = [trial(["unpause"] * 194 + ["restore_warm"] * 6) for _ in range(4)]
    figures = {row.figure for row in wake_figures("GluttonPing", suspend, pause)}
    assert figures == {"GluttonPing gmean"}
    # Within one mode a path every trial took often enough still makes the mix.
    mostly = [trial(["restore_warm"] * 150 + ["restore_cold"] * 50) for _ in range(4)]
    assert "GluttonPing path gmean" in {row.figure for row in wake_figures("GluttonPing", mostly, mostly)}


def test_a_tail_percentile_of_few_samples_per_trial_gets_no_verdict():
    rng = np.random.default_rng(14)
    trials = [np.sort(rng.lognormal(np.log(100), 0.5, 900)) for _ in range(3)]
    slower = [np.sort(rng.lognormal(np.log(200), 0.5, 900)) for _ in range(3)]
    p50, p99 = judge(latency_figures("Wake", trials, slower), THRESHOLDS)
    assert p50.verdict == "regressed"
    assert p99.verdict is None and p99.why == ("too few samples in a trial (a p99 verdict needs 901 in each; the "
                                               "fewest has 900)")


def test_a_side_that_measured_a_figure_in_only_some_trials_has_no_value():
    rng = np.random.default_rng(15)
    trials = [np.sort(rng.lognormal(np.log(100), 0.5, 300)) for _ in range(3)]
    rows = judge(latency_figures("Wake", trials, [*trials[:2], np.empty(0)]), THRESHOLDS)
    assert rows[0].candidate is None and rows[0].verdict is None
    assert rows[0].why == "the candidate measured it in 2 of its 3 trials"


def test_densities_follow_their_direction_and_a_constant_figure_is_no_change():
    fewer = verdict_of(scalar_figure("actors_per_node", "actors", "higher", "density", [10.0] * 3, [8.0] * 3))
    assert (fewer.verdict, fewer.scale) == ("regressed", "ratio") and fewer.change_pct == pytest.approx(-20.0)
    same = verdict_of(scalar_figure("actors_per_node", "actors", "higher", "density", [10.0] * 3, [10.0] * 3))
    assert (same.verdict, same.noise) == ("no change", 0.0)


def test_a_figure_in_whole_steps_whose_trials_tie_is_not_called_changed():
    """A ladder's capacity in users: 8, one step off now and then. One trial against a group of two whose trials tie
    (7 and 7) measured a spread of 0, and a t test on it called every difference p = 0: 20 % of these A/As were
    called changed (6 % at two a side). The spread is never below the rounding to the values' step: A/As are rarely
    called changed, and a real change of two steps is still found at four a side."""
    rng = np.random.default_rng(5)

    def capacity(trials: int, shift: int = 0) -> list[float]:
        return list(8.0 + shift + rng.choice([-1, 0, 0, 0, 1], trials))

    def called(baseline: int, candidate: int, shift: int, draws: int) -> dict[str, int]:
        found: dict[str, int] = {}
        for _ in range(draws):
            row = scalar_figure("capacity_users", "users", "higher", "density", capacity(baseline),
                                capacity(candidate, shift))
            verdict = verdict_of(row).verdict
            found[verdict] = found.get(verdict, 0) + 1
        return found

    tie = verdict_of(scalar_figure("capacity_users", "users", "higher", "density", [8.0], [7.0, 7.0]))
    assert tie.verdict == "inconclusive" and tie.noise == pytest.approx(math.log(8 / 7) / math.sqrt(12))
    for baseline, candidate in ((1, 2), (2, 2)):
        found = called(baseline, candidate, 0, 600)
        assert found.get("regressed", 0) + found.get("improved", 0) <= 0.02 * 600, (baseline, candidate, found)
    assert called(4, 4, -2, 200).get("regressed", 0) >= 0.9 * 200
    # Values not on a grid are never floored: two different values of a side spread more than the rounding.
    for row in (latency(rng, 3, 0.05, history) for history in (0, 20) for _ in range(50)):
        sides, history = [np.log(row.baseline), np.log(row.candidate)], np.log(np.asarray(row.history))
        assert step_floor(*sides, history) < pooled_noise(sides, history).spread


def drifting(rng: np.random.Generator, trials: int, within: float = 0.02, between: float = 0.06) -> np.ndarray:
    """Log levels of ``trials`` consecutive trials of a machine that drifts: an AR(1) wander of stationary spread
    ``between`` with neighbours 95 % alike (minutes-long waves), plus each trial's own noise ``within``."""
    rho = 0.95
    level = np.empty(trials)
    level[0] = rng.normal(0, between)
    for index in range(1, trials):
        level[index] = rho * level[index - 1] + rng.normal(0, between * math.sqrt(1 - rho ** 2))
    return np.log(100.0) + level + rng.normal(0, within, trials)


def groups_after_history(rng: np.random.Generator, effect: float) -> Measured:
    """Twenty trials of history, then two groups of four back to back, the second shifted by ``effect``."""
    series = drifting(rng, 28)
    row = scalar_figure("Wake gmean", "ms", "lower", "latency", np.exp(series[20:24]),
                        np.exp(series[24:28] + effect), np.exp(series[:20])).as_primary()
    return replace(row, baseline_moments=("group a",) * 4, candidate_moments=("group b",) * 4)


def test_groups_run_back_to_back_on_a_drifting_machine_rarely_differ_either_way():
    """Drift between moments (6 %) far above the trials' own noise (2 %): two groups run one after the other differ
    by the drift between their moments. Judged with the drift the history shows counted in the error, identical
    groups get a verdict in at most 5 % of comparisons; judged as independent trials, in many more."""
    rng = np.random.default_rng(20)
    draws, false, naive = 500, 0, 0
    for _ in range(draws):
        row = groups_after_history(rng, 0.0)
        false += verdict_of(row).verdict in ("regressed", "improved")
        naive += verdict_of(replace(row, baseline_moments=(), candidate_moments=(), history=())).verdict in (
            "regressed", "improved")
    assert false / draws <= 0.05
    assert naive / draws >= 0.10


def test_rounds_on_the_same_drifting_machine_find_a_ten_percent_slowdown():
    """The same drift, four rounds of A then B back to back (ABBA), a history of twenty: the rounds' differences
    cancel what each round shares, and a true +10 % is found in most comparisons; identical sides rarely differ."""
    rng = np.random.default_rng(21)
    pairs = tuple((index, index) for index in range(4))
    draws, found, false = 400, 0, 0
    for _ in range(draws):
        for effect in (math.log1p(0.10), 0.0):
            series = drifting(rng, 28)
            rounds = series[20:]
            a = np.array([rounds[0], rounds[3], rounds[4], rounds[7]])
            b = np.array([rounds[1], rounds[2], rounds[5], rounds[6]]) + effect
            row = scalar_figure("W", "ms", "lower", "latency", np.exp(a), np.exp(b), np.exp(series[:20])).as_primary()
            verdict = judge([row], THRESHOLDS, pairs)[0].verdict
            if effect:
                found += verdict == "regressed"
            else:
                false += verdict in ("regressed", "improved")
    assert found / draws >= 0.8 and false / draws <= 0.05


def test_a_bar_past_what_a_double_holds_is_an_infinite_detectable_change_not_an_overflow():
    """One trial a side and one degree of freedom at a secondary figure's level: the t test's bar (t ≈ 900) times a
    noise of a factor of three is a shift no percentage holds; the figure is inconclusive, saying so, and every
    output writes it."""
    import json

    from substrate_assets.report.verdict_text import detectable_text, plain_row, why_text

    row = scalar_figure("Step p99", "ms", "lower", "latency", [10.0, 100.0], [30.0], [])
    judged = judge([row], THRESHOLDS.model_copy(update={"false_alarm_rate": 0.0007}))[0]
    assert judged.verdict == "inconclusive" and judged.detectable == math.inf
    assert detectable_text(judged) == "none: too few trials"
    assert "could detect no change it could show (none under +1,000 %) with 2 and 1 trials" in why_text(judged)
    assert plain_row(judged)["detectable"] == "inf"
    json.dumps(plain_row(judged), allow_nan=False)  # what compare --format json writes of the row


def test_a_detectable_change_past_any_the_figure_could_show_is_shown_as_none():
    """Two trials a side at a secondary figure's level: the bar is finite but past any change a reader could use
    (10^60 % was printed); a share's past 1, which a share cannot move. Both are "none", the number kept in JSON."""
    from substrate_assets.analysis.verdicts import beyond_showing
    from substrate_assets.report.verdict_text import detectable_text, plain_row, why_text

    assert beyond_showing(1000.1, "ratio", "ms") and not beyond_showing(999.9, "ratio", "ms")
    assert beyond_showing(1.2, "difference", "share") and not beyond_showing(0.9, "difference", "share")
    assert not beyond_showing(5000.0, "difference", "users")
    row = scalar_figure("Step p50", "ms", "lower", "latency", [10.0, 40.0], [12.0, 50.0], [])
    judged = judge([row], THRESHOLDS.model_copy(update={"false_alarm_rate": 0.0007}))[0]
    assert judged.verdict == "inconclusive" and SHOWN_REACH_PCT < judged.detectable < math.inf
    assert detectable_text(judged) == "none: too few trials"
    assert "could detect no change it could show (none under +1,000 %) with 2 and 2 trials" in why_text(judged)
    assert plain_row(judged)["detectable"] == judged.detectable
