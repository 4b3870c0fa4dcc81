"""Two sets of trials from the warehouse, compared figure by figure (:mod:`substrate_assets.analysis.comparison`).

A side is one trial (its id), or a group: the trials of a suite whose run tag or version of the system under test
is the given value (a version may be given by a prefix of at least 7 characters, as git abbreviates commits),
optionally only its ``last`` most recent. Latency figures pool the exact samples of a side's trials, as the marts
count them: every wake (its family's wake row) with a latency, failed or not, as ``wake_latency_distribution``; the
successful samples of each ``Step_`` row (as ``step_latency``); rows Locust booked after its last stats write are
left out. Densities and capacity are the marts' per-trial figures; the failure ratio is pooled from each trial's
Aggregated stats row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb
import numpy as np

from substrate_assets.analysis.comparison import (
    LATENCY_PERCENTILES,
    Comparison,
    FigureComparison,
    Side,
    Thresholds,
    compare_failure_ratio,
    compare_latency,
    compare_scalar,
)
from substrate_assets.families import WAKE_ROWS

# The wake rows of every family: a trial's wake samples are under its family's.
WAKE_NAMES = frozenset(name for name in WAKE_ROWS.values() if name)
MIN_VERSION_PREFIX = 7
DENSITIES = (("actors_per_node", "actors"), ("actors_per_vcpu", "actors/vCPU"), ("actors_per_gb_ram", "actors/GiB"))
# What a side ran, from capacity_history: a difference is printed beside the figures, as it may explain them.
CONFIGURATION_COLUMNS = ("suite", "script_sha256", "sandbox_class", "lifecycle_mode", "actor_memory", "sut_version",
                         "machine_type", "think_scale", "ladder", "node_count", "users", "actors_per_user",
                         "duration_s")


class SideNotFound(LookupError):
    """A side that selects no trial; the message says what was looked for and what there is."""


def _values(connection: duckdb.DuckDBPyConnection, sql: str, parameters: Sequence[object]) -> list[object]:
    return [row[0] for row in connection.execute(sql, list(parameters)).fetchall()]


def select_side(connection: duckdb.DuckDBPyConnection, spec: str, suite: str | None = None,
                last: int | None = None) -> Side:
    """The trials ``spec`` names: a trial id, or with ``suite`` the suite's trials whose tag or system-under-test
    version is ``spec`` (most recent ``last`` of them when given)."""
    if suite is None:
        if _values(connection, "SELECT trial_id FROM trial_manifests WHERE trial_id = ?", [spec]):
            return Side(spec, (spec,))
        raise SideNotFound(f"no trial {spec!r} in the warehouse; to compare groups of trials, give --suite and a "
                           "tag or system-under-test version")
    prefix = spec if len(spec) >= MIN_VERSION_PREFIX else None
    exact = _values(connection, "SELECT count(*) FROM trial_manifests WHERE suite = ? AND (tag = ? OR sut_version = ?)",
                    [suite, spec, spec])[0]
    if not exact and prefix is not None:
        versions = _values(connection, "SELECT DISTINCT sut_version FROM trial_manifests WHERE suite = ? AND "
                           "starts_with(sut_version, ?) ORDER BY ALL", [suite, prefix])
        if len(versions) > 1:
            raise SideNotFound(f"{spec!r} is the start of {len(versions)} versions of suite {suite!r} "
                               f"({', '.join(map(str, versions))}): give enough of one to tell it apart")
    # A group is of trials that ran to their end: one stopped early measured part of a run.
    trial_ids = _values(connection, """
        SELECT trial_id FROM trial_manifests
        WHERE suite = ? AND completed IS NOT FALSE
          AND (tag = ? OR sut_version = ? OR (? AND starts_with(sut_version, ?)))
        ORDER BY started_at DESC NULLS LAST, trial_id DESC""", [suite, spec, spec, not exact and prefix is not None,
                                                                 prefix or ""])
    if not trial_ids:
        known = connection.execute("""
            SELECT count(*), list(DISTINCT tag ORDER BY tag), list(DISTINCT sut_version ORDER BY sut_version)
            FROM trial_manifests WHERE suite = ?""", [suite]).fetchone()
        if not known or not known[0]:
            raise SideNotFound(f"suite {suite!r} has no trials in the warehouse")
        raise SideNotFound(f"no completed trial of suite {suite!r} has tag or system-under-test version {spec!r} "
                           f"(tags: {', '.join(map(str, known[1]))}; versions: {', '.join(map(str, known[2]))})")
    chosen = tuple(map(str, trial_ids[:last] if last else trial_ids))
    return Side(f"{suite}@{spec} ({len(chosen)} {'trial' if len(chosen) == 1 else 'trials'})", chosen)


def latency_samples(connection: duckdb.DuckDBPyConnection, side: Side, steps: bool = True) -> dict[str, np.ndarray]:
    """Each compared request name's samples on ``side``, ascending (with ``steps`` False, the wakes only)."""
    columns = connection.execute("""
        SELECT name, latency_ms FROM request_samples
        WHERE trial_id IN (SELECT unnest(?)) AND locust_counted IS NOT FALSE AND latency_ms IS NOT NULL
          AND (is_wake(wake, name) OR (? AND starts_with(name, 'Step_') AND success))
        ORDER BY name, latency_ms""", [list(side.trial_ids), steps]).fetchnumpy()
    names, latencies = np.asarray(columns["name"], dtype=object), np.asarray(columns["latency_ms"], dtype=float)
    if not len(names):
        return {}
    # Sorted by name, so each name's samples are one run of rows, already ascending.
    starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
    return {str(names[start]): latencies[start:end]
            for start, end in zip(starts, [*starts[1:], len(names)], strict=True)}


def wake_samples(connection: duckdb.DuckDBPyConnection, side: Side) -> np.ndarray:
    """The side's wake latencies, ascending: every wake the marts count, failed or not."""
    found = list(latency_samples(connection, side, steps=False).values())
    return np.sort(np.concatenate(found)) if found else np.empty(0)


def suite_of(connection: duckdb.DuckDBPyConnection, side: Side) -> str | None:
    """The suite a side's (first) trial ran: whose thresholds judge it as a candidate."""
    return _values(connection, "SELECT any_value(suite) FROM trial_manifests WHERE trial_id = ?",
                   [side.trial_ids[0]])[0]


def _per_trial(connection: duckdb.DuckDBPyConnection, table: str, column: str, side: Side) -> list[float]:
    """The side's values of a per-trial figure, only when every trial of it measured the figure: an average over
    some of its trials would pass for the side's."""
    values = [float(value) for value in _values(
        connection, f"SELECT {column} FROM {table} WHERE trial_id IN (SELECT unnest(?)) AND {column} IS NOT NULL",
        [list(side.trial_ids)])]
    return values if len(values) == len(side.trial_ids) else []


def _failures(connection: duckdb.DuckDBPyConnection, side: Side) -> tuple[int, int]:
    row = connection.execute("""
        SELECT coalesce(sum(failure_count), 0), coalesce(sum(request_count), 0) FROM locust_stats
        WHERE trial_id IN (SELECT unnest(?)) AND name = 'Aggregated'""", [list(side.trial_ids)]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _request_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda name: (name not in WAKE_NAMES, name))


def configuration_differences(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> list[str]:
    """``column: baseline values → candidate values`` for each configuration column the sides differ in."""
    rows = connection.execute(
        f"SELECT trial_id, {', '.join(CONFIGURATION_COLUMNS)} FROM capacity_history "
        "WHERE trial_id IN (SELECT unnest(?))", [[*baseline.trial_ids, *candidate.trial_ids]]).fetchall()
    differences = []
    for index, column in enumerate(CONFIGURATION_COLUMNS, start=1):
        sides = [sorted({"null" if row[index] is None else str(row[index]) for row in rows if row[0] in side.trial_ids})
                 for side in (baseline, candidate)]
        if sides[0] != sides[1]:
            differences.append(f"{column}: {', '.join(sides[0]) or '?'} → {', '.join(sides[1]) or '?'}")
    return differences


def compare(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side,
            thresholds: Thresholds) -> Comparison:
    """Every figure of both sides: the wake and step latencies, densities, capacity (when a side has it) and
    failure ratio. SideNotFound when the sides share a trial: a comparison of a trial with itself says nothing."""
    shared = sorted(set(baseline.trial_ids) & set(candidate.trial_ids))
    if shared:
        raise SideNotFound(f"both sides hold {', '.join(shared)}: compare two different trials or groups")
    samples = [latency_samples(connection, side) for side in (baseline, candidate)]
    empty = np.empty(0)
    names = _request_order(set(samples[0]) | set(samples[1]))
    figures: list[FigureComparison] = []
    for name in names:
        figures += compare_latency(name, samples[0].get(name, empty), samples[1].get(name, empty), thresholds,
                                   family=len(names) * len(LATENCY_PERCENTILES))
    for column, unit in DENSITIES:
        figures.append(compare_scalar(column, unit, "higher", _per_trial(connection, "density_frontiers", column,
                                                                         baseline),
                                      _per_trial(connection, "density_frontiers", column, candidate), thresholds))
    capacities = [_per_trial(connection, "slo_capacity", "capacity_users", side) for side in (baseline, candidate)]
    if any(capacities):
        figures.append(compare_scalar("capacity_users", "users", "higher", capacities[0], capacities[1], thresholds))
    figures.append(compare_failure_ratio(_failures(connection, baseline), _failures(connection, candidate),
                                         thresholds))
    return Comparison(baseline, candidate, thresholds, figures,
                      [*configuration_differences(connection, baseline, candidate),
                       *unfinished(connection, baseline, candidate)])


def unfinished(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> list[str]:
    """A line for each trial of either side that did not run to its end (named by id, so only one given by id)."""
    stopped = _values(connection, "SELECT trial_id FROM trial_manifests WHERE trial_id IN (SELECT unnest(?)) AND "
                      "completed IS FALSE ORDER BY ALL", [[*baseline.trial_ids, *candidate.trial_ids]])
    return [f"trial {trial_id} did not run to its end: its figures are of part of a run" for trial_id in stopped]


def previous_trial(connection: duckdb.DuckDBPyConnection, trial_id: str) -> str | None:
    """The latest earlier trial of ``trial_id``'s suite and configuration (capacity_history's order) that ran to its
    end, if any: a trial stopped early is no baseline."""
    values = _values(connection, """
        SELECT previous.trial_id FROM capacity_history AS this
        JOIN capacity_history AS previous
          ON previous.configuration = this.configuration AND previous.suite IS NOT DISTINCT FROM this.suite
             AND previous.trial_number < this.trial_number
        JOIN trial_manifests AS manifest ON manifest.trial_id = previous.trial_id AND manifest.completed IS NOT FALSE
        WHERE this.trial_id = ?
        ORDER BY previous.trial_number DESC LIMIT 1""", [trial_id])
    return str(values[0]) if values else None
