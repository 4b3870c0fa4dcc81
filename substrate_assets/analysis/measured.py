"""A figure as each side's trials and the baseline configuration's history measured it, ready to be judged
(:mod:`~substrate_assets.analysis.verdicts`): one value per trial, and what the verdict needs beside it.

Builders, one per kind of figure:

- :func:`latency_figures`: a request's floor-index p50 and p99 per trial, from its exact samples (upstream's
  figures: reported and judged, never primary by default);
- :func:`wake_figures`: the wake's geometric mean, and where paths are known its geometric mean at a common mix of
  paths, each path's p50 and the slow share (:mod:`wake_figures`);
- :func:`scalar_figure`: one value per trial (densities, capacity);
- :func:`count_figure`: events of requests per trial (the failure ratio, the slow share), judged as counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from substrate_assets.analysis.counts import Count
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.wake_figures import (
    WAKE_PATHS,
    TrialWakes,
    common_mix,
    gmean,
    mix_text,
    mixed_gmean,
    slow_wakes,
)

Better = Literal["lower", "higher"]
# Which of a suite's thresholds a figure is judged by: a relative one (latency; densities and capacity), the failure
# ratio's absolute one, or a share's absolute one.
ThresholdKind = Literal["latency", "density", "failure_ratio", "share"]
LATENCY_PERCENTILES = (("p50", 500), ("p99", 990))
# A trial's percentile is judged only with at least this many samples at or above it (p99: 901 samples, p50: 19).
MIN_TAIL = 10


@dataclass(frozen=True)
class Counts:
    """Each trial's (events, requests): the sides' and the history's."""

    baseline: tuple[Count, ...]
    candidate: tuple[Count, ...]
    history: tuple[Count, ...] = ()


@dataclass(frozen=True)
class Measured:
    """One figure: one value per trial of each side (only trials that measured it) and of the history."""

    figure: str
    unit: str
    better: Better
    kind: ThresholdKind
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    history: tuple[float, ...] = ()
    # Why the figure gets no verdict although both sides measured it (a percentile from too few samples).
    unjudged: str | None = None
    # Why a side has no value: it did not measure the figure in every one of its trials.
    unmeasured: str | None = None
    # One of the suite's primary figures: most of the false-alarm budget is spent on those.
    primary: bool = False
    counts: Counts | None = None
    note: str | None = None
    # Which moment of the machine each side's trial ran at (its group, or itself): trials run back to back share one.
    baseline_moments: tuple[str, ...] = ()
    candidate_moments: tuple[str, ...] = ()

    def as_primary(self) -> Measured:
        return replace(self, primary=True)


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


def side_values(trials: Sequence[float | None], what: str) -> tuple[tuple[float, ...], str | None]:
    """A side's values of a figure, one per trial: all of them when every trial measured it, else none and why (a
    mean over some of a side's trials would pass for the side's)."""
    measured = [float(value) for value in trials if value is not None]
    if len(measured) == len(trials):
        return tuple(measured), None
    return (), f"{what} measured it in {len(measured)} of its {len(trials)} trials" if measured else None


def percentile_row(figure: str, per_mille: int, label: str, baseline: Sequence[npt.NDArray[np.floating[Any]]],
                    candidate: Sequence[npt.NDArray[np.floating[Any]]], history: Sequence[float],
                    note: str | None = None) -> Measured:
    values, whys = {}, []
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
    return Measured(figure, "ms", "lower", "latency", values["the baseline"], values["the candidate"],
                    tuple(history), unjudged, "; ".join(whys) or None, note=note)


def latency_figures(name: str, baseline: Sequence[npt.NDArray[np.floating[Any]]],
                    candidate: Sequence[npt.NDArray[np.floating[Any]]],
                    history: Mapping[str, Sequence[float]] | None = None) -> list[Measured]:
    """The p50 and p99 of request ``name``: each trial's own floor-index percentile from its samples (ascending; an
    empty array is a trial without the request). ``history`` maps ``p50``/``p99`` to the baseline configuration's
    earlier trials' values."""
    return [percentile_row(f"{name} {label}", per_mille, label, baseline, candidate, (history or {}).get(label, ()))
            for label, per_mille in LATENCY_PERCENTILES]


Figure = TypeVar("Figure")


def _per_trial(trials: Sequence[TrialWakes], figure: Callable[[TrialWakes], Figure | None]) -> list[Figure | None]:
    return [figure(trial) if len(trial.latencies) else None for trial in trials]


def _p50(samples: npt.NDArray[np.floating[Any]]) -> float:
    """The p50 of a history trial's wakes on a path of the common mix: the history holds trials with wakes
    (compare_figures.wake_rows), and each took every path of the mix."""
    value = floor_index(samples, 500)
    assert value is not None
    return float(value)


def wake_figures(name: str, baseline: Sequence[TrialWakes], candidate: Sequence[TrialWakes],
                 history: Sequence[TrialWakes] = ()) -> list[Measured]:
    """The wake's figures that do not jump between its groups: ``<name> gmean``; and with paths known in every
    trial, ``<name> path gmean`` (at the common mix of every trial compared, history included), each common path's
    ``p50 (<path>)`` and the ``slow share``."""
    rows = [_scalar(f"{name} gmean", "ms", "lower", "latency", _per_trial(baseline, gmean),
                    _per_trial(candidate, gmean), _per_trial(history, gmean))]
    everyone = [*baseline, *candidate, *history]
    mix = common_mix([trial for trial in everyone if len(trial.latencies)])
    if mix is None or any(not len(trial.latencies) for trial in (*baseline, *candidate)):
        return rows
    def mixed(trial: TrialWakes) -> float | None:
        return mixed_gmean(trial, mix)

    rows.append(_scalar(f"{name} path gmean", "ms", "lower", "latency", _per_trial(baseline, mixed),
                        _per_trial(candidate, mixed), _per_trial(history, mixed),
                        note=f"geometric mean at a common mix of paths: {mix_text(mix)}"))
    for path in (path for path in WAKE_PATHS if path in mix):
        rows.append(percentile_row(f"{name} p50 ({path})", 500, "p50", [trial.on_path(path) for trial in baseline],
                                    [trial.on_path(path) for trial in candidate],
                                    [_p50(trial.on_path(path)) for trial in history]))
    past = [count for count in _per_trial(history, slow_wakes) if count is not None]
    rows.append(replace(count_figure(f"{name} slow share", _per_trial(baseline, slow_wakes),
                                     _per_trial(candidate, slow_wakes), past, unit="share", kind="share"),
                        note="the share of wakes that waited for a cold host"))
    return rows


def _scalar(figure: str, unit: str, better: Better, kind: ThresholdKind, baseline: Sequence[float | None],
            candidate: Sequence[float | None], history: Sequence[float | None], note: str | None = None) -> Measured:
    row = scalar_figure(figure, unit, better, kind, baseline, candidate,
                        [value for value in history if value is not None])
    return replace(row, note=note) if note else row


def scalar_figure(figure: str, unit: str, better: Better, kind: ThresholdKind,
                  baseline: Sequence[float | None], candidate: Sequence[float | None],
                  history: Sequence[float] = ()) -> Measured:
    """A figure with one value per trial (densities, capacity); None is a trial that did not measure it."""
    base, base_why = side_values(baseline, "the baseline")
    cand, cand_why = side_values(candidate, "the candidate")
    return Measured(figure, unit, better, kind, base, cand, tuple(history),
                    unmeasured="; ".join(why for why in (base_why, cand_why) if why) or None)


def count_figure(figure: str, baseline: Sequence[Count | None], candidate: Sequence[Count | None],
                 history: Sequence[Count] = (), unit: str = "ratio", kind: ThresholdKind = "failure_ratio") -> Measured:
    """Events of requests per trial (None: a trial that counted none), its ratio judged as counts: failed requests
    (the failure ratio), or slow wakes of the wakes whose path is known (a ``share``)."""
    def ratios(trials: Sequence[Count | None]) -> list[float | None]:
        return [None if trial is None or trial[1] == 0 else trial[0] / trial[1] for trial in trials]

    row = scalar_figure(figure, unit, "lower", kind, ratios(baseline), ratios(candidate),
                        [k / n for k, n in history if n])
    if not row.baseline or not row.candidate:
        return row
    measured = [tuple(trial for trial in side if trial is not None and trial[1]) for side in (baseline, candidate)]
    return replace(row, counts=Counts(measured[0], measured[1], tuple(trial for trial in history if trial[1])))
