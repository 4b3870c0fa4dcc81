"""What a comparison of a baseline and a candidate says: its sides, each figure's change with its interval, noise and
verdict (:func:`~substrate_assets.analysis.verdicts.judge` makes them), and the figures picked by verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from substrate_assets.analysis.noise import Scale
from substrate_assets.analysis.thresholds import Thresholds

Verdict = Literal["regressed", "improved", "no change", "inconclusive"]

@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Side:
    label: str
    trial_ids: tuple[str, ...]
    # Trials of the side left out of it, each with why (a disturbed trial).
    left_out: tuple[str, ...] = ()
    # The group the side is (run --repeat, ab), when it is one.
    group: str | None = None


@dataclass(frozen=True)
class FigureComparison:
    """One compared figure. ``change_pct``, the intervals and ``detectable`` are percent changes on the ratio scale;
    on the difference scale the intervals and ``detectable`` are in the figure's unit."""

    figure: str
    unit: str
    better: str
    scale: Scale
    baseline: float | None
    candidate: float | None
    change_pct: float | None
    difference: float | None
    # The 95 % interval of the change from the noise: Δ ± t · SE.
    interval: Interval | None
    # The trial-to-trial spread (a coefficient of variation on the ratio scale) and its degrees of freedom.
    noise: float | None
    noise_df: float | None
    detectable: float | None
    p_value: float | None
    baseline_trials: int
    candidate_trials: int
    history_trials: int
    verdict: Verdict | None
    why: str | None = None
    # The trials a side (equal sides, the same history) with which a comparison that changed nothing says so.
    trials_needed: int | None = None
    primary: bool = False
    # The figure's share of the false-alarm budget: its test's level.
    level: float | None = None
    # The 1 − 2α interval the equivalence test ("no change") rests on.
    equivalence_interval: Interval | None = None
    # The rounds' correlation (paired sides only): how much of the noise the rounds shared.
    correlation: float | None = None
    # The spread between moments of the machine (τ, on the figure's scale), when the history drifted and the sides
    # ran at different moments: part of the change's error that more trials a side do not shrink.
    drift: float | None = None
    # How the figure was made, where that needs saying (the common mix of a path gmean).
    note: str | None = None
    # The suite's threshold for the figure as the suite states it: percent, or the unit's amount for a failure ratio
    # or a share (FRACTION_UNITS).
    threshold: float | None = None
    # Judged as counts (analysis.counts: the failure ratio, the slow share): the noise is the dispersion over
    # binomial, and no number of trials a side is counted to settle it.
    counted: bool = False


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    thresholds: Thresholds
    figures: list[FigureComparison]
    differences: list[str] = field(default_factory=list)
    # What the history is: e.g. "12 earlier trials of configuration 3f2a… (suite quick-smoke)"; None without one.
    history: str | None = None
    # How many rounds (ab) the sides were analysed as; 0 when they were not.
    rounds: int = 0
    # Notes on the data behind the verdicts: trials left out (disturbed), disturbed trials kept, a primary figure
    # not measured. (Those the figures tell, a drifting history and the rounds' correlation, are the report's.)
    warnings: list[str] = field(default_factory=list)

    @property
    def paired(self) -> bool:
        """Whether the sides were analysed as rounds (ab)."""
        return self.rounds > 0


def regressed(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "regressed"]


def improved(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "improved"]


def inconclusive(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "inconclusive"]


def unjudged(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    """Figures both sides measured that got no verdict (a percentile from too few samples in a trial)."""
    return [row for row in rows if row.verdict is None and row.baseline is not None and row.candidate is not None]


def lost(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    """Figures the baseline measured and the candidate did not: a trial that stopped measuring them."""
    return [row for row in rows if row.baseline is not None and row.candidate is None]
