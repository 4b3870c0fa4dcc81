"""The statistics of a comparison, against their definitions computed the long way."""

import numpy as np
import pytest
from scipy.stats import ks_2samp, mannwhitneyu

from substrate_assets.analysis.comparison import (
    Thresholds,
    bootstrap_percentiles,
    compare_failure_ratio,
    compare_latency,
    compare_scalar,
    difference_interval,
)
from substrate_assets.analysis.statistics import floor_index


def samples(seed: int, n: int, median: float, sigma: float = 0.5) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).lognormal(np.log(median), sigma, n))


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


def test_the_interval_matches_a_naive_bootstrap():
    baseline, candidate = samples(4, 3000, 100.0), samples(5, 3000, 120.0)
    interval = difference_interval(baseline, candidate, 500)
    rng = np.random.default_rng(6)
    naive = np.sort([floor_index(np.sort(rng.choice(candidate, len(candidate))), 500)
                     - floor_index(np.sort(rng.choice(baseline, len(baseline))), 500) for _ in range(4000)])
    low, high = np.quantile(naive, [0.025, 0.975])
    width = high - low
    assert abs(interval.low - low) < 0.1 * width and abs(interval.high - high) < 0.1 * width
    assert interval.low < floor_index(candidate, 500) - floor_index(baseline, 500) < interval.high


def test_the_interval_is_reproducible():
    baseline, candidate = samples(4, 500, 100.0), samples(5, 500, 100.0)
    assert difference_interval(baseline, candidate, 990) == difference_interval(baseline, candidate, 990)


def test_identical_samples_are_no_change_with_p_one():
    same = samples(7, 5000, 80.0)
    rows = compare_latency("WakeFirstTouch", same, same.copy(), Thresholds())
    assert [row.verdict for row in rows] == ["no change", "no change"]
    assert all(row.p_value == pytest.approx(1.0) and row.change_pct == 0 for row in rows)
    assert all(row.difference.low <= 0 <= row.difference.high for row in rows)


def test_a_slower_candidate_regresses_and_a_faster_one_improves():
    baseline, slower = samples(8, 4000, 100.0), samples(9, 4000, 130.0)
    rows = compare_latency("WakeFirstTouch", baseline, slower, Thresholds())
    assert [row.verdict for row in rows] == ["regressed", "regressed"]
    assert rows[0].p_value == pytest.approx(mannwhitneyu(slower, baseline).pvalue)
    assert rows[0].change_pct == pytest.approx((slower[2000] / baseline[2000] - 1) * 100)
    assert [row.verdict for row in compare_latency("x", slower, baseline, Thresholds())] == ["improved"] * 2


def test_a_change_below_the_threshold_is_no_change_even_when_significant():
    baseline, candidate = samples(10, 50_000, 100.0, 0.2), samples(11, 50_000, 105.0, 0.2)
    p50 = compare_latency("x", baseline, candidate, Thresholds())[0]
    assert p50.p_value < 1e-10 and p50.difference.low > 0 and p50.verdict == "no change"
    assert compare_latency("x", baseline, candidate, Thresholds(latency_change_pct=4))[0].verdict == "regressed"


def test_a_side_without_samples_is_not_measured():
    rows = compare_latency("Step_x", np.empty(0), samples(1, 10, 5.0), Thresholds())
    assert all(row.verdict is None and row.baseline is None and row.p_value is None for row in rows)


def test_scalars_follow_their_direction():
    thresholds = Thresholds()
    assert compare_scalar("actors_per_node", "actors", "higher", [10.0], [9.0], thresholds).verdict == "regressed"
    assert compare_scalar("actors_per_node", "actors", "higher", [10.0], [10.4], thresholds).verdict == "no change"
    assert compare_scalar("capacity_users", "users", "higher", [4, 4], [6, 6], thresholds).verdict == "improved"
    assert compare_scalar("actors_per_node", "actors", "higher", [], [9.0], thresholds).verdict is None
    assert compare_failure_ratio((0, 1000), (20, 1000), thresholds).verdict == "regressed"
    unchanged = compare_failure_ratio((0, 1000), (0, 900), thresholds)
    assert unchanged.verdict == "no change" and unchanged.change_pct is None  # from 0 no percentage exists
    assert compare_failure_ratio((0, 0), (0, 10), thresholds).verdict is None


def test_a_tail_percentile_of_few_samples_gets_no_verdict():
    one = compare_latency("WakeFirstTouch", np.array([50.0]), np.array([500.0]), Thresholds())
    assert [row.verdict for row in one] == [None, None] and all("too few samples" in row.why for row in one)
    rows = compare_latency("Step_x", samples(1, 900, 20.0), samples(2, 900, 40.0), Thresholds())
    assert rows[0].verdict == "regressed" and rows[1].verdict is None  # p99 needs 901 samples per side
    assert compare_latency("Step_x", samples(1, 901, 20.0), samples(2, 901, 40.0), Thresholds())[1].verdict \
        == "regressed"


def false_regressions(family: int) -> int:
    """Of 40 comparisons of two trials of one distribution with a wake row and 20 step rows, how many regress."""
    failed = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        rows = compare_latency("WakeFirstTouch", np.sort(rng.lognormal(4.6, 0.5, 3000)),
                               np.sort(rng.lognormal(4.6, 0.5, 3000)), Thresholds(), family)
        for step in range(20):
            rows += compare_latency(f"Step_{step}", np.sort(rng.lognormal(3.0, 0.4, 1500)),
                                    np.sort(rng.lognormal(3.0, 0.4, 1500)), Thresholds(), family)
        failed += any(row.verdict == "regressed" for row in rows)
    return failed


def test_equal_distributions_do_not_fail_a_comparison_of_many_rows():
    """Judged alone, each of 42 percentiles has its own small chance of a false regression, and one in eight
    comparisons fails; judged as a family, none."""
    assert false_regressions(family=2) >= 3
    assert false_regressions(family=42) == 0


def test_a_move_from_zero_is_a_change():
    assert compare_scalar("capacity_users", "users", "higher", [0.0], [10.0], Thresholds()).verdict == "improved"
    assert compare_scalar("actors_per_node", "actors", "higher", [0.0], [0.0], Thresholds()).verdict == "no change"
    missing = compare_scalar("capacity_users", "users", "higher", [4.0], [], Thresholds())
    assert missing.verdict is None and missing.why == "not measured by the candidate"
