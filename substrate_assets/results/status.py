"""``status.json``: exactly ``{locust_exit_code, stats_generated}``, as upstream CI reads it."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from substrate_assets.results.atomic import write_json
from substrate_assets.results.readers import csv_damage


def stats_generated(stats_csv: Path, warnings: list[str] | None = None) -> bool:
    """True only if stats.csv exists and has at least one row other than ``Aggregated``.

    A stats.csv cut short or not text counts as no stats: its rows cannot be trusted, and every figure drawn from
    them would be wrong. Why goes into ``warnings``, when given, so the trial says so rather than a log."""
    if not stats_csv.is_file():
        return False
    try:
        data = stats_csv.read_bytes()
        damage = csv_damage(stats_csv, data)
        if damage is not None:
            if warnings is not None:
                warnings.append(f"{stats_csv.name}:{damage.line}: {damage.reason}; the trial counts as having "
                                "generated no stats")
            return False
        names = pl.read_csv(io.BytesIO(data), columns=["Name"], infer_schema=False)["Name"].to_list()
    except (pl.exceptions.PolarsError, OSError):
        return False
    return any(name not in (None, "Aggregated") for name in names)


def write_status(path: Path, locust_exit_code: int, generated: bool) -> Path:
    return write_json(path, {"locust_exit_code": locust_exit_code, "stats_generated": generated})
