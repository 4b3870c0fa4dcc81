"""A figure's noise at two scales of time: from one trial to the next within a moment of the machine, and from one
moment to another.

Trials run back to back (a group of ``run --repeat``, the two trials of an ``ab`` round) share the machine's moment:
its other guests, its caches, its clock. Over minutes the machine drifts, and every figure with it (this machine's
quick-smoke wakes move by several percent over a quarter of an hour while consecutive trials differ by two). Two
groups run at different moments then differ by the drift between their moments as well as by their trials' noise:

    Var(Δ) = τ² · (1/S_A + 1/S_B) + σ² · (1/k_A + 1/k_B)

with ``σ`` the spread within a moment, ``τ`` the spread between moments, ``k`` a side's trials and ``S`` its moments
(a group run back to back is one; a trial of its own is one; a history of separate trials, as many as it has). More
trials a side shrink only the second term: groups run at two moments cannot tell a change smaller than the drift
from it, however many trials they hold, while rounds (``ab``) cancel the drift their two trials share.

**Measured from the history** (the configuration's earlier trials, in time order): its variance ``s²`` holds both
terms, half its mean squared successive difference mostly the first (neighbours share most of their moment). The
history **drifted** when its von Neumann ratio (the second over the first) is low enough that independent trials
would rarely give it (one-sided, normal approximation, :data:`DRIFT_LEVEL`); then ``τ² = s² − MSSD/2`` enters the
error, its degrees of freedom by Satterthwaite's approximation. A history that did not drift is independent trials,
and its variance is more of the noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# The fewest trials a series is tested for drift over: fewer say nothing either way.
MIN_DRIFT_SERIES = 8
# A history whose von Neumann ratio independent trials would give less often than this drifted.
DRIFT_LEVEL = 0.05


@dataclass(frozen=True)
class Drift:
    """A series' variance (``total``), half its mean squared successive difference (``successive``), their degrees of
    freedom, and how likely independent trials would be to look this smooth (the von Neumann ratio test)."""

    total: float
    successive: float
    df: int
    p_value: float

    @property
    def between(self) -> float:
        """τ²: the variance between moments, beyond the trials' own."""
        return max(0.0, self.total - self.successive)

    @property
    def drifted(self) -> bool:
        return self.p_value < DRIFT_LEVEL and self.between > 0


def series_drift(series: npt.NDArray[np.floating[Any]]) -> Drift | None:
    """The drift of a series already on its scale, in time order; None below :data:`MIN_DRIFT_SERIES` values or for a
    series that does not vary."""
    n = len(series)
    if n < MIN_DRIFT_SERIES:
        return None
    total = float(np.var(series, ddof=1))
    if total == 0:
        return None
    successive = float(np.mean(np.diff(series) ** 2)) / 2
    from scipy.special import ndtr

    ratio = successive * 2 / total
    p_value = float(ndtr((ratio - 2) / math.sqrt(4 * (n - 2) / (n * n - 1))))
    return Drift(total, successive, n - 1, p_value)


def moments_of(labels: Sequence[str]) -> int:
    """How many moments a side's trials ran at: one per group (or per trial of its own)."""
    return len(set(labels))


def within_squares(values: npt.NDArray[np.floating[Any]], labels: Sequence[str]) -> tuple[float, int]:
    """The sum of squared deviations of each moment's trials from their moment's mean, and its degrees of freedom."""
    total, df = 0.0, 0
    for label in set(labels):
        members = values[[index for index, found in enumerate(labels) if found == label]]
        if len(members) > 1:
            total += float(np.sum((members - members.mean()) ** 2))
            df += len(members) - 1
    return total, df


@dataclass(frozen=True)
class DriftingError:
    """The standard error of a change between sides run at different moments of a drifting machine, and what it is
    made of."""

    error: float
    df: float
    spread: float  # σ: within a moment
    between: float  # τ: between moments
    moments: float  # 1/S_A + 1/S_B


def drifting_error(base: npt.NDArray[np.floating[Any]], cand: npt.NDArray[np.floating[Any]],
                   base_moments: Sequence[str], cand_moments: Sequence[str], drift: Drift) -> DriftingError:
    """``Var(Δ) = τ²(1/S_A + 1/S_B) + σ²(1/k_A + 1/k_B)``: τ² from the drifting series, σ² pooled from each side's
    trials within their moments and the series' successive differences. Satterthwaite's degrees of freedom over the
    three mean squares (the series' variance and successive variance, the pooled σ²)."""
    squares_a, df_a = within_squares(base, base_moments)
    squares_b, df_b = within_squares(cand, cand_moments)
    within_df = df_a + df_b + drift.df
    within = (squares_a + squares_b + drift.successive * drift.df) / within_df
    moments = 1 / moments_of(base_moments) + 1 / moments_of(cand_moments)
    trials = 1 / len(base) + 1 / len(cand)
    variance = moments * drift.between + trials * within
    terms = ((moments * drift.total) ** 2 / drift.df, (moments * drift.successive) ** 2 / drift.df,
             (trials * within) ** 2 / within_df)
    return DriftingError(math.sqrt(variance), variance ** 2 / sum(terms), math.sqrt(within),
                         math.sqrt(drift.between), moments)
