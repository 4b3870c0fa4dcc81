"""Baseline against candidate: the statistics and the verdict of each compared figure.

**Latency** (a request's exact samples on each side): the floor-index p50 and p99 of each side, a seeded 95 %
percentile-bootstrap interval of the candidate's minus the baseline's percentile, and a two-sided Mann–Whitney U
p-value (scipy). A bootstrap resample's percentile needs no resample: the floor-index percentile of ``n`` draws is
the draw of rank ``k = min(n·permille // 1000, n − 1) + 1``, the ``k``-th smallest of ``n`` uniform indices is
``floor(n·U)`` with ``U`` the ``k``-th smallest of ``n`` uniforms, which is Beta(k, n + 1 − k) distributed; so one
Beta draw per replicate picks the resample's percentile from the sorted samples, exactly as resampling would, in
O(replicates) after one sort (2 × 100k samples take milliseconds, where 10,000 real resamples take minutes).

**Scalars** (densities, capacity, failure ratio): one value per side (a group's trials averaged; its failure ratio
pooled over all its requests) and a verdict from the change alone.

A verdict is ``regressed``, ``improved`` or ``no change``; null when a side did not measure the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.thresholds import Thresholds

Better = Literal["lower", "higher"]
Verdict = Literal["regressed", "improved", "no change"]

BOOTSTRAP_REPLICATES = 10_000
BOOTSTRAP_SEED = 20_261_201
CONFIDENCE_PER_MILLE = 950
# A percentile is judged only with at least this many samples at or above it on each side (p99: 901 samples per
# side, p50: 19).
MIN_TAIL = 10


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class FigureComparison:
    """One compared figure: a latency percentile of one request name, or a scalar."""

    figure: str
    unit: str
    better: Better
    baseline: float | None
    candidate: float | None
    change_pct: float | None
    difference: Interval | None
    p_value: float | None
    baseline_n: int
    candidate_n: int
    verdict: Verdict | None
    # Why there is no verdict: a side did not measure the figure, or measured too little of it.
    why: str | None = None


@dataclass(frozen=True)
class Side:
    label: str
    trial_ids: tuple[str, ...]


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    thresholds: Thresholds
    figures: list[FigureComparison]
    differences: list[str] = field(default_factory=list)


def change_pct(baseline: float | None, candidate: float | None) -> float | None:
    """Candidate over baseline in percent; null when either is unmeasured or the baseline is 0."""
    if baseline is None or candidate is None or baseline == 0:
        return None
    return (candidate / baseline - 1.0) * 100.0


def bootstrap_percentiles(ordered: np.ndarray, per_mille: int, replicates: int,
                          rng: np.random.Generator) -> np.ndarray:
    """``replicates`` bootstrap replicates of the floor-index percentile of ascending ``ordered``."""
    n = len(ordered)
    rank = min(n * per_mille // 1000, n - 1) + 1
    uniforms = rng.beta(rank, n + 1 - rank, size=replicates)
    return ordered[np.minimum((uniforms * n).astype(np.int64), n - 1)]


def difference_replicates(baseline: np.ndarray, candidate: np.ndarray, per_mille: int,
                          replicates: int = BOOTSTRAP_REPLICATES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Bootstrap replicates of candidate − baseline percentile (both ascending, non-empty), ascending."""
    rng = np.random.default_rng(seed)
    return np.sort(bootstrap_percentiles(candidate, per_mille, replicates, rng)
                   - bootstrap_percentiles(baseline, per_mille, replicates, rng))


def percentile_interval(differences: np.ndarray, miss: float) -> Interval:
    """The interval of ascending replicate ``differences`` that misses ``miss`` of them, half on each side: its ends
    are the floor-index ranks ``floor(B · miss / 2)`` and ``B − 1`` minus that, like every percentile here."""
    tail = int(len(differences) * miss / 2)
    return Interval(float(differences[tail]), float(differences[len(differences) - 1 - tail]))


def difference_interval(baseline: np.ndarray, candidate: np.ndarray, per_mille: int,
                        replicates: int = BOOTSTRAP_REPLICATES, seed: int = BOOTSTRAP_SEED) -> Interval:
    """The 95 % percentile-bootstrap interval of candidate − baseline percentile."""
    return percentile_interval(difference_replicates(baseline, candidate, per_mille, replicates, seed),
                               (1000 - CONFIDENCE_PER_MILLE) / 1000)


def tail_count(n: int, per_mille: int) -> int:
    """How many of ``n`` ascending samples are at or above the floor-index percentile: with few, the percentile is
    one of the last samples (p99 of 100 is the maximum) and says little about the tail."""
    return n - min(n * per_mille // 1000, n - 1)


def rank_test(baseline: np.ndarray, candidate: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value; 1.0 when every sample on both sides is the same value (no test to run)."""
    from scipy.stats import mannwhitneyu  # scipy takes a third of a second to import: only where a test runs

    if baseline[0] == baseline[-1] == candidate[0] == candidate[-1]:
        return 1.0
    return float(mannwhitneyu(candidate, baseline, alternative="two-sided").pvalue)


def _worse(change: float, better: Better) -> bool:
    return change > 0 if better == "lower" else change < 0


def _verdict(moved: bool, change: float, better: Better) -> Verdict:
    if not moved:
        return "no change"
    return "regressed" if _worse(change, better) else "improved"


LATENCY_PERCENTILES = (("p50", 500), ("p99", 990))


def samples_needed(per_mille: int) -> int:
    """The fewest samples whose floor-index percentile has :data:`MIN_TAIL` at or above it."""
    n = MIN_TAIL
    while tail_count(n, per_mille) < MIN_TAIL:
        n += 1
    return n


def _moved(before: float, after: float, change: float | None, threshold_pct: float) -> bool:
    """Moved by at least ``threshold_pct``; from 0, any move at all (no percentage exists)."""
    return abs(change) >= threshold_pct if change is not None else after != before


def compare_latency(name: str, baseline: np.ndarray, candidate: np.ndarray, thresholds: Thresholds,
                    family: int = len(LATENCY_PERCENTILES)) -> list[FigureComparison]:
    """The p50 and p99 rows of one request name, from each side's samples in ascending order. ``family`` is how
    many latency percentiles the whole comparison judges: a verdict's interval misses 5 % / ``family`` of the
    replicates (Bonferroni), so 40 step percentiles of two equal trials do not make one false regression in
    every comparison; the 95 % interval is what is shown."""
    measured = len(baseline) > 0 and len(candidate) > 0
    p_value = rank_test(baseline, candidate) if measured else None
    rows = []
    for label, per_mille in LATENCY_PERCENTILES:
        before, after = floor_index(baseline, per_mille), floor_index(candidate, per_mille)
        before = None if before is None else float(before)
        after = None if after is None else float(after)
        change = change_pct(before, after)
        interval, verdict, why = None, None, None
        if measured and before is not None and after is not None:
            differences = difference_replicates(baseline, candidate, per_mille)
            interval = percentile_interval(differences, (1000 - CONFIDENCE_PER_MILLE) / 1000)
            judged = percentile_interval(differences, (1000 - CONFIDENCE_PER_MILLE) / 1000 / max(family, 1))
            if min(tail_count(len(baseline), per_mille), tail_count(len(candidate), per_mille)) < MIN_TAIL:
                why = f"too few samples (a {label} verdict needs {samples_needed(per_mille)} a side)"
            else:
                significant = label != "p50" or (p_value is not None and p_value < thresholds.p_value)
                moved = _moved(before, after, change, thresholds.latency_change_pct)
                verdict = _verdict(moved and (judged.low > 0 or judged.high < 0) and significant, after - before,
                                   "lower")
        rows.append(FigureComparison(f"{name} {label}", "ms", "lower", before, after, change, interval,
                                     p_value, len(baseline), len(candidate), verdict,
                                     why or unmeasured(before, after)))
    return rows


def unmeasured(before: float | None, after: float | None) -> str | None:
    if before is None and after is None:
        return "measured by neither side"
    if before is None:
        return "not measured by the baseline"
    return "not measured by the candidate" if after is None else None


def compare_scalar(figure: str, unit: str, better: Better, baseline: Sequence[float],
                   candidate: Sequence[float], thresholds: Thresholds) -> FigureComparison:
    """A figure with one value per trial: each side's mean, a verdict from the percent change (the density
    threshold), and a Mann–Whitney U p-value over the trials' values when each side has at least two."""
    before = float(np.mean(baseline)) if len(baseline) else None
    after = float(np.mean(candidate)) if len(candidate) else None
    change = change_pct(before, after)
    p_value = None
    if len(baseline) >= 2 and len(candidate) >= 2:
        p_value = rank_test(np.sort(np.asarray(baseline, dtype=float)), np.sort(np.asarray(candidate, dtype=float)))
    verdict = None
    if before is not None and after is not None:
        verdict = _verdict(_moved(before, after, change, thresholds.density_change_pct), after - before, better)
    return FigureComparison(figure, unit, better, before, after, change, None, p_value, len(baseline),
                            len(candidate), verdict, unmeasured(before, after))


def compare_failure_ratio(baseline: tuple[int, int], candidate: tuple[int, int],
                          thresholds: Thresholds) -> FigureComparison:
    """Failed over all requests, pooled over each side's trials ((failures, requests) per side); changed when the
    ratios differ by at least ``failure_ratio_change``."""
    before = baseline[0] / baseline[1] if baseline[1] else None
    after = candidate[0] / candidate[1] if candidate[1] else None
    verdict = None
    if before is not None and after is not None:
        verdict = _verdict(abs(after - before) >= thresholds.failure_ratio_change, after - before, "lower")
    return FigureComparison("failure_ratio", "ratio", "lower", before, after, change_pct(before, after), None,
                            None, baseline[1], candidate[1], verdict, unmeasured(before, after))


def regressed(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    return [row for row in rows if row.verdict == "regressed"]


def lost(rows: Sequence[FigureComparison]) -> list[FigureComparison]:
    """Figures the baseline measured and the candidate did not: a trial that stopped measuring them."""
    return [row for row in rows if row.baseline is not None and row.candidate is None]
