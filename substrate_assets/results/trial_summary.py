"""The ``trial_summary`` row of stats.jsonl, as upstream's runner writes it (``cluster_facts.py``,
``append_trial_summary``): what the trial ran on, its run window and metadata, its density frontier and its
failure ratios.

Keys, in upstream's order: the nine cluster facts, ``run_start``, ``run_end``, one ``metadata_<k>`` per metadata
entry, ``multi_actor_worker``, the six frontier figures, ``aggregate_failure_ratio``, then one
``<operation>_failure_ratio`` per named stats.csv row. Every value is ``str()`` of the figure upstream computes
(``str(round(10 / 1, 2))`` is ``"10.0"``, a whole-number fact ``"1"``) or JSON null when nothing was measured,
so this row is byte for byte the one upstream's runner would write for the same files.

- Frontier: the peak of the observed User Count samples (the configured users only when none was observed) times
  actors per user, over nodes, allocatable cores and GiB (2 dp; null when the denominator is null or 0); actors
  per worker pod at every sample (4 dp), floor-index p50/p90/p99 (2 dp).
- Failure ratios: failures over requests (4 dp); null with no requests; a stats.csv that does not parse leaves
  only a null ``aggregate_failure_ratio``.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from substrate_assets.analysis.statistics import floor_index, measured, permille, reference_round
from substrate_assets.results.landing import LocustCsv
from substrate_assets.results.stats_jsonl import FACT_KEYS, TRIAL_SUMMARY
from substrate_assets.results.trial_directory import TOTAL_ROW_NAMES

AGGREGATED = "Aggregated"
AGGREGATE_FAILURE_RATIO = "aggregate_failure_ratio"
POD_PERCENTILES = ("p50", "p90", "p99")


def observed_users(history: LocustCsv | None) -> list[float]:
    """Locust's own User Count samples above zero, from stats_history.csv's total rows, read as upstream reads them
    (an empty ``Name`` is a total row). A read that fails part-way gives no samples: a truncated sample would
    understate the peak without looking wrong."""
    if history is None:
        return []
    samples = []
    try:
        for row in history.records:
            if row.get("Name", "") not in TOTAL_ROW_NAMES:
                continue
            try:
                users = float(row.get("User Count", ""))
            except (TypeError, ValueError):
                continue
            if users > 0:
                samples.append(users)
    except (ValueError, csv.Error):
        return []
    return samples


def operation_key(name: str) -> str:
    """A stats.csv row name as its failure-ratio key: ``GluttonReadRAM`` → ``glutton_read_ram_failure_ratio``."""
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    key = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", key)
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_") + "_failure_ratio"


def failure_ratios(stats: LocustCsv | None) -> dict[str, float | None]:
    """``aggregate_failure_ratio`` from stats.csv's Aggregated row, then one ratio per other named row in file order
    (the last row of a name wins, Type is not part of the key). Absent for an operation the test never ran, null for
    one that ran no requests."""
    ratios: dict[str, float | None] = {AGGREGATE_FAILURE_RATIO: None}
    if stats is None:
        return ratios
    try:
        for row in stats.records:
            name, requests, failures = row.get("Name", ""), row.get("Request Count"), row.get("Failure Count")
            # Both counts must be there: a missing one is not a zero.
            if not name or requests is None or failures is None:
                continue
            count, failed = int(requests), int(failures)
            ratio = reference_round(failed / count, 4) if count else None
            ratios[AGGREGATE_FAILURE_RATIO if name == AGGREGATED else operation_key(name)] = ratio
    except (ValueError, csv.Error):
        return {AGGREGATE_FAILURE_RATIO: None}
    return ratios


def _denominator(value: Any) -> float | int | None:
    """A fact to divide by: null and 0 both give no figure."""
    number = measured(value)
    return number or None


def density_frontier(observed: Sequence[float], *, users: int | None, actors_per_user: int | None,
                     facts: Mapping[str, Any]) -> dict[str, float | None]:
    """The six frontier figures. ``actors_per_user`` None is one actor per user, as upstream's runner takes an
    unset ``--actors-per-user``."""
    peak_users = max(observed) if observed else users
    per_user = actors_per_user or 1
    peak_actors = None if peak_users is None else peak_users * per_user
    figures: dict[str, float | None] = {}
    for key, fact in (("actors_per_node", "node_count"), ("actors_per_vcpu", "allocatable_cores"),
                      ("actors_per_gb_ram", "allocatable_ram_gb")):
        denominator = _denominator(facts.get(fact))
        figures[key] = None if peak_actors is None or denominator is None else \
            reference_round(peak_actors / denominator, 2)
    pods = _denominator(facts.get("worker_pod_count"))
    # Every sample counts, ramp-up included: under a load shape there is no one target to be steady at.
    ratios = sorted(reference_round(u * per_user / pods, 4) for u in observed) if pods is not None else []
    for name in POD_PERCENTILES:
        value = floor_index(ratios, permille(name))
        figures[f"actors_per_pod_{name}"] = None if value is None else reference_round(value, 2)
    return figures


def _metadata_measurements(metadata: Mapping[str, Any]) -> dict[str, str]:
    """One key per entry, so values stay plain strings: text as it is, anything else as JSON; nulls dropped."""
    return {f"metadata_{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in metadata.items() if value is not None}


def trial_summary_measurements(*, stats: LocustCsv | None, history: LocustCsv | None,
                               facts: Mapping[str, Any], run_start: int | None, run_end: int | None,
                               metadata: Mapping[str, Any], users: int | None,
                               actors_per_user: int | None = None) -> dict[str, str | None]:
    """The row's measurements, every value a string or null."""
    frontier = density_frontier(observed_users(history), users=users, actors_per_user=actors_per_user,
                                facts=facts)
    p50 = frontier["actors_per_pod_p50"]
    figures: dict[str, Any] = {
        **{key: facts.get(key) for key in FACT_KEYS},
        "run_start": run_start, "run_end": run_end,
        **_metadata_measurements(metadata),
        # Whether workers hosted more than one actor at once, going by the median actors per pod.
        "multi_actor_worker": None if p50 is None else str(p50 > 1).lower(),
        **frontier,
        **failure_ratios(stats),
    }
    return {key: None if value is None else str(value) for key, value in figures.items()}


def trial_summary_row(envelope: Mapping[str, str], **inputs: Any) -> dict[str, Any]:
    """The ``trial_summary`` row in stats.jsonl's envelope (``timestamp``, ``tag``, ``test_name``); ``inputs`` are
    :func:`trial_summary_measurements`'s."""
    return {**envelope, "metric": TRIAL_SUMMARY, "measurements": trial_summary_measurements(**inputs)}
