"""How much a local trial's own driver disturbed what it measured.

On the local backend Locust runs on the same cores as the actors it drives, so the CPU it spends is CPU the actors
did not get, and a saturated machine adds its queueing to every wake. Over the trial's steady window, from the
cumulative counters runtime_samples.parquet records once a second (the first and the last sample inside the
window bound it):

- ``driver_cpu_s``: CPU seconds the Locust process (and its live children) spent;
- ``driver_core_share``: that, over the window's length times the machine's cores;
- ``machine_cpu_saturation``: busy CPU seconds over all CPU seconds of every core (/proc/stat), the driver's and
  the actors' alike.

Null where not measured: a trial with fewer than two samples in its window, a counter that was not read, or a
trial that ran elsewhere (a cluster's driver runs in its own pods).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from substrate_assets.telemetry.counters import counter_delta

# Above this share of the machine's cores the driver's own cost is a visible part of the latencies it measured.
DRIVER_CORE_SHARE_LIMIT = 0.25


@dataclass(frozen=True)
class DriverLoad:
    window_start_ts: float
    window_end_ts: float
    cores: int
    driver_cpu_s: float | None
    machine_busy_cpu_s: float | None
    machine_cpu_s: float | None

    @property
    def seconds(self) -> float:
        return self.window_end_ts - self.window_start_ts

    @property
    def driver_core_share(self) -> float | None:
        if self.driver_cpu_s is None:
            return None
        return self.driver_cpu_s / (self.seconds * self.cores)

    @property
    def machine_cpu_saturation(self) -> float | None:
        if self.machine_busy_cpu_s is None or not self.machine_cpu_s:
            return None
        return self.machine_busy_cpu_s / self.machine_cpu_s

    def as_json(self) -> dict[str, Any]:
        """trial.json's ``driver_load``."""
        return {"window_start_ts": self.window_start_ts, "window_end_ts": self.window_end_ts, "cores": self.cores,
                "driver_cpu_s": self.driver_cpu_s, "driver_core_share": self.driver_core_share,
                "machine_cpu_saturation": self.machine_cpu_saturation}

    def warning(self, limit: float = DRIVER_CORE_SHARE_LIMIT) -> str | None:
        """One line when the driver took more than ``limit`` of the machine's cores over the window."""
        share = self.driver_core_share
        if share is None or share <= limit:
            return None
        saturation = self.machine_cpu_saturation
        busy = "" if saturation is None else f", with the machine {saturation * 100:.0f} % busy"
        return (f"the driver (Locust) used {share * 100:.0f} % of this machine's {self.cores} cores over the steady "
                f"window ({self.driver_cpu_s:.1f} CPU s in {self.seconds:.0f} s{busy}), more than "
                f"{limit * 100:.0f} %: it competed with the actors for CPU, and its cost is in the latencies measured")


def driver_load(samples: pl.DataFrame, steady: tuple[float, float], cores: int) -> DriverLoad | None:
    """The driver's and the machine's CPU over ``steady`` (inclusive) from ``samples`` (runtime_samples rows);
    None with fewer than two samples inside it."""
    inside = samples.filter(pl.col("ts").is_between(*steady)).sort("ts")
    if inside.height < 2 or cores < 1:
        return None
    first, last = inside.row(0, named=True), inside.row(-1, named=True)
    if last["ts"] <= first["ts"]:
        return None
    return DriverLoad(first["ts"], last["ts"], cores, counter_delta(first, last, "driver_cpu_s"),
                      counter_delta(first, last, "machine_busy_cpu_s"), counter_delta(first, last, "machine_cpu_s"))
