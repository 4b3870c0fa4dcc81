"""Baseline against candidate: each figure's change, its interval, the noise it is judged against, and a verdict.

**The trial is the unit.** A side is one trial or a group of them, and each trial contributes its own figure (built
by :mod:`~substrate_assets.analysis.measured`). A side's figure is the mean of its trials' figures on the figure's
scale (:mod:`noise`): the geometric mean on the ratio scale, the plain mean on the difference scale. A figure of
counts (the failure ratio) is judged as counts (:mod:`counts`).

Per figure:

- **change**: ``e^Δ − 1`` with ``Δ`` the difference of the sides' mean logarithms (ratio scale), or the candidate's
  mean less the baseline's (difference scale);
- **noise**: the pooled trial-to-trial spread of the sides' repeats and the baseline configuration's history
  (:func:`noise.pooled_noise`); when the sides ran as rounds (``ab``: one baseline and one candidate trial per round,
  back to back), of the rounds' differences instead of the sides' repeats, with the history — the rounds share the
  machine's moment, which the differences cancel — and the correlation of the rounds' two trials is reported;
- the t test of ``Δ`` against that noise, its interval, and the **verdict** by :mod:`rule`: regressed or improved
  when the change reaches the suite's threshold (symmetric on the log scale) and the test is below the figure's
  level; no change when the equivalence test puts the change inside ±threshold; inconclusive otherwise;
- the rule's **minimal detectable change** and the trials a side that would settle the figure.

**The false-alarm budget** (the suite's ``false_alarm_rate``: the chance that identical configurations get any
regressed or improved verdict) is spent unequally: ``primary_share`` of it on the suite's primary figures (the ones
its question is about; by default the wake's geometric mean), the rest shared by every other judged figure; within
each part, Bonferroni. A verdict is null when a side did not measure the figure, or measured too few samples in a
trial for its percentile to say anything: that figure is *unjudged*, and named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from substrate_assets.analysis.comparison import FigureComparison, Interval, Verdict
from substrate_assets.analysis.counts import compare_counts
from substrate_assets.analysis.measured import Measured, ThresholdKind
from substrate_assets.analysis.moments import (
    MIN_DRIFT_SERIES,
    DriftingError,
    drifting_error,
    moments_of,
    series_drift,
)
from substrate_assets.analysis.noise import (
    MIN_HISTORY,
    Noise,
    Scale,
    as_change,
    fits_ratio_scale,
    floored,
    on_scale,
    pooled_noise,
    squares,
    step_floor,
)
from substrate_assets.analysis.rule import Estimate, call, detectable, trials_to_settle
from substrate_assets.analysis.thresholds import Thresholds

CONFIDENCE = 0.95
NO_NOISE = ("one trial a side and fewer than 3 earlier trials of the baseline's configuration: the trial-to-trial "
            "noise is unknown, so no change can be told from it")


class _Common(TypedDict, total=False):
    """The fields of a FigureComparison its builders (a figure on its scale, a figure of counts) gather first."""

    figure: str
    unit: str
    better: str
    scale: Scale
    baseline_trials: int
    candidate_trials: int
    history_trials: int
    primary: bool
    level: float | None
    note: str | None
    threshold: float | None
    counted: bool


class _Measured(_Common, total=False):
    """With a figure on its scale, the sides' values from the start."""

    baseline: float | None
    candidate: float | None
    change_pct: float | None
    difference: float | None
    correlation: float | None


class _Judged(_Measured, total=False):
    """Every field but the verdict's, once the figure has a noise."""

    interval: Interval | None
    equivalence_interval: Interval | None
    noise: float | None
    noise_df: float | None
    p_value: float | None
    drift: float | None
    detectable: float | None


def change_pct(baseline: float | None, candidate: float | None) -> float | None:
    """Candidate over baseline in percent; null when either is unmeasured or the baseline is 0."""
    if baseline is None or candidate is None or baseline == 0:
        return None
    return (candidate / baseline - 1.0) * 100.0


def _unmeasured(measured: Measured) -> str:
    if measured.unmeasured:
        return measured.unmeasured
    if not measured.baseline and not measured.candidate:
        return "measured by neither side"
    return "not measured by the baseline" if not measured.baseline else "not measured by the candidate"


Pairs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class _Evidence:
    """A measured figure on its scale, before the verdict: what the figure tests of a comparison share."""

    measured: Measured
    scale: Scale
    baseline: npt.NDArray[np.floating[Any]]
    candidate: npt.NDArray[np.floating[Any]]
    noise: Noise | None
    # Analysed as rounds: the noise is the rounds' differences' (and the history's, within its moments).
    paired: bool = False
    correlation: float | None = None
    # Sides run at different moments of a machine whose history drifted: the error counts the drift between them.
    drifting: DriftingError | None = None

    @property
    def judged(self) -> bool:
        return self.measured.unjudged is None and (self.noise is not None or self.measured.counts is not None)

    @property
    def error(self) -> tuple[float, float]:
        """The standard error of the change and its degrees of freedom."""
        assert self.noise is not None
        if self.drifting is not None:
            return self.drifting.error, self.drifting.df
        sides = math.sqrt(2 / len(self.baseline)) if self.paired else \
            math.sqrt(1 / len(self.baseline) + 1 / len(self.candidate))
        return self.noise.spread * sides, self.noise.df


def _paired_noise(base: npt.NDArray[np.floating[Any]], cand: npt.NDArray[np.floating[Any]], pairs: Pairs,
                  history: npt.NDArray[np.floating[Any]]) -> tuple[Noise | None, float | None]:
    """The noise of rounds: half the squared spread of the rounds' differences (each difference holds two trials'
    noise, less what the round shared), pooled with the history's noise within its moments (half its mean squared
    successive difference: the drift between its moments is no round's); and the rounds' correlation (3+ rounds)."""
    differences = np.array([cand[j] - base[i] for i, j in pairs])
    squares_d, df_d = squares(differences / math.sqrt(2))
    total, df = squares_d, df_d
    if len(history) >= MIN_HISTORY:
        total += float(np.sum(np.diff(history) ** 2)) / 2
        df += len(history) - 1
    noise = Noise(math.sqrt(total / df), df, len(pairs) if df_d else 0, len(history) if len(history) >=
                  MIN_HISTORY else 0) if df else None
    correlation = None
    if len(pairs) >= 3:
        first, second = base[[i for i, _ in pairs]], cand[[j for _, j in pairs]]
        if np.std(first) > 0 and np.std(second) > 0:
            correlation = float(np.corrcoef(first, second)[0, 1])
    return noise, correlation


def _moments(labels: tuple[str, ...], count: int) -> tuple[str, ...]:
    """A side's moment labels; each trial its own where the side did not say."""
    return labels if len(labels) == count else tuple(f"trial {index}" for index in range(count))


def _evidence(measured: Measured, pairs: Pairs | None) -> _Evidence | None:
    if not measured.baseline or not measured.candidate:
        return None
    ratio = measured.kind not in ("failure_ratio", "share") and fits_ratio_scale(measured.baseline,
                                                                                 measured.candidate)
    scale: Scale = "ratio" if ratio else "difference"
    # A history value the ratio scale cannot take (a 0) is left out of the noise, never bent into it.
    history = on_scale([value for value in measured.history if scale == "difference" or value > 0], scale)
    base, cand = on_scale(measured.baseline, scale), on_scale(measured.candidate, scale)
    floor = step_floor(base, cand, history)
    if pairs and len(base) == len(cand) == len(pairs):
        noise, correlation = _paired_noise(base, cand, pairs, history)
        return _Evidence(measured, scale, base, cand, floored(noise, floor), True, correlation)
    base_moments = _moments(measured.baseline_moments, len(base))
    cand_moments = _moments(measured.candidate_moments, len(cand))
    # The drift is measured over the history, or with none over a baseline of many moments (a configuration's
    # history judged as the baseline itself).
    series = history if len(history) >= MIN_DRIFT_SERIES else base if moments_of(base_moments) >= MIN_DRIFT_SERIES \
        else np.empty(0)
    drift = series_drift(series)
    noise = floored(pooled_noise([base, cand], history), floor)
    if drift is None or not drift.drifted or noise is None:
        return _Evidence(measured, scale, base, cand, noise)
    drifting = drifting_error(base, cand, base_moments, cand_moments, drift)
    return _Evidence(measured, scale, base, cand, Noise(drifting.spread, round(drifting.df), noise.repeats,
                                                        noise.history), drifting=drifting)


def margin(evidence: _Evidence, thresholds: Thresholds) -> tuple[float, float]:
    """The smallest shift on the figure's scale the suite counts as a change, and the suite's threshold as it states
    it (percent, or a failure ratio's or share's amount)."""
    kind = evidence.measured.kind
    absolute = absolute_threshold(kind, thresholds)
    if absolute is not None:
        return absolute, absolute
    percent = thresholds.latency_change_pct if kind == "latency" else thresholds.density_change_pct
    if evidence.scale == "ratio":
        return math.log1p(percent / 100), percent
    # A relative threshold on a figure some trial measured as 0: the same share of the baseline's mean.
    return percent / 100 * abs(float(evidence.baseline.mean())), percent


def absolute_threshold(kind: ThresholdKind, thresholds: Thresholds) -> float | None:
    """The threshold of a figure judged by an amount of its unit (a failure ratio's, a share's); None for a relative
    one."""
    if kind == "failure_ratio":
        return thresholds.failure_ratio_change
    return thresholds.share_change if kind == "share" else None


def _direction(shift: float, better: str) -> Verdict:
    worse = shift > 0 if better == "lower" else shift < 0
    return "regressed" if worse else "improved"


def _as_interval(low: float, high: float, scale: Scale) -> Interval:
    return Interval(as_change(low, scale), as_change(high, scale))


def _history_df(noise: Noise) -> int:
    return noise.history - 1 if noise.history else 0


def _figure(evidence: _Evidence, level: float, thresholds: Thresholds) -> FigureComparison:
    measured, scale, noise = evidence.measured, evidence.scale, evidence.noise
    base, cand = evidence.baseline, evidence.candidate
    shift = float(cand.mean() - base.mean())
    if scale == "ratio":
        before, after = math.exp(base.mean()), math.exp(cand.mean())
        change: float | None = math.expm1(shift) * 100
    else:
        before, after = float(base.mean()), float(cand.mean())
        change = change_pct(before, after)
    common: _Measured = {
        "figure": measured.figure, "unit": measured.unit, "better": measured.better, "scale": scale,
        "baseline": before, "candidate": after, "change_pct": change, "difference": after - before,
        "baseline_trials": len(base), "candidate_trials": len(cand), "history_trials": noise.history if noise else 0,
        "primary": measured.primary, "level": level, "correlation": evidence.correlation, "note": measured.note}
    bound, common["threshold"] = margin(evidence, thresholds)
    if noise is None:
        return FigureComparison(**common, interval=None, noise=None, noise_df=None, detectable=None, p_value=None,
                                verdict=None if measured.unjudged else "inconclusive",
                                why=measured.unjudged or NO_NOISE)
    estimate = Estimate(shift, *evidence.error)
    judged: _Judged = {
        **common, "noise": noise.spread, "noise_df": estimate.df, "p_value": estimate.p_value(),
        "drift": None if evidence.drifting is None else evidence.drifting.between,
        "interval": _as_interval(*estimate.interval(CONFIDENCE), scale),
        "equivalence_interval": _as_interval(*estimate.interval(1 - 2 * thresholds.false_alarm_rate), scale),
        "detectable": as_change(detectable(estimate.error, noise.df, level, bound), scale)}
    if measured.unjudged:
        return FigureComparison(**judged, verdict=None, why=measured.unjudged)
    needed = trials_to_settle(noise.spread, _history_df(noise), thresholds.false_alarm_rate, bound,
                              0.0 if evidence.drifting is None else evidence.drifting.between ** 2 *
                              evidence.drifting.moments)
    return _verdict(judged, estimate, level, bound, thresholds, needed)


def _verdict(common: _Judged, estimate: Estimate, level: float, bound: float, thresholds: Thresholds,
             needed: int | None) -> FigureComparison:
    outcome = call(estimate, level, bound, thresholds.false_alarm_rate)
    if outcome == "changed":
        return FigureComparison(**common, verdict=_direction(estimate.shift, common["better"]), trials_needed=needed)
    if outcome == "no change":
        return FigureComparison(**common, verdict="no change", trials_needed=needed)
    # Why (its interval, what it could detect, the trials that would settle it) is the report's to say, from the
    # figure's fields: report/verdict_text.py's why_text.
    return FigureComparison(**common, verdict="inconclusive", trials_needed=needed)


# Past this the rule's minimal detectable change is shown as none (percent, ratio scale): a side of two trials and a
# secondary figure's level put the t test's bar at 10^60 % and more, a figure that means nothing to a reader.
SHOWN_REACH_PCT = 1000.0
# Units whose figures are fractions of one on the difference scale: a change past 1 cannot happen.
FRACTION_UNITS = ("ratio", "share")


def beyond_showing(reach: float, scale: Scale, unit: str) -> bool:
    """Whether a detectable change is past any the figure could show: over +1,000 % on the ratio scale, over 1 for a
    share or a failure ratio."""
    if scale == "ratio":
        return reach > SHOWN_REACH_PCT
    return unit in FRACTION_UNITS and reach > 1


def _counts_figure(measured: Measured, level: float, thresholds: Thresholds) -> FigureComparison:
    """A figure of counts: the exact conditional test on counts scaled by the dispersion, and the rule on the
    difference of ratios."""
    counts = measured.counts
    assert counts is not None
    found = compare_counts(counts.baseline, counts.candidate, counts.history)
    bound = absolute_threshold(measured.kind, thresholds)
    assert bound is not None, f"{measured.figure}: counts are judged by an amount of their unit"
    base_n, cand_n = len(counts.baseline), len(counts.candidate)
    common: _Common = {"figure": measured.figure, "unit": measured.unit, "better": measured.better,
                       "scale": "difference", "baseline_trials": base_n, "candidate_trials": cand_n,
                       "history_trials": len(counts.history), "primary": measured.primary, "level": level,
                       "note": measured.note, "threshold": bound, "counted": True}
    if found is None:
        return FigureComparison(**common, baseline=None, candidate=None, change_pct=None, difference=None,
                                interval=None, noise=None, noise_df=None, detectable=None, p_value=None,
                                verdict=None, why="a side made no request")
    estimate = Estimate(found.shift, found.error, math.inf)
    equivalence = Interval(*estimate.interval(1 - 2 * thresholds.false_alarm_rate))
    judged: _Judged = {**common, "baseline": found.baseline_ratio, "candidate": found.candidate_ratio,
                       "change_pct": change_pct(found.baseline_ratio, found.candidate_ratio),
                       "difference": found.shift, "interval": Interval(*estimate.interval(CONFIDENCE)),
                       "equivalence_interval": equivalence, "noise": found.dispersion,
                       "noise_df": found.dispersion_df, "p_value": found.p_value,
                       "detectable": detectable(found.error, math.inf, level, bound), "correlation": None,
                       "drift": None}
    changed = abs(found.shift) >= bound and found.p_value < level
    if changed:
        return FigureComparison(**judged, verdict=_direction(found.shift, measured.better))
    low, high = equivalence.low, equivalence.high
    if -bound < low and high < bound:
        return FigureComparison(**judged, verdict="no change")
    return FigureComparison(**judged, verdict="inconclusive")


def levels(evidence: Sequence[_Evidence | None], thresholds: Thresholds) -> tuple[float, float]:
    """Each primary figure's level and each other figure's: ``primary_share`` of the false-alarm rate over the
    judged primary figures, the rest over the others (all of it to one part when the other has none)."""
    judged = [row for row in evidence if row is not None and row.judged]
    primary = sum(row.measured.primary for row in judged)
    others = len(judged) - primary
    rate = thresholds.false_alarm_rate
    if not primary or not others:
        return rate / max(primary, 1), rate / max(others, 1)
    share = thresholds.primary_share
    return rate * share / primary, rate * (1 - share) / others


def judge(measured: Sequence[Measured], thresholds: Thresholds,
          pairs: Pairs | None = None) -> list[FigureComparison]:
    """Every figure's comparison, in the order given. ``pairs`` are the rounds (baseline index, candidate index)
    when the sides ran as rounds."""
    evidence = [None if row.counts is not None else _evidence(row, pairs) for row in measured]
    counted = [_Evidence(row, "difference", np.ones(1), np.ones(1), None) if row.counts is not None else None
               for row in measured]
    primary_level, other_level = levels([found or count for found, count in zip(evidence, counted, strict=True)],
                                        thresholds)
    rows = []
    for row, found in zip(measured, evidence, strict=True):
        level = primary_level if row.primary else other_level
        if row.counts is not None:
            rows.append(_counts_figure(row, level, thresholds))
        elif found is None:
            rows.append(FigureComparison(row.figure, row.unit, row.better, "ratio", _mean(row.baseline),
                                         _mean(row.candidate), None, None, None, None, None, None, None,
                                         len(row.baseline), len(row.candidate), 0, None, _unmeasured(row),
                                         primary=row.primary))
        else:
            rows.append(_figure(found, level, thresholds))
    return rows


def _mean(values: tuple[float, ...]) -> float | None:
    return float(np.mean(values)) if values else None
