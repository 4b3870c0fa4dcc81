"""A figure that counts events among trials' requests, judged as counts: failed requests (the failure ratio), wakes
that took the slow path among those whose path is known (the slow share).

Each trial contributes ``k`` events of ``n`` requests; a side's ratio is its events over its requests. Trials of one
configuration scatter more than binomial sampling would (a slow spell fails a burst of requests), so the binomial
variance is scaled by a **dispersion** ``φ`` (quasi-binomial): Pearson's χ² of each group's trials about that group's
own ratio — the sides' repeats and the baseline configuration's history — over its degrees of freedom, at least 1
(never below binomial), and 1 where no group has two trials to measure it by.

- **The test** is exact and conditional, on counts deflated by ``φ``: given ``K`` events in all, the candidate's
  share of them is binomial with probability ``n_B / (n_A + n_B)`` under no change. With no event at all, p = 1:
  one failed request beside none is p = 1, never p = 0.
- **The interval** of the difference of ratios is normal, its variance ``φ (p_A(1 − p_A)/n_A + p_B(1 − p_B)/n_B)``
  with each ratio floored at one event in the smallest trial of the comparison: a side that saw no failure is not
  certain it never fails (a zero spread would make every difference infinitely significant).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Count = tuple[int, int]  # (events, requests) of one trial


@dataclass(frozen=True)
class CountEvidence:
    baseline_ratio: float
    candidate_ratio: float
    dispersion: float
    dispersion_df: int
    p_value: float
    # The standard error of the difference of ratios (floored as above), and the requests of the smallest trial.
    error: float
    smallest_trial: int

    @property
    def shift(self) -> float:
        return self.candidate_ratio - self.baseline_ratio


def _totals(trials: Sequence[Count]) -> tuple[int, int]:
    return sum(k for k, _ in trials), sum(n for _, n in trials)


def pearson(groups: Sequence[Sequence[Count]]) -> tuple[float, int]:
    """Pearson's χ² of each group's trials about the group's own ratio, and its degrees of freedom (a group of one
    trial, or whose ratio is 0 or 1, adds none: it has no spread to show)."""
    total, df = 0.0, 0
    for group in groups:
        trials = [(k, n) for k, n in group if n > 0]
        events, requests = _totals(trials)
        if len(trials) < 2 or requests == 0:
            continue
        ratio = events / requests
        if ratio in (0.0, 1.0):
            df += len(trials) - 1
            continue
        total += sum((k - n * ratio) ** 2 / (n * ratio * (1 - ratio)) for k, n in trials)
        df += len(trials) - 1
    return total, df


def dispersion(groups: Sequence[Sequence[Count]]) -> tuple[float, int]:
    """``φ = max(1, χ² / df)`` over the groups, and its degrees of freedom (φ = 1 with none)."""
    chi_square, df = pearson(groups)
    return (max(1.0, chi_square / df), df) if df else (1.0, 0)


def conditional_p_value(baseline: Count, candidate: Count, scale: float) -> float:
    """The two-sided exact conditional test of two ratios, on counts divided by ``scale``."""
    from scipy.stats import binomtest

    events = round((baseline[0] + candidate[0]) / scale)
    if events == 0:
        return 1.0
    share = candidate[1] / (baseline[1] + candidate[1])
    observed = min(events, round(candidate[0] / scale))
    return float(binomtest(observed, events, share).pvalue)


def compare_counts(baseline: Sequence[Count], candidate: Sequence[Count],
                   history: Sequence[Count] = ()) -> CountEvidence | None:
    """The counts test of the candidate's ratio against the baseline's; None when a side made no request."""
    base, cand = _totals(baseline), _totals(candidate)
    if base[1] == 0 or cand[1] == 0:
        return None
    phi, phi_df = dispersion([baseline, candidate, history])
    smallest = min(n for _, n in (*baseline, *candidate) if n > 0)
    floor = 1 / smallest
    variance = sum(max(k / n, floor) * (1 - min(max(k / n, floor), 1 - floor)) / n for k, n in (base, cand))
    return CountEvidence(base[0] / base[1], cand[0] / cand[1], phi, phi_df,
                         conditional_p_value(base, cand, phi), math.sqrt(phi * variance), smallest)
