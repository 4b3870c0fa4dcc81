"""Samples a local trial takes every second: the worker pool by state and the node's pressure stall counters."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from substrate_assets.results.runtime_samples import SAMPLES_SCHEMA, psi_total_column
from substrate_assets.results.server_summary import PSI_RESOURCES


def read_psi_some_total(resource: str, root: Path = Path("/proc/pressure")) -> int | None:
    """Cumulative microseconds some task stalled on ``resource``; None where the kernel has no PSI."""
    try:
        text = (root / resource).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                name, _, value = field.partition("=")
                if name == "total":
                    return int(value)
    return None


class Sampler:
    """The rows of runtime_samples.parquet, one per call to :meth:`take`."""

    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def take(self, state: dict[str, object], users: int | None) -> None:
        workers = state.get("workers", {})
        assert isinstance(workers, dict)
        self.rows.append({
            "ts": time.time(), "idle_workers": workers.get("idle"), "partial_workers": workers.get("partial"),
            "at_capacity_workers": workers.get("at_capacity"), "running_actors": state.get("running_actors"),
            "parked_requests": state.get("parked"), "users": users,
            **{psi_total_column(resource): read_psi_some_total(resource) for _, resource in PSI_RESOURCES},
        })

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=SAMPLES_SCHEMA, orient="row")
