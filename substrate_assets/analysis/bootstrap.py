"""Bootstrap replicates of a figure: of one trial's percentile, and of a group's figure over its trials.

**One trial's percentile** needs no resample: the floor-index percentile of ``n`` draws is the draw of rank
``k = min(n·permille // 1000, n − 1) + 1``, the ``k``-th smallest of ``n`` uniform indices is ``floor(n·U)`` with
``U`` the ``k``-th smallest of ``n`` uniforms, which is Beta(k, n + 1 − k) distributed; so one Beta draw per
replicate picks the resample's percentile from the sorted samples, exactly as resampling would, in O(replicates)
after one sort.

**A group's figure, hierarchically** (Kalibera and Jones): each replicate draws the group's ``k`` trials with
replacement, then, for each trial drawn, resamples its requests (one Beta draw, as above) — a trial drawn twice is
resampled twice, independently — and averages the drawn trials' figures on the figure's scale. With one trial a
side the outer draw is always that trial, and the replicates show only the noise of requests inside it: they
describe that trial, and never carry a verdict between trials alone.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from substrate_assets.analysis.noise import Scale, on_scale

REPLICATES = 10_000
SEED = 20_261_201


def figure_rng(figure: str, seed: int = SEED) -> np.random.Generator:
    """The generator of one figure's replicates: seeded by the figure's name, so a figure's interval is the same
    whatever else the comparison holds."""
    return np.random.default_rng([seed, zlib.crc32(figure.encode())])


def percentile_rank(n: int, per_mille: int) -> int:
    """The 1-based rank of the floor-index percentile among ``n`` ascending samples."""
    return min(n * per_mille // 1000, n - 1) + 1


def bootstrap_percentiles(ordered: np.ndarray, per_mille: int, replicates: int,
                          rng: np.random.Generator) -> np.ndarray:
    """``replicates`` bootstrap replicates of the floor-index percentile of ascending ``ordered`` (one trial)."""
    n = len(ordered)
    rank = percentile_rank(n, per_mille)
    uniforms = rng.beta(rank, n + 1 - rank, size=replicates)
    return ordered[np.minimum((uniforms * n).astype(np.int64), n - 1)]


def group_percentiles(trials: Sequence[np.ndarray], per_mille: int, scale: Scale, replicates: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Replicates of a group's mean percentile on ``scale``: trials drawn with replacement, then each drawn
    trial's requests resampled (``trials``: each one's samples, ascending, none empty)."""
    sizes = np.array([len(trial) for trial in trials], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pooled = np.concatenate(trials)
    ranks = np.minimum(sizes * per_mille // 1000, sizes - 1) + 1
    drawn = rng.integers(0, len(trials), size=(replicates, len(trials)))
    uniforms = rng.beta(ranks[drawn], sizes[drawn] + 1 - ranks[drawn])
    picked = pooled[offsets[drawn] + np.minimum((uniforms * sizes[drawn]).astype(np.int64), sizes[drawn] - 1)]
    return on_scale(picked, scale).mean(axis=1)


def group_values(values: np.ndarray, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Replicates of a group's mean of one value per trial (already on its scale): trials drawn with replacement."""
    return values[rng.integers(0, len(values), size=(replicates, len(values)))].mean(axis=1)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The interval of the replicates that leaves out ``1 − confidence`` of them, half on each side: its ends are the
    floor-index ranks ``floor(B · miss / 2)`` and ``B − 1`` minus that of the sorted replicates."""
    ordered = np.sort(replicates)
    tail = int(len(ordered) * (1 - confidence) / 2)
    return float(ordered[tail]), float(ordered[len(ordered) - 1 - tail])
