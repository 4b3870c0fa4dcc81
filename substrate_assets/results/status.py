"""``status.json``: exactly ``{locust_exit_code, stats_generated}``, as upstream CI reads it."""

from __future__ import annotations

import csv

from substrate_assets.results.atomic import json_text
from substrate_assets.results.landing import LocustCsv


def stats_generated(stats: LocustCsv | None, warnings: list[str] | None = None) -> bool:
    """True only if there is a stats.csv with at least one row other than ``Aggregated``.

    A stats.csv cut short or not text counts as no stats: its rows cannot be trusted, and every figure drawn from
    them would be wrong. Why goes into ``warnings``, when given, so the trial says so rather than a log."""
    if stats is None:
        return False
    if stats.damage is not None:
        if warnings is not None:
            warnings.append(f"{stats.path.name}:{stats.damage.line}: {stats.damage.reason}; the trial counts as "
                            "having generated no stats")
        return False
    try:
        names = [record.get("Name") for record in stats.records]
    except (ValueError, csv.Error):
        return False
    return any(name not in (None, "", "Aggregated") for name in names)


def status_text(locust_exit_code: int, generated: bool) -> str:
    return json_text({"locust_exit_code": locust_exit_code, "stats_generated": generated})
