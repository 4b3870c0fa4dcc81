"""Trial-to-trial noise: how much a figure moves between trials of one configuration, and what a comparison can see
through it.

The trial is the unit of replication: the requests of one trial share its machine state, so the spread that
decides whether two sets of trials differ is the spread *between* trials of a figure (each trial's own p50, its
density, …), never the spread of requests inside one. A figure is compared on one of two scales:

- **ratio** (latencies, densities, capacity: positive, and a change is a factor): trial values are taken as
  logarithms, so the spread reads as a coefficient of variation (0.075 = 7.5 %) and a change ``Δ`` of the mean
  log is the factor ``e^Δ``;
- **difference** (the failure ratio, often 0): values as they are, the spread and a change in the figure's unit.

The **noise** of a comparison pools the sum of squared deviations of each side's trials from that side's mean
(its repeats) with that of the baseline configuration's history (its recent trials, from their own mean): the
ordinary pooled standard deviation, with ``Σ(k − 1)`` degrees of freedom, so a t statistic on it is exact for
normal trial values (tested by coverage on synthetic data). Unknown with no degree of freedom: one trial a side
and no history. History counts only from :data:`MIN_HISTORY` trials (one or two earlier trials are no floor). When
the history drifted, sides run at different moments differ by more than this: :mod:`moments`. Values measured in
whole steps are never less noisy than their rounding to the step (:func:`step_floor`).

What a comparison can see through this noise, by the rule it applies, is :mod:`rule`'s.

The **successive-difference spread** ``1.048 · median |y_t − y_{t−1}|`` estimates the noise of a series that may
hold steps or drift (change points): far below the standard deviation, the series moved between levels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Scale = Literal["ratio", "difference"]
# A history of fewer trials gives no noise floor (statistics.md §3).
MIN_HISTORY = 3
# The most recent trials of a configuration a noise floor is measured over.
HISTORY_WINDOW = 20
MAD_TO_SD = 1.4826
SUCCESSIVE_TO_SD = 1.048
# A value rounded to a grid is off by up to half a step, uniformly: a standard deviation of step / √12 (Sheppard).
ROUNDING_TO_SD = 1 / math.sqrt(12)


def on_scale(values: Sequence[float], scale: Scale) -> npt.NDArray[np.floating[Any]]:
    """Trial values as the comparison sees them: logarithms on the ratio scale (every value positive)."""
    array = np.asarray(values, dtype=float)
    return np.log(array) if scale == "ratio" else array


def fits_ratio_scale(*groups: Sequence[float]) -> bool:
    """A figure is compared as a ratio when every value of it is positive (a 0 has no logarithm)."""
    return all(value > 0 for group in groups for value in group)


@dataclass(frozen=True)
class Noise:
    """The trial-to-trial standard deviation of a figure (on its scale) and what it was measured from."""

    spread: float
    df: int
    # Trials of the comparison's own sides that counted (those of sides with two or more) and of the history.
    repeats: int
    history: int

    def describe(self) -> str:
        parts = [f"{self.repeats} repeated trials"] if self.repeats else []
        if self.history:
            parts.append(f"{self.history} earlier trials")
        return " and ".join(parts)


def squares(values: npt.NDArray[np.floating[Any]]) -> tuple[float, int]:
    """The sum of squared deviations from the mean and its degrees of freedom."""
    if len(values) < 2:
        return 0.0, 0
    return float(np.sum((values - values.mean()) ** 2)), len(values) - 1


def pooled_noise(sides: Sequence[npt.NDArray[np.floating[Any]]],
                 history: npt.NDArray[np.floating[Any]]) -> Noise | None:
    """The pooled trial-to-trial standard deviation of values already on their scale: each side about its own mean,
    the history (counted from :data:`MIN_HISTORY` trials) about its own. None with no degree of freedom."""
    total, df, repeats = 0.0, 0, 0
    for side in sides:
        sum_of_squares, side_df = squares(side)
        total, df, repeats = total + sum_of_squares, df + side_df, repeats + (len(side) if side_df else 0)
    used = len(history) if len(history) >= MIN_HISTORY else 0
    if used:
        sum_of_squares, history_df = squares(history)
        total, df = total + sum_of_squares, df + history_df
    if df == 0:
        return None
    return Noise(math.sqrt(total / df), df, repeats, used)


def step_floor(*groups: npt.NDArray[np.floating[Any]]) -> float:
    """The least trial-to-trial spread that values measured in steps can have (actors per node, a ladder's users),
    on their scale: the smallest distance between two different values among them (the step, or less) times
    :data:`ROUNDING_TO_SD`; 0 when they are all the same (nothing tells a step from a constant). Trials of a few
    whole steps tie often (two trials at 8 users), and a spread of 0 measured on them is no evidence that the figure
    never moves: a t test on it made every difference p = 0. For values not on a grid the floor is below any spread
    two different values of one side make, so it changes nothing."""
    values = np.unique(np.concatenate([np.asarray(group, dtype=float) for group in groups]))
    return float(np.min(np.diff(values))) * ROUNDING_TO_SD if len(values) > 1 else 0.0


def floored(noise: Noise | None, floor: float) -> Noise | None:
    """``noise`` with its spread at least ``floor`` (:func:`step_floor`), its degrees of freedom kept."""
    return noise if noise is None or noise.spread >= floor else replace(noise, spread=floor)


# Past this a shift on the log scale is no change a double holds as a percentage (e^709.8 overflows).
MAX_LOG_SHIFT = 700.0


def as_change(shift: float, scale: Scale) -> float:
    """A shift on the figure's scale as the change people read: percent on the ratio scale (infinite past what a
    double holds: the bar of a t test with one degree of freedom at a small level can be that far), else the
    unit's."""
    if scale != "ratio":
        return shift
    return math.expm1(shift) * 100 if shift < MAX_LOG_SHIFT else math.inf


def successive_spread(values: Sequence[float], scale: Scale) -> float | None:
    """``1.048 · median |y_t − y_{t−1}|`` of a series in order, on its scale: the noise of a series that may move to
    other levels, which a standard deviation over the whole series would count as noise. None below 3 values."""
    if len(values) < MIN_HISTORY or (scale == "ratio" and not fits_ratio_scale(values)):
        return None
    return SUCCESSIVE_TO_SD * float(np.median(np.abs(np.diff(on_scale(values, scale)))))
