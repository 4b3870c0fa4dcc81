"""The knobs of upstream's other workload families, with upstream's worker-flag defaults (reference §16).

Each family's virtual user takes one of these; the locustfile builds it from Locust options of the same names
(``--mem-target``, ``--durdir-file-size-bytes``, …), and a suite sets them under ``knobs:``. Durations are
seconds, sizes are glutton's own quantity strings (sent verbatim: glutton parses them, and a bad one is a failed
request, as upstream), and ``""`` means "off" where upstream's does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from substrate_assets.workload.quantity import INT32_MAX

LIFECYCLE_MODES = ("", "suspend", "pause")
RESUME_MODES = ("", "explicit", "implicit")
DURDIR_READ_MODES = ("", "data", "digest")
DURDIR_TEMPLATES = ("glutton-durdir-data", "glutton-durdir-full")


def uniform_wait(rng: random.Random, low: float, high: float) -> float:
    """U[low, high]; an empty or inverted range is ``low`` (upstream's uniformWait)."""
    return low if high <= low else low + rng.random() * (high - low)


def _window(name: str, low: float, high: float) -> None:
    if low < 0 or high < 0:
        raise ValueError(f"{name} times must not be negative, got {low:g} and {high:g}")
    if high < low:
        raise ValueError(f"max {name} time {high:g} is below min {name} time {low:g}")


@dataclass(frozen=True)
class Waits:
    """The wait between iterations, U[min, max] seconds (upstream's worker default 0–0.5 s)."""

    min_wait_time: float = 0.0
    max_wait_time: float = 0.5

    def __post_init__(self) -> None:
        _window("wait", self.min_wait_time, self.max_wait_time)

    def wait_seconds(self, rng: random.Random) -> float:
        """One wait between iterations."""
        return uniform_wait(rng, self.min_wait_time, self.max_wait_time)


@dataclass(frozen=True)
class GluttonKnobs(Waits):
    """``GluttonUser`` and ``BurstUser``: the live window, the RAM and CPU load, the lifecycle mode."""

    atespace: str = "benchmark"
    min_live_time: float = 0.0
    max_live_time: float = 0.0
    max_pings_per_wake: int = 1
    mem_target: str = ""
    mem_churn: str = ""
    mem_read: str = ""
    cpu_cores: int = 0
    cpu_duty_cycle: float = 0.0
    lifecycle_mode: str = ""
    actors_per_user: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        _window("live", self.min_live_time, self.max_live_time)
        if self.cpu_cores < 0:
            raise ValueError(f"cpu cores must not be negative, got {self.cpu_cores}")
        if not 0 <= self.cpu_duty_cycle <= 1:
            raise ValueError(f"cpu duty cycle must be within [0, 1], got {self.cpu_duty_cycle:g}")
        if self.lifecycle_mode not in LIFECYCLE_MODES:
            raise ValueError(f"lifecycle mode must be one of {LIFECYCLE_MODES}, got {self.lifecycle_mode!r}")
        if self.actors_per_user < 1:
            raise ValueError(f"actors per user must be at least 1, got {self.actors_per_user}")

    @property
    def pings_per_wake(self) -> int:
        """Upstream reads fewer than one as one."""
        return max(1, self.max_pings_per_wake)

    @property
    def pause(self) -> bool:
        return self.lifecycle_mode == "pause"

    @property
    def read_size(self) -> str:
        """The ReadRAM size: ``all`` walks the whole array (an empty size)."""
        return "" if self.mem_read == "all" else self.mem_read


@dataclass(frozen=True)
class DurdirKnobs(Waits):
    """``DurdirUser``: one file in a durable directory, written, served across suspends, overwritten."""

    atespace: str = "benchmark"
    durdir_template: str = DURDIR_TEMPLATES[0]
    durdir_file_size_bytes: int = 8 << 20
    durdir_read_mode: str = "data"
    resume_mode: str = ""
    lifecycle_mode: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.durdir_file_size_bytes <= INT32_MAX:
            raise ValueError(f"durdir file size must be within [0, {INT32_MAX}], got {self.durdir_file_size_bytes}")
        if self.durdir_read_mode not in DURDIR_READ_MODES:
            raise ValueError(f"durdir read mode must be one of {DURDIR_READ_MODES}, got {self.durdir_read_mode!r}")
        if self.resume_mode not in RESUME_MODES:
            raise ValueError(f"resume mode must be one of {RESUME_MODES}, got {self.resume_mode!r}")
        if self.lifecycle_mode not in LIFECYCLE_MODES:
            raise ValueError(f"lifecycle mode must be one of {LIFECYCLE_MODES}, got {self.lifecycle_mode!r}")

    @property
    def file_size(self) -> int:
        """Upstream reads zero (or less) as its default, 8 MiB."""
        return self.durdir_file_size_bytes if self.durdir_file_size_bytes > 0 else 8 << 20

    @property
    def digest_reads(self) -> bool:
        return self.durdir_read_mode == "digest"

    @property
    def explicit_resume(self) -> bool:
        """Only ``implicit`` skips the ResumeActor call: durdir's default is explicit, unlike agent sessions'."""
        return self.resume_mode != "implicit"

    @property
    def pause(self) -> bool:
        return self.lifecycle_mode == "pause"


@dataclass(frozen=True)
class CohortKnobs:
    """``SpawnUser``: how many actors one batch starts, how many at once, and each one's deadline."""

    atespace: str = "benchmark"
    total_actors: int = 100
    spawn_concurrency: int = 1
    actor_deadline: float = 120.0

    def __post_init__(self) -> None:
        if self.total_actors < 1:
            raise ValueError(f"total actors must be at least 1, got {self.total_actors}")
        if self.spawn_concurrency < 0:
            raise ValueError(f"spawn concurrency must not be negative, got {self.spawn_concurrency}")
        if self.actor_deadline <= 0:
            raise ValueError(f"actor deadline must be positive, got {self.actor_deadline:g}")

    @property
    def workers(self) -> int:
        """Upstream runs min(concurrency, total) workers, at least one."""
        return max(1, min(self.spawn_concurrency, self.total_actors))


@dataclass(frozen=True)
class SweperfKnobs(Waits):
    """``SweperfUser``: a recorded trajectory replayed in cycles on one actor of its template."""

    atespace: str = "benchmark"
    sweperf_template: str = "swebench-astropy-7336"
    sweperf_total_steps: int = 21
    sweperf_num_cycles: int = 4
    sweperf_poll_interval_ms: int = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("sweperf_total_steps", "sweperf_num_cycles", "sweperf_poll_interval_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', ' ')} must not be negative, got {getattr(self, name)}")
