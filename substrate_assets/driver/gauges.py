"""What only the Locust process itself can see of itself, written every few seconds for a soak to follow: the
greenlets alive (a leaked session or a request that never returns leaves one behind) and its open descriptors.

Off unless ``SUBSTRATE_BENCH_DRIVER_GAUGES`` names a file: counting greenlets walks the whole heap (tens of ms), a
cost only a soak benchmark should pay. Each line is one JSON object, appended and flushed whole.
"""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path

import gevent
from greenlet import greenlet

GAUGES_ENV = "SUBSTRATE_BENCH_DRIVER_GAUGES"
GAUGE_INTERVAL_S = 10.0


def greenlet_count() -> int:
    """Greenlets alive in this process, the hub and finished-but-referenced ones included."""
    return sum(1 for thing in gc.get_objects() if isinstance(thing, greenlet))


def open_descriptors() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def gauge_line(spent_cpu_s: float = 0.0) -> str:
    """One line of gauges; ``gauge_cpu_s`` is the CPU the gauges have cost this process so far, this line's
    included, so a reader can take it off the process's own CPU."""
    started = time.process_time()
    greenlets, descriptors = greenlet_count(), open_descriptors()
    spent = spent_cpu_s + time.process_time() - started
    return json.dumps({"ts": time.time(), "pid": os.getpid(), "greenlets": greenlets, "open_fds": descriptors,
                       "gauge_cpu_s": spent})


def start_gauges(path: Path, interval_s: float = GAUGE_INTERVAL_S) -> gevent.Greenlet:
    """Append a gauge line now and every ``interval_s`` from a greenlet of its own."""

    def write_forever() -> None:
        spent = 0.0
        while True:
            started = time.process_time()
            line = gauge_line(spent)
            with path.open("a") as handle:
                handle.write(line + "\n")
            spent += time.process_time() - started
            gevent.sleep(interval_s)

    return gevent.spawn(write_forever)


def gauges_requested() -> Path | None:
    named = os.environ.get(GAUGES_ENV)
    return Path(named) if named else None
