"""Progress of a running trial: the figures reported while Locust runs, and the one line that logs show."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    phase: str  # starting, running, stopping, finalizing
    elapsed_s: float
    duration_s: int
    users: int | None = None
    requests: int | None = None
    failures: int | None = None
    running_actors: int | None = None

    @property
    def remaining_s(self) -> float:
        return max(self.duration_s - self.elapsed_s, 0.0)

    def line(self) -> str:
        """One line for a log; ``-`` where a figure is not known yet."""

        def shown(value: int | None) -> str:
            return "-" if value is None else str(value)

        return (f"{self.phase}: {self.elapsed_s:.0f}s elapsed, {self.remaining_s:.0f}s left, users "
                f"{shown(self.users)}, requests {shown(self.requests)}, failures {shown(self.failures)}, "
                f"running actors {shown(self.running_actors)}")


def progress_reporter(on_progress: Callable[[Progress], None] | None, duration_s: int) -> Callable[..., None]:
    """``report(phase, clock, **figures)``: a Progress since ``clock`` (monotonic) to ``on_progress``, if any."""

    def report(phase: str, clock: float, **figures: Any) -> None:
        if on_progress is not None:
            on_progress(Progress(phase, time.monotonic() - clock, duration_s, **figures))

    return report


def log_lines(emit: Callable[[str], None], every_s: float = 10.0) -> Callable[[Progress], None]:
    """A progress handler for logs: a line at every phase change and every ``every_s`` of trial time while
    running (a line a second would drown a log)."""
    last: list[float | None] = [None]

    def handle(progress: Progress) -> None:
        if progress.phase != "running" or last[0] is None or progress.elapsed_s - last[0] >= every_s:
            last[0] = progress.elapsed_s
            emit(progress.line())

    return handle
