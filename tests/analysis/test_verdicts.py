"""The statistics of a comparison, tested the way they fail: against their definitions computed the long way, and
on synthetic hierarchical data whose truth the test sets (each trial's own level drawn around the configuration's,
then its requests around the trial's), over many seeded draws: identical configurations rarely differ, a known
effect is found, and the intervals cover the true change about as often as they say."""

import math

import numpy as np
import pytest
from scipy.stats import ks_2samp

from substrate_assets.analysis.bootstrap import bootstrap_percentiles, group_percentiles, percentile_interval
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.verdicts import (
    NO_NOISE,
    Thresholds,
    judge,
    latency_figures,
    rank_test_reaches,
    scalar_figure,
)

# Between-trial spread of a trial's level (log scale: 8 %, this machine's quick-smoke p50) and within-trial spread.
BETWEEN, WITHIN, SAMPLES = 0.08, 0.5, 300


def samples(seed: int, n: int, median: float, sigma: float = 0.5) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).lognormal(np.log(median), sigma, n))


def trials(rng: np.random.Generator, k: int, median: float, between: float = BETWEEN,
           n: int = SAMPLES) -> list[np.ndarray]:
    """``k`` trials of one configuration: each trial's median drawn around ``median`` (log-normal, ``between``),
    its requests around the trial's median (``WITHIN``); ascending."""
    return [np.sort(rng.lognormal(np.log(median) + rng.normal(0, between), WITHIN, n)) for _ in range(k)]


def history_p50(rng: np.random.Generator, k: int, median: float) -> dict[str, list[float]]:
    return {"p50": [float(floor_index(trial, 500)) for trial in trials(rng, k, median)], "p99": []}


def p50_row(baseline, candidate, history=None, replicates=2000):
    rows, _ = judge(latency_figures("Wake", baseline, candidate, history), Thresholds(), replicates=replicates)
    return rows[0]


@pytest.mark.parametrize(("n", "per_mille"), [(1, 500), (7, 990), (200, 500), (1000, 990)])
def test_one_beta_draw_per_replicate_is_the_resampled_percentile(n, per_mille):
    """The percentile of a real resample and the Beta-drawn one have the same distribution (two-sample KS over
    20,000 replicates each, seeded)."""
    ordered = samples(1, n, 100.0)
    replicates = 20_000
    drawn = bootstrap_percentiles(ordered, per_mille, replicates, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    resampled = [floor_index(np.sort(rng.choice(ordered, n)), per_mille) for _ in range(replicates)]
    assert set(drawn) <= set(ordered)
    if n == 1:
        assert set(drawn) == set(resampled) == {ordered[0]}
    else:
        assert ks_2samp(drawn, resampled).pvalue > 0.001


def test_the_hierarchical_bootstrap_is_trials_then_requests_the_long_way():
    """A group's replicates drawn as the comparison draws them (trial indices, then one Beta draw per drawn trial)
    against the definition: draw k trials with replacement, resample each drawn trial's requests, take each one's
    p50, average the logarithms (two-sample KS, seeded)."""
    group = trials(np.random.default_rng(4), 3, 100.0, between=0.3, n=60)
    drawn = group_percentiles(group, 500, "ratio", 8000, np.random.default_rng(5))
    rng = np.random.default_rng(6)
    long_way = []
    for _ in range(8000):
        chosen = [group[index] for index in rng.integers(0, 3, 3)]
        long_way.append(np.mean([np.log(floor_index(np.sort(rng.choice(trial, len(trial))), 500))
                                 for trial in chosen]))
    assert ks_2samp(drawn, long_way).pvalue > 0.001


def test_the_interval_is_reproducible_and_independent_of_the_other_figures():
    rng = np.random.default_rng(7)
    baseline, candidate = trials(rng, 3, 100.0), trials(rng, 3, 100.0)
    first = latency_figures("Wake", baseline, candidate)
    alone, _ = judge(first, Thresholds())
    together, _ = judge([*latency_figures("Other", candidate, baseline), *first], Thresholds())
    assert alone[0].interval == together[2].interval and alone[0].interval is not None


def test_two_single_trials_without_history_are_inconclusive_however_far_apart():
    """One trial a side and no history: the trial-to-trial noise is unknown, so not even a doubling is called a
    regression; the request-level interval is still shown, as a description."""
    rng = np.random.default_rng(8)
    row = p50_row(trials(rng, 1, 100.0), trials(rng, 1, 200.0))
    assert row.verdict == "inconclusive" and row.why == NO_NOISE
    assert row.noise is None and row.detectable is None and row.p_value is None
    assert row.change_pct == pytest.approx(row.candidate / row.baseline * 100 - 100)
    assert row.interval is not None and row.interval.low > 0


def test_a_history_of_two_trials_is_no_noise_floor():
    rng = np.random.default_rng(9)
    row = p50_row(trials(rng, 1, 100.0), trials(rng, 1, 200.0), history_p50(rng, 2, 100.0))
    assert row.verdict == "inconclusive" and row.why == NO_NOISE and row.history_trials == 0
    row = p50_row(trials(rng, 1, 100.0), trials(rng, 1, 200.0), history_p50(rng, 3, 100.0))
    assert row.history_trials == 3 and row.noise_df == 2


def test_identical_configurations_rarely_regress():
    """A/A: 300 seeded comparisons of 3 trials a side with a history of 10 trials, every figure judged as compare
    judges it (wake p50 and p99, two steps, densities, failure ratio): a comparison with any figure regressed is a
    false alarm; the rule holds them to its 5 % family-wise rate (half of it on the regression side)."""
    rng = np.random.default_rng(10)
    alarms = 0
    for _ in range(300):
        figures = []
        for name, median in (("Wake", 100.0), ("Step_a", 20.0), ("Step_b", 40.0)):
            base, cand = trials(rng, 3, median), trials(rng, 3, median)
            past = {"p50": [], "p99": []}
            for trial in trials(rng, 10, median):
                past["p50"].append(float(floor_index(trial, 500)))
                past["p99"].append(float(floor_index(trial, 990)))
            figures += latency_figures(name, base, cand, past)
        densities = [[4.0] * 3, [4.0] * 3, [4.0] * 10]
        figures.append(scalar_figure("actors_per_node", "actors", "higher", "density", *densities))
        figures.append(scalar_figure("failure_ratio", "ratio", "lower", "failure_ratio", [0.0] * 3, [0.0] * 3,
                                     [0.0] * 10))
        rows, _ = judge(figures, Thresholds(), replicates=500)
        alarms += any(row.verdict == "regressed" for row in rows)
    assert alarms / 300 <= 0.05


def test_a_known_slowdown_is_found():
    """A/B: the candidate's trials 50 % slower at the median (the injected wake delay's size), 3 trials a side and a
    history of 10: found in at least 90 % of 200 seeded comparisons, and its noise interval covers +50 %."""
    rng = np.random.default_rng(11)
    found = covered = 0
    for _ in range(200):
        row = p50_row(trials(rng, 3, 100.0), trials(rng, 3, 150.0), history_p50(rng, 10, 100.0), replicates=500)
        found += row.verdict == "regressed"
        covered += row.noise_interval.low <= 50.0 <= row.noise_interval.high
    assert found / 200 >= 0.9
    assert 0.9 <= covered / 200 <= 0.99


@pytest.mark.parametrize(("k", "history"), [(1, 10), (3, 0), (3, 10), (5, 0)])
def test_the_noise_interval_covers_the_true_change_95_percent_of_the_time(k, history):
    """Coverage over 400 seeded draws whose true change is +20 % (the medians' ratio): within a few points of 95 %,
    with one trial a side and a history, and with repeats alone."""
    rng = np.random.default_rng(12 + k + history)
    truth = 20.0
    covered = 0
    for _ in range(400):
        past = history_p50(rng, history, 100.0) if history else None
        row = p50_row(trials(rng, k, 100.0), trials(rng, k, 120.0), past, replicates=200)
        covered += row.noise_interval.low <= truth <= row.noise_interval.high
    assert abs(covered / 400 - 0.95) <= 0.03


def test_the_hierarchical_bootstrap_covers_with_ten_trials_a_side_and_not_with_one():
    """The bootstrap interval (trials, then requests) covers the true change within a few points of 95 % with ten
    trials a side; with one a side it sees only the requests' noise and covers far less: why it never carries a
    verdict alone."""
    truth = 20.0
    rates = {}
    for k in (1, 10):
        rng = np.random.default_rng(20 + k)
        covered = 0
        for _ in range(300):
            row = p50_row(trials(rng, k, 100.0), trials(rng, k, 120.0), replicates=1000)
            covered += row.interval.low <= truth <= row.interval.high
        rates[k] = covered / 300
    assert abs(rates[10] - 0.95) <= 0.04
    assert rates[1] < 0.8


def test_the_minimal_detectable_change_follows_the_formula():
    """(t_{1−α/2, df} + t_{0.8, df}) · s · √(1/k_A + 1/k_B) on the log scale, as a percent change; and, at many
    degrees of freedom, statistics.md's table (normal quantiles, 2.8 · CV · √(2/k)) to the whole percent."""
    from substrate_assets.analysis.noise import Noise, detectable_shift

    for cv, k, table in ((0.05, 1, 20), (0.05, 3, 11), (0.10, 3, 23), (0.10, 5, 18), (0.20, 10, 25)):
        assert round(detectable_shift(Noise(cv, 10**7, 0, 0), k, k, 0.05) * 100) == table
    rng = np.random.default_rng(13)
    row = p50_row(trials(rng, 3, 100.0), trials(rng, 3, 100.0), history_p50(rng, 8, 100.0))
    from scipy.stats import t

    level = Thresholds().false_alarm_rate / 1  # one judged figure: the p99 of 300 samples is not judged
    shift = (t.ppf(1 - level / 2, row.noise_df) + t.ppf(0.8, row.noise_df)) * row.noise * math.sqrt(2 / 3)
    assert row.detectable == pytest.approx(math.expm1(shift) * 100)


def test_a_tail_percentile_of_few_samples_per_trial_gets_no_verdict():
    rng = np.random.default_rng(14)
    rows, _ = judge(latency_figures("Wake", trials(rng, 3, 100.0, n=900), trials(rng, 3, 200.0, n=900),
                                    history_p50(rng, 5, 100.0)), Thresholds(), replicates=200)
    p50, p99 = rows
    assert p50.verdict == "regressed"
    assert p99.verdict is None and p99.why == "too few samples in a trial (a p99 verdict needs 901 in each; " \
                                              "the fewest has 900)"


def test_a_side_that_measured_a_figure_in_only_some_trials_has_no_value():
    rng = np.random.default_rng(15)
    candidate = [*trials(rng, 2, 100.0), np.empty(0)]
    rows, _ = judge(latency_figures("Wake", trials(rng, 3, 100.0), candidate), Thresholds(), replicates=200)
    assert rows[0].candidate is None and rows[0].verdict is None
    assert rows[0].why == "the candidate measured it in 2 of its 3 trials"


def test_scalars_follow_their_direction_and_a_constant_figure_is_no_change():
    """Densities (higher is better) fewer by 20 % with no spread at all regress; equal ones are no change (a noise of
    0 detects any change); the failure ratio is judged on its own scale, by its absolute threshold."""
    def one(figure, unit, better, kind, base, cand, past=()):
        rows, _ = judge([scalar_figure(figure, unit, better, kind, base, cand, past)], Thresholds(),
                        replicates=200)
        return rows[0]

    fewer = one("actors_per_node", "actors", "higher", "density", [10.0] * 3, [8.0] * 3)
    assert (fewer.verdict, fewer.scale) == ("regressed", "ratio") and fewer.change_pct == pytest.approx(-20.0)
    same = one("actors_per_node", "actors", "higher", "density", [10.0] * 3, [10.0] * 3)
    assert (same.verdict, same.noise, same.detectable) == ("no change", 0.0, 0.0)
    failing = one("failure_ratio", "ratio", "lower", "failure_ratio", [0.0, 0.001, 0.0], [0.05, 0.06, 0.055],
                  [0.0, 0.0, 0.001, 0.0])
    assert failing.scale == "difference" and failing.verdict == "regressed"
    assert failing.difference == pytest.approx(0.055 - 0.001 / 3)
    within = one("failure_ratio", "ratio", "lower", "failure_ratio", [0.0, 0.001, 0.0], [0.001, 0.0, 0.001])
    assert within.verdict == "no change"


def test_rank_tests_run_only_where_they_can_reach_the_level():
    assert not rank_test_reaches(3, 3, 0.05) and rank_test_reaches(4, 4, 0.05)
    rng = np.random.default_rng(16)
    assert p50_row(trials(rng, 3, 100.0), trials(rng, 3, 100.0)).rank_p_value is None
    assert p50_row(trials(rng, 5, 100.0), trials(rng, 5, 300.0)).rank_p_value == pytest.approx(2 / 252)


def test_the_bootstrap_interval_ends_are_floor_index_ranks():
    replicates = np.arange(1000, dtype=float)[::-1]
    assert percentile_interval(replicates, 0.95) == (25.0, 974.0)
