"""``stats.jsonl``: one row per stats.csv entry in upstream's envelope, values kept as the CSV's strings.

Envelope: exactly ``timestamp`` (the run's data timestamp, RFC 3339 with Z),
``tag``, ``test_name``, ``metric`` (``<Type>_<Name>``, e.g. ``http_WakeFirstTouch``)
and ``measurements`` (column → key mapping of :mod:`keys`). The ``Aggregated``
row is skipped. Upstream's order: the per-request rows, then ``trial_summary``
(:mod:`trial_summary`, only when stats were generated), then ``server_summary``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from substrate_assets.results.keys import measurement_key

# What a trial ran on: the cluster facts of a ``trial_summary`` row (and of trial.json's ``cluster_facts``).
FACT_KEYS = ("machine_type", "node_count", "allocatable_cores", "allocatable_ram_gb", "worker_pod_count",
             "gke_version", "worker_actor_capacity", "worker_memory_limit_gb", "sandbox_class")
# The density frontier of a ``trial_summary`` row, and with the aggregate failure ratio the figures a run reports.
FRONTIER_KEYS = ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50",
                 "actors_per_pod_p90", "actors_per_pod_p99")
REPORTED_FIGURES = (*FRONTIER_KEYS, "aggregate_failure_ratio")
TRIAL_SUMMARY = "trial_summary"
SERVER_SUMMARY = "server_summary"


def data_timestamp(started: datetime) -> str:
    return started.strftime("%Y-%m-%dT%H:%M:%SZ")


def per_request_rows(records: Iterable[Mapping[str, str]], *, timestamp: str, tag: str,
                     test_name: str) -> list[dict[str, Any]]:
    """One row per stats.csv entry (``records``, its rows as text by header) except ``Aggregated``, its values the
    CSV's own strings."""
    rows = []
    for record in records:
        if record.get("Name") == "Aggregated":
            continue
        measurements = {measurement_key(column): value for column, value in record.items()
                        if column not in ("Type", "Name")}
        rows.append({"timestamp": timestamp, "tag": tag, "test_name": test_name,
                     "metric": f"{record.get('Type') or ''}_{record.get('Name')}",
                     "measurements": measurements})
    return rows


def stats_jsonl_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)
