"""``runtime_samples.parquet``: what a local trial samples once a second — the worker pool by state, running actors,
parked requests, Locust's users, the node's cumulative pressure-stall ("some") microseconds per resource, and the
CPU seconds the driver (the Locust process), the whole trial (its own process, the actor hosts and Locust) and the
machine's cores have spent so far, the hypervisor's steal among them."""

from __future__ import annotations

import polars as pl

from substrate_assets.results.server_summary import PSI_RESOURCES


def psi_total_column(resource: str) -> str:
    """The column of ``resource``'s cumulative stall (a /proc/pressure file name: cpu, memory, io)."""
    return f"psi_{resource}_some_total_us"


SAMPLES_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Float64(), "idle_workers": pl.Int64(), "partial_workers": pl.Int64(), "at_capacity_workers": pl.Int64(),
    "running_actors": pl.Int64(), "parked_requests": pl.Int64(), "users": pl.Int64(),
    **{psi_total_column(resource): pl.Int64() for _, resource in PSI_RESOURCES},
    # Cumulative CPU seconds: the Locust process and its live children (user + system); every core of the machine
    # busy (neither idle nor waiting for I/O); every core of the machine in all. Null where not read.
    "driver_cpu_s": pl.Float64(), "machine_busy_cpu_s": pl.Float64(), "machine_cpu_s": pl.Float64(),
    # Cumulative CPU seconds of the trial's process tree (the runtime, its actor hosts live and reaped, Locust), and
    # the time the hypervisor ran something else on this machine's virtual cores (steal). Null where not read.
    "trial_cpu_s": pl.Float64(), "machine_steal_cpu_s": pl.Float64(),
}
