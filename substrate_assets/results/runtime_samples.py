"""``runtime_samples.parquet``: what a local trial samples once a second — the worker pool by state, running actors,
parked requests, Locust's users, and the node's cumulative pressure-stall ("some") microseconds per resource."""

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
}
