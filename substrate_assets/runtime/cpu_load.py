"""Glutton's UseCPU: a pool of workers that keep a steady share of CPU busy until told otherwise.

Each worker spends ``duty_cycle`` of every cycle in CPU time of its own thread (``time.thread_time``, as
upstream reads ``CLOCK_THREAD_CPUTIME_ID``) and sleeps the rest of the cycle. The work is sha256 of a 64 KiB
block, which releases the GIL, so the workers load as many cores as there are workers, not one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

HASH_BLOCK = 64 * 1024
DEFAULT_CYCLE_MS = 100


@dataclass(frozen=True)
class CpuLoadSettings:
    num_cores: int
    duty_cycle: float
    cycle_length_ms: int

    @property
    def cycle_s(self) -> float:
        return (self.cycle_length_ms or DEFAULT_CYCLE_MS) / 1000

    def as_dict(self) -> dict[str, float | int]:
        return {"num_cores": self.num_cores, "duty_cycle": self.duty_cycle, "cycle_length_ms": self.cycle_length_ms}


class CpuLoad:
    """The running pool, if any; :meth:`apply` replaces it, a pool of 0 workers stops it."""

    def __init__(self) -> None:
        self.settings: CpuLoadSettings | None = None
        self._stop: threading.Event | None = None
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._block = bytes(HASH_BLOCK)

    def apply(self, settings: CpuLoadSettings) -> int:
        """Stop the running pool and start ``settings.num_cores`` workers; the number started."""
        with self._lock:
            self._stop_pool()
            if settings.num_cores == 0:
                self.settings = None
                return 0
            stop = threading.Event()
            self._threads = [threading.Thread(target=self._work, args=(settings, stop), daemon=True,
                                              name=f"usecpu-{index}") for index in range(settings.num_cores)]
            for thread in self._threads:
                thread.start()
            self._stop, self.settings = stop, settings
            return settings.num_cores

    def stop(self) -> None:
        with self._lock:
            self._stop_pool()
            self.settings = None

    @property
    def workers(self) -> int:
        return sum(thread.is_alive() for thread in self._threads)

    def _stop_pool(self) -> None:
        if self._stop is not None:
            self._stop.set()
            for thread in self._threads:
                thread.join()
        self._stop, self._threads = None, []

    def _work(self, settings: CpuLoadSettings, stop: threading.Event) -> None:
        cycle = settings.cycle_s
        busy = cycle * settings.duty_cycle
        while not stop.is_set():
            started, cpu_started = time.monotonic(), time.thread_time()
            while time.thread_time() - cpu_started < busy and not stop.is_set():
                hashlib.sha256(self._block).digest()
            rest = cycle - (time.monotonic() - started)
            if rest > 0:
                stop.wait(rest)
