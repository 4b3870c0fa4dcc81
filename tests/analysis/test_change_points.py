"""Change points of one series, by Apache Otava's own Hunter implementation, on seeded series."""

import random
import statistics
import warnings

import pytest

from substrate_assets.analysis.change_points import ChangePoint, ChangePointParameters, find_change_points


def noisy(levels: list[float], seed: int, noise: float = 0.03) -> list[float]:
    """Each level with seeded uniform noise of ±``noise`` of it."""
    rng = random.Random(seed)
    return [level * (1 + rng.uniform(-noise, noise)) for level in levels]


def test_a_step_of_30_percent_is_one_change_point_at_its_first_trial():
    series = noisy([100.0] * 6 + [130.0] * 6, seed=1)
    [point] = find_change_points(series)
    before, after = statistics.fmean(series[:6]), statistics.fmean(series[6:])
    assert point.index == 6
    assert point.mean_before == pytest.approx(before) and point.mean_after == pytest.approx(after)
    assert point.change_pct == pytest.approx((after / before - 1) * 100)
    assert 24 < point.change_pct < 36
    assert 0 <= point.p_value < 0.001


@pytest.mark.parametrize("seed", range(10))
def test_noise_alone_is_no_change(seed):
    assert find_change_points(noisy([100.0] * 12, seed)) == []
    assert find_change_points(noisy([100.0] * 80, seed)) == []  # longer than a window


def test_a_long_history_finds_each_change_across_windows():
    series = noisy([100.0] * 40 + [130.0] * 40 + [100.0] * 40, seed=3)
    points = find_change_points(series)
    assert [point.index for point in points] == [40, 80]
    assert points[0].mean_after == points[1].mean_before  # the segment between them
    assert points[1].change_pct < 0


def test_the_same_series_gives_the_same_points():
    series = noisy([50.0] * 20 + [40.0] * 20, seed=7)
    assert find_change_points(series) == find_change_points(list(series)) != []


def test_a_constant_series_has_no_change_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert find_change_points([42.0] * 12) == []
        assert find_change_points([0.0] * 30) == []


def test_levels_without_spread_change_with_a_finite_p_value_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        [step] = find_change_points([5.0] * 6 + [7.0] * 6)
        [from_zero] = find_change_points([0.0] * 6 + [0.02] * 6)
    assert (step.index, step.mean_before, step.mean_after, step.p_value) == (6, 5.0, 7.0, 0.0)
    assert step.change_pct == pytest.approx(40.0)
    # No relative change exists from 0: the change is there, its percentage is not.
    assert from_zero == ChangePoint(6, 0.0, 0.02, None, 0.0)


def test_a_too_short_series_is_not_analysed():
    five = [100.0, 100.0, 100.0, 200.0, 200.0]
    assert find_change_points(five) == []
    assert find_change_points(noisy([100.0] * 3 + [200.0] * 3, seed=3))[0].index == 3
    assert find_change_points(noisy([100.0] * 3 + [200.0] * 3, seed=3), ChangePointParameters(min_trials=8)) == []
    assert find_change_points([]) == []


def test_a_change_below_the_magnitude_gate_is_not_reported():
    # 4 % on a tight history is significant, but smaller than the 5 % gate.
    series = noisy([100.0] * 20 + [104.0] * 20, seed=5, noise=0.002)
    assert find_change_points(series) == []
    [point] = find_change_points(series, ChangePointParameters(min_magnitude=0.0))
    assert point.index == 20


def test_unmeasured_values_are_refused_not_filled():
    with pytest.raises(ValueError, match="measured"):
        find_change_points([1.0] * 5 + [float("nan")] + [1.0] * 6)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="window_len"):
        ChangePointParameters(window_len=1)
    with pytest.raises(ValueError, match="max_pvalue"):
        ChangePointParameters(max_pvalue=0)
    with pytest.raises(ValueError, match="min_trials must be at least two segments"):
        ChangePointParameters(min_segment=4, min_trials=6)
    assert ChangePointParameters() == ChangePointParameters(window_len=50, max_pvalue=0.001, min_magnitude=0.05,
                                                            min_segment=3, min_trials=6)


@pytest.mark.parametrize("series", [
    [100, 101, 99, 100, 101, 150],                       # one outlier, last
    noisy([100.0] * 20 + [200.0], seed=1),               # a long history and one outlier, last
    noisy([100.0] * 10 + [130.0] * 2, seed=3),           # a new level only two trials long: not yet confirmed
])
def test_a_level_of_fewer_than_three_trials_is_no_change(series):
    """Otava alone calls each of these a change (checked here with a one-trial level), so each is one that the
    minimum level length removes."""
    assert find_change_points(series) == []
    assert find_change_points(series, ChangePointParameters(min_segment=1)) != []


def test_a_new_level_is_reported_once_three_trials_confirm_it():
    [change] = find_change_points(noisy([100.0] * 10 + [130.0] * 3, seed=3))
    assert change.index == 10 and change.mean_after == pytest.approx(130.0, rel=0.03)



def test_an_outlier_among_the_last_three_trials_is_no_change():
    """The mean of the last three trials moves with one outlier among them (+100 %), their median does not: no change.
    Three trials at a new level are one."""
    series = noisy([100.0] * 20 + [400.0, 100.0, 100.0], seed=2)
    assert find_change_points(series) == []
    tripled = noisy([100.0] * 20 + [300.0, 310.0, 305.0], seed=2)
    [change] = find_change_points(tripled)
    assert change.index == 20
