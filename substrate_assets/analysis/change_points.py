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
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from otava.analysis import TTestStats
    from otava.change_point_divisive.base import ChangePoint as OtavaChangePoint


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
    - ``min_segment`` (3): every level — before the first change, between two, after the last — holds at least
      three trials. Otava has no such bound, so one outlying trial, the last above all, would be a change of its
      own (Otava PR #150 proposes the same; Orion holds back points near the series' end). A change is reported once
      three trials at the new level confirm it; a point too close to another or to an end is dropped and the rest
      merged again by Otava's own rule.
    - ``min_trials`` (6): a series of fewer measurements is not analysed: two levels of ``min_segment``.
    """

    window_len: int = 50
    max_pvalue: float = 0.001
    min_magnitude: float = 0.05
    min_segment: int = 3
    min_trials: int = 6

    def __post_init__(self) -> None:
        if self.window_len < 2:
            raise ValueError(f"window_len must be at least 2, not {self.window_len}")
        if not 0 < self.max_pvalue < 1:
            raise ValueError(f"max_pvalue must be between 0 and 1, not {self.max_pvalue}")
        if self.min_magnitude < 0:
            raise ValueError(f"min_magnitude must not be negative, not {self.min_magnitude}")
        if self.min_segment < 1:
            raise ValueError(f"min_segment must be at least 1, not {self.min_segment}")
        if self.min_trials < 2 * self.min_segment:
            raise ValueError(f"min_trials must be at least two segments ({2 * self.min_segment}), not "
                             f"{self.min_trials}")

    def describe(self) -> str:
        return (f"window {self.window_len} trials, p < {self.max_pvalue}, "
                f"magnitude > {self.min_magnitude * 100:.0f} %, "
                f"at least {self.min_segment} trials at each level, at least {self.min_trials} trials")


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


def _shortest_level(points: Sequence[OtavaChangePoint], length: int) -> tuple[int, int]:
    """(the index in ``points`` of the point next to the shortest level, that level's length)."""
    bounds = [0, *(point.index for point in points), length]
    lengths = [min(bounds[i + 1] - bounds[i], bounds[i + 2] - bounds[i + 1]) for i in range(len(points))]
    shortest = min(range(len(points)), key=lambda i: lengths[i])
    return shortest, lengths[shortest]


def _median_magnitudes(points: Sequence[OtavaChangePoint], series: Sequence[float]) -> list[float]:
    """Each point's magnitude (Otava's: the larger of ``|after / before − 1|`` and its inverse) between the medians
    of the levels on either side of it: a level's median is what its trials measured, one outlying trial or two
    aside."""
    bounds = [0, *(point.index for point in points), len(series)]
    medians = [float(np.median(series[bounds[i]:bounds[i + 1]])) for i in range(len(bounds) - 1)]
    magnitudes = []
    for before, after in pairwise(medians):
        if before <= 0 or after <= 0:
            magnitudes.append(math.inf if before != after else 0.0)
        else:
            magnitudes.append(max(abs(after / before - 1), abs(before / after - 1)))
    return magnitudes


def _without(points: list[OtavaChangePoint], index: int, series: list[float],
             parameters: ChangePointParameters) -> list[OtavaChangePoint]:
    """The points less ``points[index]``, each one's statistics recomputed against its new neighbours."""
    from otava.analysis import TTestSignificanceTester

    tester = TTestSignificanceTester(parameters.max_pvalue)
    rest = points[:index] + points[index + 1:]
    intervals = tester.get_intervals(rest)
    return [tester.change_point(point.to_candidate(), series, intervals) for point in rest]


def _levels_long_enough(points: list[OtavaChangePoint], series: list[float],
                        parameters: ChangePointParameters) -> list[OtavaChangePoint]:
    """Otava's points less those bounding a level of fewer than ``min_segment`` trials, then less those whose levels'
    medians differ by less than ``min_magnitude`` (a level's mean moves with one outlying trial, its median does not:
    an outlier among a series' last three trials is no change), one at a time, each time with its neighbours'
    statistics recomputed; then Otava's merge again over what is left, since a point's statistics change with its
    neighbours."""
    from otava.analysis import merge

    points = sorted(points, key=lambda point: point.index)
    while points:
        shortest, length = _shortest_level(points, len(series))
        if length >= parameters.min_segment:
            break
        points = _without(points, shortest, series, parameters)
    while points:
        magnitudes = _median_magnitudes(points, series)
        weakest = min(range(len(points)), key=lambda i: magnitudes[i])
        if magnitudes[weakest] >= parameters.min_magnitude:
            break
        points = _without(points, weakest, series, parameters)
    return list(merge(points, series, parameters.max_pvalue, parameters.min_magnitude))


def load_engine() -> None:
    """Import Otava (and scipy under it) now, ~1 s: a process about to time a load (``run``, before its trial) pays
    for it here rather than inside the first change_points build."""
    import otava.analysis  # noqa: F401


def find_change_points(values: Sequence[float],
                       parameters: ChangePointParameters = DEFAULT_PARAMETERS) -> list[ChangePoint]:
    """The change points of ``values`` (measurements in trial order, every one finite), in order."""
    if any(not math.isfinite(value) for value in values):
        raise ValueError("a series holds measured (finite) values only")
    if len(values) < parameters.min_trials or _is_constant(values):
        return []
    # Imported here: Otava (and scipy under it) costs ~0.7 s to import, paid by every process that loads the
    # Dagster definitions (each run's worker) while only a change_points build uses it.
    from otava.analysis import compute_change_points

    # A segment without spread (the same value repeated) has a t statistic of ±inf or 0/0; Otava's tester and
    # scipy then warn, and the p-value they give is used as it is (a NaN one is never below max_pvalue).
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # A list, not an array: Otava's detector cuts each window out of a list, but would take an array whole.
        series = [float(value) for value in values]
        found, _weak = compute_change_points(series, window_len=parameters.window_len,
                                             max_pvalue=parameters.max_pvalue,
                                             min_magnitude=parameters.min_magnitude)
        found = _levels_long_enough(found, series, parameters)
    return [_change_point(point.index, point.stats) for point in found if math.isfinite(point.stats.pvalue)]
