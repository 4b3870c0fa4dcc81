"""``status.json``: exactly ``{locust_exit_code, stats_generated}``, as upstream CI reads it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from substrate_assets.results.atomic import write_json


def stats_generated(stats_csv: Path) -> bool:
    """True only if stats.csv exists and has at least one row other than ``Aggregated``."""
    if not stats_csv.is_file():
        return False
    try:
        names = pl.read_csv(stats_csv, columns=["Name"], infer_schema=False)["Name"].to_list()
    except (pl.exceptions.PolarsError, OSError):
        return False
    return any(name not in (None, "Aggregated") for name in names)


def write_status(path: Path, locust_exit_code: int, generated: bool) -> Path:
    return write_json(path, {"locust_exit_code": locust_exit_code, "stats_generated": generated})
