"""Samples a local trial takes every second: the worker pool by state and the node's pressure stall counters."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from substrate_assets.results.atomic import atomic_path

PSI_RESOURCES = ("cpu", "memory", "io")
SAMPLES_SCHEMA = {
    "ts": pl.Float64, "idle_workers": pl.Int64, "partial_workers": pl.Int64, "at_capacity_workers": pl.Int64,
    "running_actors": pl.Int64, "parked_requests": pl.Int64, "users": pl.Int64,
    **{f"psi_{resource}_some_total_us": pl.Int64 for resource in PSI_RESOURCES},
}


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


@dataclass
class Sampler:
    rows: list[dict[str, object]]

    def __init__(self) -> None:
        self.rows = []

    def take(self, state: dict[str, object], users: int | None) -> None:
        workers = state.get("workers", {})
        assert isinstance(workers, dict)
        self.rows.append({
            "ts": time.time(), "idle_workers": workers.get("idle"), "partial_workers": workers.get("partial"),
            "at_capacity_workers": workers.get("at_capacity"), "running_actors": state.get("running_actors"),
            "parked_requests": state.get("parked"), "users": users,
            **{f"psi_{resource}_some_total_us": read_psi_some_total(resource) for resource in PSI_RESOURCES},
        })

    def write_parquet(self, path: Path) -> Path:
        with atomic_path(path) as partial:
            pl.DataFrame(self.rows, schema=SAMPLES_SCHEMA, orient="row").write_parquet(partial)
        return path
