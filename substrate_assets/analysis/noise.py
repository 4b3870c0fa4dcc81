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
and no history. History counts only from :data:`MIN_HISTORY` trials (one or two earlier trials are no floor).

The **minimal detectable change** at two-sided level ``α`` and power ``1 − β`` with ``k_A`` and ``k_B`` trials is
``(t_{1−α/2, df} + t_{1−β, df}) · s · √(1/k_A + 1/k_B)`` (Kalibera and Jones; ``statistics.md`` §3).

The **robust spread** of a history — ``1.4826 · MAD / median`` (a robust CV), or ``1.4826 · MAD`` on the difference
scale — is shown beside the noise: far below it, one outlying trial inflates the noise. The **successive-difference
spread** ``1.048 · median |y_t − y_{t−1}|`` estimates the noise of a series that may hold steps (change points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Scale = Literal["ratio", "difference"]
# A history of fewer trials gives no noise floor (statistics.md §3).
MIN_HISTORY = 3
# The most recent trials of a configuration a noise floor is measured over.
HISTORY_WINDOW = 20
POWER = 0.8
MAD_TO_SD = 1.4826
SUCCESSIVE_TO_SD = 1.048


def on_scale(values: Sequence[float], scale: Scale) -> np.ndarray:
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


def squares(values: np.ndarray) -> tuple[float, int]:
    """The sum of squared deviations from the mean and its degrees of freedom."""
    if len(values) < 2:
        return 0.0, 0
    return float(np.sum((values - values.mean()) ** 2)), len(values) - 1


def pooled_noise(sides: Sequence[np.ndarray], history: np.ndarray) -> Noise | None:
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


def t_quantile(probability: float, df: int) -> float:
    from scipy.stats import t  # scipy costs a third of a second to import: only where a comparison is judged

    return float(t.ppf(probability, df))


def t_p_value(statistic: float, df: int) -> float:
    """Two-sided p-value of a t statistic (1.0 for 0/0, where nothing moved and nothing varies)."""
    from scipy.stats import t

    if math.isnan(statistic):
        return 1.0
    return float(min(1.0, 2 * t.sf(abs(statistic), df)))


def detectable_shift(noise: Noise, k_baseline: int, k_candidate: int, alpha: float, power: float = POWER) -> float:
    """The smallest true shift (on the figure's scale) a two-sided test at ``alpha`` finds with ``power``."""
    factor = t_quantile(1 - alpha / 2, noise.df) + t_quantile(power, noise.df)
    return factor * noise.spread * math.sqrt(1 / k_baseline + 1 / k_candidate)


def as_change(shift: float, scale: Scale) -> float:
    """A shift on the figure's scale as the change people read: percent on the ratio scale, else the unit's."""
    return math.expm1(shift) * 100 if scale == "ratio" else shift


def trials_needed(noise: Noise, threshold_shift: float, alpha: float, history: int, most: int = 100) -> int | None:
    """The fewest trials a side (equal sides) whose minimal detectable shift is at most ``threshold_shift``, with
    the same history; None when even ``most`` are not enough (or the noise is 0: one trial does)."""
    if noise.spread == 0:
        return 1
    for k in range(1, most + 1):
        df = 2 * (k - 1) + (history - 1 if history >= MIN_HISTORY else 0)
        if df == 0:
            continue
        if detectable_shift(Noise(noise.spread, df, 2 * k, history), k, k, alpha) <= threshold_shift:
            return k
    return None


def robust_spread(values: Sequence[float], scale: Scale) -> float | None:
    """``1.4826 · MAD / median`` (ratio scale, a robust CV) or ``1.4826 · MAD`` (difference scale); None with fewer
    than :data:`MIN_HISTORY` values or, on the ratio scale, a median of 0."""
    if len(values) < MIN_HISTORY:
        return None
    array = np.asarray(values, dtype=float)
    median = float(np.median(array))
    mad = MAD_TO_SD * float(np.median(np.abs(array - median)))
    if scale == "difference":
        return mad
    return None if median <= 0 else mad / median


def successive_spread(values: Sequence[float], scale: Scale) -> float | None:
    """``1.048 · median |y_t − y_{t−1}|`` of a series in order, on its scale: the noise of a series that may move to
    other levels, which a standard deviation over the whole series would count as noise. None below 3 values."""
    if len(values) < MIN_HISTORY or (scale == "ratio" and not fits_ratio_scale(values)):
        return None
    return SUCCESSIVE_TO_SD * float(np.median(np.abs(np.diff(on_scale(values, scale)))))
