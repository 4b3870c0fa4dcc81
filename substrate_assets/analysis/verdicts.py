"""Baseline against candidate: each figure's change, its interval, the noise it is judged against, and a verdict.

**The trial is the unit.** A side is one trial or a group of them, and each trial contributes its own figure: per
request name its floor-index p50 and p99 from its exact samples; its densities, capacity and failure ratio. A side's
figure is the mean of its trials' figures on the figure's scale (:mod:`noise`): the geometric mean on the ratio
scale — a latency's or a density's change is a factor, and the mean of logarithms is the estimate the t statistic
is exact for — and the plain mean on the difference scale (the failure ratio). One trial's figure is itself.

Per figure:

- **change**: ``e^Δ − 1`` with ``Δ`` the difference of the sides' mean logarithms (ratio scale), or the candidate's
  mean over the baseline's (difference scale);
- **interval**: the 95 % percentile interval of the change over :data:`~bootstrap.REPLICATES` seeded hierarchical
  bootstrap replicates (trials drawn with replacement, then each drawn trial's requests resampled);
- **noise**: the pooled trial-to-trial spread of the sides' repeats and the baseline configuration's history
  (:func:`noise.pooled_noise`), with its degrees of freedom; a t statistic ``Δ / (s · √(1/k_A + 1/k_B))`` and its
  two-sided p-value;
- **minimal detectable change**: the smallest true change the comparison would find with 80 % power;
- a trial-level **Mann–Whitney U** p-value over the trials' values, where the sides hold enough trials for it to be
  able to fall below the false-alarm rate (``2 / C(k_A + k_B, k_A)``; 0.029 at four a side).

**The verdict rule.** A comparison judges many figures at once; each is tested at ``false_alarm_rate / m``
(Bonferroni over the ``m`` figures judged), so identical configurations raise an alarm in at most that share of
comparisons. A figure *regressed* (or *improved*, by its better side) only when its change reaches the suite's
threshold, its t test is below that level — the change is beyond the noise floor's multiple for these trial counts
— and the bootstrap interval excludes no change. Otherwise it is *no change* when the comparison could have seen a
change of the threshold's size (its minimal detectable change is within the threshold), and *inconclusive* when it
could not: with no noise estimate at all (one trial a side and fewer than three earlier trials), or too few trials
for the noise. A verdict is null when a side did not measure the figure, or measured too few samples in a trial
for its percentile to say anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from substrate_assets.analysis.bootstrap import (
    REPLICATES,
    figure_rng,
    group_percentiles,
    group_values,
    percentile_interval,
)
from substrate_assets.analysis.noise import (
    Noise,
    Scale,
    as_change,
    detectable_shift,
    fits_ratio_scale,
    on_scale,
    pooled_noise,
    t_p_value,
    t_quantile,
    trials_needed,
)
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.thresholds import Thresholds

Better = Literal["lower", "higher"]
Verdict = Literal["regressed", "improved", "no change", "inconclusive"]
# Which of a suite's thresholds a figure is judged by: a relative one (latency, densities and capacity) or the
# failure ratio's absolute one.
ThresholdKind = Literal["latency", "density", "failure_ratio"]

CONFIDENCE = 0.95
LATENCY_PERCENTILES = (("p50", 500), ("p99", 990))
# A trial's percentile is judged only with at least this many samples at or above it (p99: 901 samples, p50: 19).
MIN_TAIL = 10
NO_NOISE = ("one trial a side and fewer than 3 earlier trials of the baseline's configuration: the trial-to-trial "
            "noise is unknown, so no change can be told from it")


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Side:
    label: str
    trial_ids: tuple[str, ...]


@dataclass(frozen=True)
class Measured:
    """One figure as each side's trials and the baseline configuration's history measured it: one value per trial
    (only trials that measured it), and for a latency percentile each side trial's samples, ascending."""

    figure: str
    unit: str
    better: Better
    kind: ThresholdKind
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    history: tuple[float, ...] = ()
    per_mille: int | None = None
    baseline_samples: tuple[np.ndarray, ...] = ()
    candidate_samples: tuple[np.ndarray, ...] = ()
    # Why the figure gets no verdict although both sides measured it (a percentile from too few samples).
    unjudged: str | None = None
    # Why a side has no value: it did not measure the figure in every one of its trials.
    unmeasured: str | None = None


@dataclass(frozen=True)
class FigureComparison:
    """One compared figure. ``change_pct``, ``interval`` and ``detectable`` are percent changes on the ratio scale;
    on the difference scale ``interval`` and ``detectable`` are in the figure's unit."""

    figure: str
    unit: str
    better: Better
    scale: Scale
    baseline: float | None
    candidate: float | None
    change_pct: float | None
    difference: float | None
    interval: Interval | None
    # The trial-to-trial spread (a coefficient of variation on the ratio scale) and its degrees of freedom.
    noise: float | None
    noise_df: int | None
    detectable: float | None
    # The 95 % interval of the change from the noise: Δ ± t · s · √(1/k_A + 1/k_B), what the t test rests on.
    noise_interval: Interval | None
    p_value: float | None
    rank_p_value: float | None
    baseline_trials: int
    candidate_trials: int
    history_trials: int
    verdict: Verdict | None
    why: str | None = None
    # Trials a side (equal sides, the same history) whose minimal detectable change reaches the threshold.
    trials_needed: int | None = None


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    thresholds: Thresholds
    figures: list[FigureComparison]
    differences: list[str] = field(default_factory=list)
    # What the history is: e.g. "12 earlier trials of configuration 3f2a… (suite quick-smoke)"; None without one.
    history: str | None = None
    # The figure tests' level: the false-alarm rate over the number of figures judged.
    level: float | None = None


def change_pct(baseline: float | None, candidate: float | None) -> float | None:
    """Candidate over baseline in percent; null when either is unmeasured or the baseline is 0."""
    if baseline is None or candidate is None or baseline == 0:
        return None
    return (candidate / baseline - 1.0) * 100.0


def tail_count(n: int, per_mille: int) -> int:
    """How many of ``n`` ascending samples are at or above the floor-index percentile: with few, the percentile is
    one of the last samples (p99 of 100 is the maximum) and says little about the tail."""
    return n - min(n * per_mille // 1000, n - 1)


def samples_needed(per_mille: int) -> int:
    """The fewest samples whose floor-index percentile has :data:`MIN_TAIL` at or above it."""
    n = MIN_TAIL
    while tail_count(n, per_mille) < MIN_TAIL:
        n += 1
    return n


def side_values(trials: Sequence[Sequence[float] | None], what: str) -> tuple[tuple[float, ...], str | None]:
    """A side's values of a figure, one per trial: all of them when every trial measured it, else none and why (a
    mean over some of a side's trials would pass for the side's)."""
    measured = [float(value) for value in trials if value is not None]
    if len(measured) == len(trials):
        return tuple(measured), None
    return (), f"{what} measured it in {len(measured)} of its {len(trials)} trials" if measured else None


def latency_figures(name: str, baseline: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                    history: dict[str, Sequence[float]] | None = None) -> list[Measured]:
    """The p50 and p99 of request ``name``: each trial's own floor-index percentile from its samples (ascending; an
    empty array is a trial without the request). ``history`` maps ``p50``/``p99`` to the baseline configuration's
    earlier trials' values."""
    rows = []
    for label, per_mille in LATENCY_PERCENTILES:
        values = {}
        whys = []
        for role, trials in (("the baseline", baseline), ("the candidate", candidate)):
            figures = [floor_index(trial, per_mille) if len(trial) else None for trial in trials]
            values[role], why = side_values(figures, role)
            whys += [why] if why else []
        unjudged = None
        if values["the baseline"] and values["the candidate"]:
            fewest = min(len(trial) for trial in (*baseline, *candidate))
            if tail_count(fewest, per_mille) < MIN_TAIL:
                unjudged = (f"too few samples in a trial (a {label} verdict needs {samples_needed(per_mille)} in "
                            f"each; the fewest has {fewest})")
        rows.append(Measured(f"{name} {label}", "ms", "lower", "latency", values["the baseline"],
                             values["the candidate"], tuple((history or {}).get(label, ())), per_mille,
                             tuple(baseline), tuple(candidate), unjudged, "; ".join(whys) or None))
    return rows


def scalar_figure(figure: str, unit: str, better: Better, kind: ThresholdKind,
                  baseline: Sequence[float | None], candidate: Sequence[float | None],
                  history: Sequence[float] = ()) -> Measured:
    """A figure with one value per trial (densities, capacity, the failure ratio); None is a trial that did not
    measure it."""
    base, base_why = side_values(baseline, "the baseline")
    cand, cand_why = side_values(candidate, "the candidate")
    return Measured(figure, unit, better, kind, base, cand, tuple(history),
                    unmeasured="; ".join(why for why in (base_why, cand_why) if why) or None)


def rank_test(baseline: np.ndarray, candidate: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value; 1.0 when every value on both sides is the same (no test to run)."""
    from scipy.stats import mannwhitneyu  # scipy takes a third of a second to import: only where a test runs

    if np.all(baseline == baseline[0]) and np.all(candidate == baseline[0]):
        return 1.0
    return float(mannwhitneyu(candidate, baseline, alternative="two-sided").pvalue)


def rank_test_reaches(k_baseline: int, k_candidate: int, level: float) -> bool:
    """Whether an exact rank test over this many trials a side can give a two-sided p below ``level`` at all."""
    return 2 / math.comb(k_baseline + k_candidate, k_baseline) < level


def _unmeasured(measured: Measured) -> str:
    if measured.unmeasured:
        return measured.unmeasured
    if not measured.baseline and not measured.candidate:
        return "measured by neither side"
    return "not measured by the baseline" if not measured.baseline else "not measured by the candidate"


@dataclass(frozen=True)
class _Evidence:
    """A measured figure on its scale, before the verdict: what the figure tests of a comparison share."""

    measured: Measured
    scale: Scale
    baseline: np.ndarray
    candidate: np.ndarray
    history: np.ndarray
    noise: Noise | None

    @property
    def judged(self) -> bool:
        return self.measured.unjudged is None and self.noise is not None


def _evidence(measured: Measured) -> _Evidence | None:
    if not measured.baseline or not measured.candidate:
        return None
    ratio = measured.kind != "failure_ratio" and fits_ratio_scale(measured.baseline, measured.candidate)
    scale: Scale = "ratio" if ratio else "difference"
    # A history value the ratio scale cannot take (a 0) is left out of the noise, never bent into it.
    history = [value for value in measured.history if scale == "difference" or value > 0]
    base, cand = on_scale(measured.baseline, scale), on_scale(measured.candidate, scale)
    hist = on_scale(history, scale)
    return _Evidence(measured, scale, base, cand, hist, pooled_noise([base, cand], hist))


def _interval(evidence: _Evidence, replicates: int) -> Interval:
    """The hierarchical bootstrap's 95 % interval of the change, in the change's terms."""
    measured, rng = evidence.measured, figure_rng(evidence.measured.figure)
    if measured.per_mille is not None:
        sides = [group_percentiles(samples, measured.per_mille, evidence.scale, replicates, rng)
                 for samples in (measured.baseline_samples, measured.candidate_samples)]
    else:
        sides = [group_values(values, replicates, rng) for values in (evidence.baseline, evidence.candidate)]
    low, high = percentile_interval(sides[1] - sides[0], CONFIDENCE)
    return Interval(as_change(low, evidence.scale), as_change(high, evidence.scale))


def _threshold(evidence: _Evidence, thresholds: Thresholds) -> tuple[float, str]:
    """The smallest shift on the figure's scale the suite counts as a change, and how the suite says it."""
    kind = evidence.measured.kind
    if kind == "failure_ratio":
        return thresholds.failure_ratio_change, f"±{thresholds.failure_ratio_change:g}"
    percent = thresholds.latency_change_pct if kind == "latency" else thresholds.density_change_pct
    if evidence.scale == "ratio":
        return math.log1p(percent / 100), f"±{percent:g} %"
    # A relative threshold on a figure some trial measured as 0: the same share of the baseline's mean.
    return percent / 100 * abs(float(evidence.baseline.mean())), f"±{percent:g} %"


def _moved(evidence: _Evidence, shift: float, thresholds: Thresholds) -> bool:
    """Whether the change reaches the threshold; from a mean of 0, any move does (no percentage exists)."""
    kind = evidence.measured.kind
    if kind == "failure_ratio":
        return abs(shift) >= thresholds.failure_ratio_change
    percent = thresholds.latency_change_pct if kind == "latency" else thresholds.density_change_pct
    if evidence.scale == "ratio":
        return abs(math.expm1(shift)) * 100 >= percent
    before = float(evidence.baseline.mean())
    return abs(shift) / abs(before) * 100 >= percent if before else shift != 0


def _figure(evidence: _Evidence, level: float, thresholds: Thresholds, replicates: int) -> FigureComparison:
    measured, scale, noise = evidence.measured, evidence.scale, evidence.noise
    base, cand = evidence.baseline, evidence.candidate
    shift = float(cand.mean() - base.mean())
    if scale == "ratio":
        before, after = math.exp(base.mean()), math.exp(cand.mean())
        change = math.expm1(shift) * 100
    else:
        before, after = float(base.mean()), float(cand.mean())
        change = change_pct(before, after)
    interval = _interval(evidence, replicates)
    rank_p = rank_test(np.sort(base), np.sort(cand)) if rank_test_reaches(len(base), len(cand),
                                                                          thresholds.false_alarm_rate) else None
    common = {"figure": measured.figure, "unit": measured.unit, "better": measured.better, "scale": scale,
              "baseline": before, "candidate": after, "change_pct": change, "difference": after - before,
              "interval": interval, "rank_p_value": rank_p, "baseline_trials": len(base),
              "candidate_trials": len(cand), "history_trials": noise.history if noise else 0}
    if noise is None:
        return FigureComparison(**common, noise=None, noise_df=None, detectable=None, noise_interval=None,
                                p_value=None,
                                verdict=None if measured.unjudged else "inconclusive",
                                why=measured.unjudged or NO_NOISE)
    error = noise.spread * math.sqrt(1 / len(base) + 1 / len(cand))
    statistic = shift / error if error else (math.nan if shift == 0 else math.copysign(math.inf, shift))
    p_value = t_p_value(statistic, noise.df)
    detect = detectable_shift(noise, len(base), len(cand), level)
    half = t_quantile(1 - (1 - CONFIDENCE) / 2, noise.df) * error
    common |= {"noise": noise.spread, "noise_df": noise.df, "detectable": as_change(detect, scale),
               "noise_interval": Interval(as_change(shift - half, scale), as_change(shift + half, scale)),
               "p_value": p_value}
    if measured.unjudged:
        return FigureComparison(**common, verdict=None, why=measured.unjudged)
    threshold, threshold_text = _threshold(evidence, thresholds)
    needed = trials_needed(noise, threshold, level, noise.history)
    if p_value < level and _moved(evidence, shift, thresholds) and interval.excludes_zero():
        worse = shift > 0 if measured.better == "lower" else shift < 0
        return FigureComparison(**common, verdict="regressed" if worse else "improved", trials_needed=needed)
    if detect <= threshold:
        return FigureComparison(**common, verdict="no change", trials_needed=needed)
    could = f"{as_change(detect, scale):.1f} %" if scale == "ratio" else f"{detect:.4g} {measured.unit}"
    more = f"about {needed} trials a side would" if needed else "more than 100 trials a side would be needed to"
    return FigureComparison(**common, verdict="inconclusive", trials_needed=needed, why=(
        f"could detect only a change of ≥ {could} with {len(base)} and {len(cand)} trials (noise from "
        f"{noise.describe()}), not the threshold's {threshold_text}: {more} detect it"))


def judge(measured: Sequence[Measured], thresholds: Thresholds,
          replicates: int = REPLICATES) -> tuple[list[FigureComparison], float]:
    """Every figure's comparison, in the order given, and the level each figure's test was held to: the false-alarm
    rate over the number of figures judged (those both sides measured, with a noise estimate)."""
    evidence = [_evidence(row) for row in measured]
    judged = sum(1 for row in evidence if row is not None and row.judged)
    level = thresholds.false_alarm_rate / max(judged, 1)
    rows = []
    for row, found in zip(measured, evidence, strict=True):
        if found is None:
            rows.append(FigureComparison(row.figure, row.unit, row.better, "ratio", _mean(row.baseline),
                                         _mean(row.candidate), None, None, None, None, None, None, None, None, None,
                                         len(row.baseline), len(row.candidate), 0, None, _unmeasured(row)))
        else:
            rows.append(_figure(found, level, thresholds, replicates))
    return rows, level


def _mean(values: tuple[float, ...]) -> float | None:
    return float(np.mean(values)) if values else None


def regressed(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "regressed"]


def inconclusive(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "inconclusive"]


def lost(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    """Figures the baseline measured and the candidate did not: a trial that stopped measuring them."""
    return [row for row in rows if row.baseline is not None and row.candidate is None]
