"""The verdict rule for one figure, and what it can see.

A figure's change is ``Δ`` on its scale (the difference of the sides' mean logarithms on the ratio scale, of their
means on the difference scale), estimated with standard error ``SE = s · √(1/k_A + 1/k_B)`` from a trial-to-trial
spread ``s`` with ``df`` degrees of freedom. The suite's threshold is the **margin** ``m``: ``log1p(threshold)`` on
the ratio scale — symmetric, so +10 % (log 1.1) mirrors −9.1 %, not −10 % — and the threshold itself on the
difference scale. The rule:

- **regressed** or **improved** (by the figure's better side): the change reaches the margin, ``|Δ| ≥ m``, and the
  two-sided t test of ``Δ`` is below the figure's level ``α_f`` (its share of the comparison's false-alarm budget);
- **no change**: an equivalence test (two one-sided tests, Schuirmann) at the suite's false-alarm rate ``α``: the
  ``1 − 2α`` interval ``Δ ± t_{1−α, df} · SE`` lies inside ``(−m, m)``;
- **inconclusive**: neither. The three are exclusive: a change that reaches the margin fails the equivalence test.

**What the rule can see.** Its power at a true change ``δ`` is the chance that ``Δ`` reaches ``max(m, t_{1−α_f/2} ·
s · c)`` (``c = √(1/k_A + 1/k_B)``), with ``Δ`` normal around ``δ`` and ``s²`` scaled χ² with ``df`` degrees of
freedom around the true spread; the **minimal detectable change** is the ``δ`` this power reaches 80 % at. It is
always above the margin: a true change equal to the threshold is found about half of the time, however many trials.
The **trials a side** that would settle a figure are the fewest with which the equivalence test says "no change" in
80 % of comparisons that changed nothing: ``(t_{1−α, df} + z_{0.9}) · s · c ≤ m``. With those, a change of twice the
margin is found more often than that.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Call = Literal["changed", "no change", "inconclusive"]
POWER = 0.8
# The most trials a side the advice ever counts to.
MOST_TRIALS = 100


def t_quantile(probability: float, df: float) -> float:
    """Student's t quantile; the normal one for ``df`` infinite (a test on counts)."""
    from scipy import special  # scipy takes a third of a second to import: only where a comparison is judged

    return float(special.ndtri(probability) if math.isinf(df) else special.stdtrit(df, probability))


def normal_quantile(probability: float) -> float:
    from scipy import special

    return float(special.ndtri(probability))


def t_p_value(statistic: float, df: float) -> float:
    """Two-sided p-value of a t statistic (1.0 for 0/0: nothing moved and nothing varies)."""
    from scipy import special

    if math.isnan(statistic):
        return 1.0
    tail = special.ndtr(-abs(statistic)) if math.isinf(df) else special.stdtr(df, -abs(statistic))
    return float(min(1.0, 2 * tail))


@dataclass(frozen=True)
class Estimate:
    """A change on the figure's scale, its standard error and the degrees of freedom of that error (``math.inf``
    for a normal test, as counts have)."""

    shift: float
    error: float
    df: float

    @property
    def statistic(self) -> float:
        if self.error > 0:
            return self.shift / self.error
        return math.nan if self.shift == 0 else math.copysign(math.inf, self.shift)

    def p_value(self) -> float:
        return t_p_value(self.statistic, self.df)

    def interval(self, confidence: float) -> tuple[float, float]:
        """The two-sided ``confidence`` interval of the shift."""
        half = t_quantile(1 - (1 - confidence) / 2, self.df) * self.error
        return self.shift - half, self.shift + half


def call(estimate: Estimate, level: float, margin: float, equivalence_alpha: float) -> Call:
    """The rule: ``changed`` (the caller names the direction), ``no change`` or ``inconclusive``."""
    if abs(estimate.shift) >= margin and estimate.p_value() < level:
        return "changed"
    low, high = estimate.interval(1 - 2 * equivalence_alpha)
    if -margin < low and high < margin:
        return "no change"
    return "inconclusive"


# The estimated spread's distribution is taken at this many equally likely points (midpoints of its quantiles).
SPREAD_POINTS = 400


@functools.lru_cache(maxsize=256)
def _spread_ratios(df: float) -> npt.NDArray[np.float64]:
    """``s / σ`` at :data:`SPREAD_POINTS` equally likely points: ``√(χ²_df / df)`` at the midpoints of its quantiles."""
    from scipy.stats import chi2

    return np.asarray(np.sqrt(chi2.ppf((np.arange(SPREAD_POINTS) + 0.5) / SPREAD_POINTS, df) / df), dtype=np.float64)


def rule_power(change: float, error: float, df: float, level: float, margin: float) -> float:
    """The chance the rule calls a true shift ``change`` (> 0) changed in its direction, when the spread behind
    ``error`` is the truth and its estimate has ``df`` degrees of freedom: the average over the estimate's
    distribution of the chance the shift's estimate reaches ``max(margin, t_{1−level/2} · estimated error)``."""
    from scipy.special import ndtr

    if math.isinf(df):
        bar = np.array([max(margin, t_quantile(1 - level / 2, df) * error)])
    else:
        bar = np.maximum(margin, t_quantile(1 - level / 2, df) * error * _spread_ratios(df))
    return float(np.mean(ndtr((change - bar) / error)))


def detectable(error: float, df: float, level: float, margin: float, power: float = POWER) -> float:
    """The minimal detectable change of the rule as applied: the true shift found with ``power``."""
    from scipy.optimize import brentq

    if error == 0:
        return margin
    def short(change: float) -> float:
        return rule_power(change, error, df, level, margin) - power

    high = margin + 4 * error
    while short(high) < 0:  # few degrees of freedom: the t test's bar reaches far
        high = margin + 2 * (high - margin)
    return float(brentq(short, margin, high, xtol=1e-6 * max(margin, error)))


def trials_to_settle(spread: float, history_df: int, alpha: float, margin: float, drift_variance: float = 0.0,
                     most: int = MOST_TRIALS) -> int | None:
    """The fewest trials a side (equal sides, the same history and moments) with which the equivalence test says
    "no change" in :data:`POWER` of comparisons that changed nothing; None beyond ``most`` (1 when nothing varies).
    ``drift_variance`` is the part of the change's variance the sides' moments give, which more trials keep."""
    from scipy import special

    if spread == 0 and drift_variance == 0:
        return 1
    sides = np.arange(1, most + 1)
    df = 2 * (sides - 1) + history_df
    usable = df > 0
    factor = normal_quantile(1 - (1 - POWER) / 2)
    bound = np.full(len(sides), np.inf)
    errors = np.sqrt(drift_variance + spread ** 2 * 2 / sides[usable])
    bound[usable] = (special.stdtrit(df[usable], 1 - alpha) + factor) * errors
    enough = np.flatnonzero(bound <= margin)
    return int(sides[enough[0]]) if len(enough) else None
