"""Change points in the history of one metric: where a series of trials' values moves to another level and stays.

The points are found by Apache Otava's own implementation of Hunter (Fleming et al., "Hunter: Using Change Point
Detection to Hunt for Performance Regressions", ICPE'23): a split step — E-divisive over sliding windows, each
candidate kept at a relaxed p-value of a two-sided Student t-test between the intervals it separates — then a merge
step that drops, one at a time, the weakest point (highest p-value, then smallest magnitude) and recomputes its
neighbours, until every point left has a p-value below ``max_pvalue`` and a magnitude above ``min_magnitude``.
That t-test variant has no random permutations: the same series always gives the same points.

A series holds measurements only. Otava fills a missing value with the previous one; here a trial that did not
measure a metric is simply not in that metric's series, so no value is ever invented.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from otava.analysis import TTestStats, compute_change_points


@dataclass(frozen=True)
class ChangePointParameters:
    """How change points are looked for.

    - ``window_len`` (50) and ``max_pvalue`` (0.001) are Otava's defaults: a window of 50 trials, and a change
      must be that unlikely under "no change" for a history that grows with every refresh not to fill with
      false alarms.
    - ``min_magnitude`` (0.05): a change smaller than 5 % either way is not reported, however significant. Otava's
      command line defaults to 0.0, Hunter's ``compute_change_points`` to 0.05; a trial's figures move by a few
      percent with the machine's noise alone, and a long, tight history makes even such a move significant, so
      without the gate every small drift would be a change point. Magnitude is Otava's: the larger of
      ``|after / before - 1|`` and ``|before / after - 1|``.
    - ``min_trials`` (6): a series of fewer measurements is not analysed. Six is the fewest that can hold three
      trials on either side of a change, and from fewer than three a level and its spread mean little: with a
      shorter series one unlucky trial would be enough to call a change.
    """

    window_len: int = 50
    max_pvalue: float = 0.001
    min_magnitude: float = 0.05
    min_trials: int = 6

    def __post_init__(self) -> None:
        if self.window_len < 2:
            raise ValueError(f"window_len must be at least 2, not {self.window_len}")
        if not 0 < self.max_pvalue < 1:
            raise ValueError(f"max_pvalue must be between 0 and 1, not {self.max_pvalue}")
        if self.min_magnitude < 0:
            raise ValueError(f"min_magnitude must not be negative, not {self.min_magnitude}")
        if self.min_trials < 2:
            raise ValueError(f"min_trials must be at least 2, not {self.min_trials}")

    def describe(self) -> str:
        return (f"window {self.window_len} trials, p < {self.max_pvalue}, magnitude > {self.min_magnitude:.0%}, "
                f"at least {self.min_trials} trials")


DEFAULT_PARAMETERS = ChangePointParameters()


@dataclass(frozen=True)
class ChangePoint:
    """A change in a series: ``index`` is the first value after it; the means are of the segments between the
    neighbouring change points (or the series' ends) on either side."""

    index: int
    mean_before: float
    mean_after: float
    # (mean_after / mean_before - 1) * 100; None when mean_before is 0, where no relative change exists.
    change_pct: float | None
    p_value: float


def _is_constant(values: Sequence[float]) -> bool:
    return min(values) == max(values)


def _change_point(index: int, stats: TTestStats) -> ChangePoint:
    before, after = float(stats.mean_1), float(stats.mean_2)
    change_pct = None if before == 0 else (after / before - 1.0) * 100.0
    return ChangePoint(int(index), before, after, change_pct, float(stats.pvalue))


def find_change_points(values: Sequence[float],
                       parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[ChangePoint]:
    """The change points of ``values`` (measurements in trial order, every one finite), in order."""
    if any(not math.isfinite(value) for value in values):
        raise ValueError("a series holds measured (finite) values only")
    if len(values) < parameters.min_trials or _is_constant(values):
        return []
    # A segment without spread (the same value repeated) has a t statistic of ±inf or 0/0; Otava's tester and
    # scipy then warn, and the p-value they give is used as it is (a NaN one is never below max_pvalue).
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # A list, not an array: Otava's detector cuts each window out of a list, but would take an array whole.
        found, _weak = compute_change_points([float(value) for value in values], window_len=parameters.window_len,
                                             max_pvalue=parameters.max_pvalue,
                                             min_magnitude=parameters.min_magnitude)
    return [_change_point(point.index, point.stats) for point in found if math.isfinite(point.stats.pvalue)]
