"""Figures of a trial's wakes that do not jump between the wakes' two groups.

A busy machine's wakes are a mixture: a fast group (an unpause, a restore on a warm host) and a slow one (a restore
that waited for a host to start). Their median sits where the groups meet, and moves from one group to the other as
the mix moves a few points: it jumps from trial to trial. Statistics that do not:

- the **geometric mean** (``gmean``): the mean of log latency over every wake, for every backend;
- where the runtime knows each wake's path (:mod:`substrate_assets.results.wake_paths`): the **geometric mean at a
  common mix of paths** (``path gmean``): each path's mean log latency, weighted by one mix for every trial of a
  comparison — the mean of the trials' shares of each path — so a trial's figure moves when its wakes on each path
  do, not when the mix does; each **path's own p50**; and the **slow share**, the share of wakes that took the slow
  path (a restore on a cold host), which carries the mix itself. The slow share is a count of wakes, judged as
  counts (:mod:`~substrate_assets.analysis.counts`): a few trials' shares of a few dozen wakes tie often, and a
  spread of zero measured on two trials is no evidence that the share never varies.

A path enters the common mix when every trial of the comparison took it at least :data:`MIN_PATH_WAKES` times (its
mean log latency is then measured in each); wakes of other paths are left to the slow share. The common paths must
hold at least :data:`MIN_COMMON_SHARE` of every trial's wakes: trials that wake by different paths (suspend against
pause: restores against unpauses) share no mix, and a figure of the few wakes one side took the other's way would
judge its minority, not its wakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

# A wake's path (results.wake_paths tells them from the runtime's events): an unpause, a restore on a warm or a cold
# host, or a restore from before the runtime said which host it took.
WAKE_PATHS = ("unpause", "restore_warm", "restore_cold", "restore")
# The path that waits for something the fast paths do not: a host's start.
SLOW_PATH = "restore_cold"
MIN_PATH_WAKES = 5
MIN_COMMON_SHARE = 0.5


@dataclass(frozen=True)
class TrialWakes:
    """One trial's wake latencies, ascending, and each one's path as its index in :data:`WAKE_PATHS` (aligned; −1
    where unknown; empty when no wake's path is known)."""

    latencies: npt.NDArray[np.floating[Any]]
    paths: npt.NDArray[np.int8] = field(default_factory=lambda: np.empty(0, dtype=np.int8))

    @classmethod
    def of(cls, latencies: npt.NDArray[np.floating[Any]], paths: list[str | None]) -> TrialWakes:
        """From latencies and their paths by name (sorted together by latency)."""
        order = np.argsort(latencies, kind="stable")
        codes = np.array([WAKE_PATHS.index(path) if path is not None else -1 for path in paths], dtype=np.int8)
        return cls(np.asarray(latencies, dtype=float)[order], codes[order] if (codes >= 0).any() else codes[:0])

    def on_path(self, path: str) -> npt.NDArray[np.floating[Any]]:
        if not len(self.paths):
            return np.empty(0)
        taken: npt.NDArray[np.floating[Any]] = self.latencies[self.paths == WAKE_PATHS.index(path)]
        return taken

    @property
    def known_paths(self) -> int:
        return int(np.count_nonzero(self.paths >= 0))

    def delayed(self, milliseconds: float) -> TrialWakes:
        """The same wakes, each ``milliseconds`` slower (an injected delay added after the fact)."""
        return TrialWakes(self.latencies + milliseconds, self.paths)


def log_mean(latencies: npt.NDArray[np.floating[Any]]) -> float | None:
    """The mean of log latency; None without wakes or with a latency that is not positive (no logarithm)."""
    if len(latencies) == 0 or float(np.min(latencies)) <= 0:
        return None
    return float(np.mean(np.log(latencies)))


def gmean(trial: TrialWakes) -> float | None:
    mean = log_mean(trial.latencies)
    return None if mean is None else float(np.exp(mean))


def common_mix(trials: Sequence[TrialWakes]) -> dict[str, float] | None:
    """The paths every trial took at least MIN_PATH_WAKES times, each weighted by the trials' mean share of it
    (renormalized over those paths); None when some trial has no known path, no path qualifies, or the paths that do
    hold less than MIN_COMMON_SHARE of some trial's wakes (the trials wake by different paths)."""
    if not trials or any(trial.known_paths == 0 for trial in trials):
        return None
    counts = [dict(zip(WAKE_PATHS,
                       cast(list[int], np.bincount(trial.paths[trial.paths >= 0], minlength=len(WAKE_PATHS)).tolist()),
                       strict=True)) for trial in trials]
    common = [path for path in WAKE_PATHS if all(found[path] >= MIN_PATH_WAKES for found in counts)]
    if not common or any(sum(found[path] for path in common) < MIN_COMMON_SHARE * sum(found.values())
                         for found in counts):
        return None
    shares = {path: float(np.mean([found[path] / sum(found[p] for p in common) for found in counts]))
              for path in common}
    return shares


def mixed_gmean(trial: TrialWakes, mix: dict[str, float]) -> float | None:
    """The trial's geometric mean wake at ``mix``: ``exp(Σ_path weight · mean log latency of the path)``."""
    means = [log_mean(trial.on_path(path)) for path in mix]
    known = [mean for mean in means if mean is not None]
    if len(known) < len(means):
        return None
    return float(np.exp(sum(weight * mean for weight, mean in zip(mix.values(), known, strict=True))))


def slow_wakes(trial: TrialWakes) -> tuple[int, int] | None:
    """The wakes that took the slow path and the wakes whose path is known (the slow share's counts); None when no
    wake's path is known."""
    known = trial.known_paths
    return None if known == 0 else (int(np.count_nonzero(trial.paths == WAKE_PATHS.index(SLOW_PATH))), known)


def mix_text(mix: dict[str, float]) -> str:
    return ", ".join(f"{path} {weight * 100:.0f} %" for path, weight in mix.items())
