"""Figures of any request row a trial recorded, judged like the wake's: ``ResumeActor:p50`` names the floor-index p50
of each trial's successful ``ResumeActor`` samples, ``:p99`` its p99, ``:mean`` its arithmetic mean and ``:gmean``
its geometric mean (the stable middle of a latency whose requests fall into groups, as wakes do). A row named alone
is its geometric mean.

Each value is a trial's own, from its exact samples (``request_samples``): a trial that kept no request log (an
upstream run) did not measure the figure, and no value stands in for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from substrate_assets.analysis.figure_spec import RequestFigure
from substrate_assets.analysis.measured import LATENCY_PERCENTILES, Measured, percentile_row, scalar_figure
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.wake_figures import log_mean

_PER_MILLE = dict(LATENCY_PERCENTILES)


def _value(samples: npt.NDArray[np.floating[Any]], statistic: str) -> float | None:
    if not len(samples):
        return None
    if statistic == "mean":
        return float(np.mean(samples))
    if statistic == "gmean":
        mean = log_mean(samples)
        return None if mean is None else float(np.exp(mean))
    value = floor_index(samples, _PER_MILLE[statistic])
    assert value is not None  # the samples are not empty
    return float(value)


def request_figure_row(wanted: RequestFigure, baseline: Sequence[npt.NDArray[np.floating[Any]]],
                       candidate: Sequence[npt.NDArray[np.floating[Any]]],
                       history: Sequence[npt.NDArray[np.floating[Any]]] = ()) -> Measured:
    """The figure over each trial's samples of the row (ascending; an empty array is a trial without the row), and
    over each history trial's."""
    past = [value for trial in history if (value := _value(trial, wanted.statistic)) is not None]
    if wanted.statistic in _PER_MILLE:
        return percentile_row(wanted.figure, _PER_MILLE[wanted.statistic], wanted.statistic, baseline, candidate,
                              past)
    def values(trials: Sequence[npt.NDArray[np.floating[Any]]]) -> list[float | None]:
        return [_value(trial, wanted.statistic) for trial in trials]

    return scalar_figure(wanted.figure, "ms", "lower", "latency", values(baseline), values(candidate), past)
