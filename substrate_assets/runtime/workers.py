"""Worker slots: W workers each holding up to C running actors; states idle, partial, at_capacity."""

from __future__ import annotations

from collections.abc import Callable

WORKER_STATES = ("idle", "partial", "at_capacity")


class NoFreeWorker(Exception):
    """Every worker is at capacity."""


class WorkerSlots:
    def __init__(self, workers: int, per_worker: int, on_change: Callable[[WorkerSlots], None] | None = None) -> None:
        self.per_worker = per_worker
        self.running = [0] * workers
        self._on_change = on_change
        self._changed()

    def acquire(self) -> int:
        """A slot on the fullest worker that has one (bin packing), lowest index first."""
        free = [i for i, n in enumerate(self.running) if n < self.per_worker]
        if not free:
            raise NoFreeWorker("no free workers available")
        chosen = max(free, key=lambda i: (self.running[i], -i))
        self.running[chosen] += 1
        self._changed()
        return chosen

    def release(self, worker: int) -> None:
        if self.running[worker] <= 0:
            raise RuntimeError(f"worker {worker} holds no actor")
        self.running[worker] -= 1
        self._changed()

    def state_of(self, worker: int) -> str:
        n = self.running[worker]
        return "idle" if n == 0 else "at_capacity" if n >= self.per_worker else "partial"

    def states(self) -> dict[str, int]:
        counts = dict.fromkeys(WORKER_STATES, 0)
        for worker in range(len(self.running)):
            counts[self.state_of(worker)] += 1
        return counts

    @property
    def running_actors(self) -> int:
        return sum(self.running)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)
