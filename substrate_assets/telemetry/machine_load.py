"""How busy the machine was with other work while a local trial measured, over the trial's steady window.

A local trial shares its machine with whatever else runs there (a build, another checkout's tests, a browser). Three
figures, from the cumulative counters runtime_samples.parquet records once a second (the first and the last sample
inside the window bound it):

- ``foreign_cpu_share``: CPU seconds spent by processes that are not the trial's (the machine's busy time, less the
  trial's process tree — its runtime, actor hosts and Locust — and less steal), over all CPU seconds of the window;
- ``steal_share``: CPU seconds the hypervisor gave to other guests, over all CPU seconds of the window;
- ``cpu_pressure``: the share of the window in which some runnable task waited for a CPU (PSI ``some``).

The trial's own actors and driver keep this machine's cores busy (a quiet quick-smoke trial: 92 % busy, CPU pressure
0.7), so pressure alone cannot tell a busy machine from a busy trial; the foreign CPU can. On a cluster the node's
pressure is what is harvested, and the other two are not measured (null).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from substrate_assets.results.runtime_samples import psi_total_column
from substrate_assets.telemetry.counters import counter_delta

MEASURES = ("foreign_cpu_share", "steal_share", "cpu_pressure")


@dataclass(frozen=True)
class MachineLoad:
    window_start_ts: float | None
    window_end_ts: float | None
    foreign_cpu_share: float | None
    steal_share: float | None
    cpu_pressure: float | None

    def measured(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in MEASURES}


def machine_load(samples: pl.DataFrame, steady: tuple[float, float]) -> MachineLoad | None:
    """The three figures over ``steady`` (inclusive) from ``samples`` (runtime_samples rows); None with fewer than two
    samples inside it. A figure whose counters were not read is null."""
    inside = samples.filter(pl.col("ts").is_between(*steady)).sort("ts")
    if inside.height < 2:
        return None
    first, last = inside.row(0, named=True), inside.row(-1, named=True)
    seconds = last["ts"] - first["ts"]
    if seconds <= 0:
        return None
    everything = counter_delta(first, last, "machine_cpu_s")
    busy = counter_delta(first, last, "machine_busy_cpu_s")
    steal = counter_delta(first, last, "machine_steal_cpu_s")
    trial = counter_delta(first, last, "trial_cpu_s")
    stalled = counter_delta(first, last, psi_total_column("cpu"))
    foreign = None
    if everything and busy is not None and trial is not None and steal is not None:
        foreign = (busy - steal - trial) / everything
    return MachineLoad(
        first["ts"], last["ts"], foreign,
        steal / everything if everything and steal is not None else None,
        stalled / (seconds * 1e6) if stalled is not None and stalled >= 0 else None)


def cluster_machine_load(node_cpu_stall_avg_pct: float | None) -> MachineLoad | None:
    """A cluster trial's: the node CPU pressure its harvest measured (the average over the steady window, in percent);
    the other figures are not measured there."""
    if node_cpu_stall_avg_pct is None:
        return None
    return MachineLoad(None, None, None, None, node_cpu_stall_avg_pct / 100)
