"""Two sets of trials from the warehouse, compared figure by figure (:mod:`substrate_assets.analysis.verdicts`),
with the history of the baseline's configuration as the measure of its noise.

A side is one trial (its id), a group of repeated trials (its group id: ``run --repeat``, ``ab``), or the trials of
a suite whose run tag or version of the system under test is the given value (a version may be given by a prefix
of at least 7 characters, as git abbreviates commits), optionally only its ``last`` most recent. Each trial's
latency figures come from its exact samples, as the marts count them: every wake (its family's wake row) with a
latency, failed or not, as ``wake_latency_distribution``; the successful samples of each ``Step_`` row (as
``step_latency``); rows Locust booked after its last stats write left out. Densities and capacity are the marts'
per-trial figures; each trial's failure ratio is its Aggregated stats row's failures over requests.

**History.** The trials of a configuration (``capacity_history``'s suite and configuration) since its latest change
point, at most the last :data:`~noise.HISTORY_WINDOW`, completed: the window its noise floor is measured over
(``noise_floor``). A comparison of two sides takes the window of the baseline's configuration, less the sides' own
trials, as more measurements of the noise; judging a new trial or group *against history* takes the window of its
configuration before its first trial as the baseline itself. History trials' figures are read from the marts
(``wake_latency_distribution``, ``step_latency``, ``density_frontiers``, ``slo_capacity``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np

from substrate_assets.analysis.noise import HISTORY_WINDOW
from substrate_assets.analysis.verdicts import (
    LATENCY_PERCENTILES,
    Comparison,
    Measured,
    Side,
    Thresholds,
    judge,
    latency_figures,
    scalar_figure,
)
from substrate_assets.families import WAKE_ROWS
from substrate_assets.warehouse.connection import has_table

# The wake rows of every family: a trial's wake samples are under its family's.
WAKE_NAMES = frozenset(name for name in WAKE_ROWS.values() if name)
MIN_VERSION_PREFIX = 7
DENSITIES = (("actors_per_node", "actors"), ("actors_per_vcpu", "actors/vCPU"), ("actors_per_gb_ram", "actors/GiB"))
# What a side ran, from capacity_history: a difference is printed beside the figures, as it may explain them.
CONFIGURATION_COLUMNS = ("suite", "script_sha256", "sandbox_class", "lifecycle_mode", "actor_memory", "sut_version",
                         "machine_type", "think_scale", "ladder", "node_count", "users", "actors_per_user",
                         "duration_s", "inject_wake_delay_ms")


class SideNotFound(LookupError):
    """A side that selects no trial; the message says what was looked for and what there is."""


def _values(connection: duckdb.DuckDBPyConnection, sql: str, parameters: Sequence[object]) -> list[object]:
    return [row[0] for row in connection.execute(sql, list(parameters)).fetchall()]


def _trials(count: int) -> str:
    return f"{count} {'trial' if count == 1 else 'trials'}"


def select_side(connection: duckdb.DuckDBPyConnection, spec: str, suite: str | None = None,
                last: int | None = None) -> Side:
    """The trials ``spec`` names: a trial id or a group id, or with ``suite`` the suite's trials whose tag or
    system-under-test version is ``spec`` (most recent ``last`` of them when given)."""
    if suite is None:
        if _values(connection, "SELECT trial_id FROM trial_manifests WHERE trial_id = ?", [spec]):
            return Side(spec, (spec,))
        grouped = _values(connection, "SELECT trial_id FROM trial_manifests WHERE group_id = ? "
                          "ORDER BY started_at NULLS LAST, trial_id", [spec])
        if grouped:
            chosen = tuple(map(str, grouped[-last:] if last else grouped))
            return Side(f"group {spec} ({_trials(len(chosen))})", chosen)
        raise SideNotFound(f"no trial or group {spec!r} in the warehouse; to compare a suite's trials by tag or "
                           "version, give --suite too")
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
    return Side(f"{suite}@{spec} ({_trials(len(chosen))})", chosen)


TrialSamples = dict[str, dict[str, np.ndarray]]


def trial_samples(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str],
                  steps: bool = True) -> TrialSamples:
    """Each compared request name's samples, by name and trial, ascending (with ``steps`` False, the wakes only): one
    list per (name, trial) from DuckDB, each sorted by numpy (a third of the time of an ORDER BY over all of them)."""
    found = connection.execute("""
        SELECT name, trial_id, list(latency_ms) AS latencies FROM request_samples
        WHERE list_contains(?::VARCHAR[], trial_id) AND locust_counted IS NOT FALSE AND latency_ms IS NOT NULL
          AND (is_wake(wake, name) OR (? AND starts_with(name, 'Step_') AND success))
        GROUP BY ALL ORDER BY name, trial_id""", [list(trial_ids), steps]).fetchnumpy()
    samples: TrialSamples = {}
    for name, trial_id, latencies in zip(found["name"], found["trial_id"], found["latencies"], strict=True):
        samples.setdefault(str(name), {})[str(trial_id)] = np.sort(np.asarray(latencies, dtype=float))
    return samples


def wake_samples(connection: duckdb.DuckDBPyConnection, side: Side) -> np.ndarray:
    """The side's wake latencies, pooled and ascending, to draw (a CDF): every wake the marts count, failed or
    not. Pooled for a picture only; no verdict is drawn from requests pooled across trials."""
    found = [values for by_trial in trial_samples(connection, side.trial_ids, steps=False).values()
             for values in by_trial.values()]
    return np.sort(np.concatenate(found)) if found else np.empty(0)


def suite_of(connection: duckdb.DuckDBPyConnection, side: Side) -> str | None:
    """The suite a side's (first) trial ran: whose thresholds judge it as a candidate."""
    return _values(connection, "SELECT any_value(suite) FROM trial_manifests WHERE trial_id = ?",
                   [side.trial_ids[0]])[0]


def _per_trial(connection: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str],
               trial_ids: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """``columns`` of ``table`` by trial for those trials that have a row (a table not built yet has none)."""
    if not trial_ids or not has_table(connection, table):
        return {}
    rows = connection.execute(f"SELECT trial_id, {', '.join(columns)} FROM {table} "
                              "WHERE list_contains(?::VARCHAR[], trial_id)", [list(trial_ids)]).fetchall()
    return {row[0]: dict(zip(columns, row[1:], strict=True)) for row in rows}


def _failure_ratios(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> dict[str, float | None]:
    """Each trial's failed over all requests (its Aggregated stats row); null for a trial with no requests."""
    rows = connection.execute("""
        SELECT trial_id, CASE WHEN sum(request_count) > 0 THEN sum(failure_count) / sum(request_count) END
        FROM locust_stats WHERE list_contains(?::VARCHAR[], trial_id) AND name = 'Aggregated' GROUP BY trial_id""",
                              [list(trial_ids)]).fetchall()
    return {row[0]: None if row[1] is None else float(row[1]) for row in rows}


def _measured(values: Iterable[object]) -> list[float]:
    return [float(value) for value in values if value is not None]


@dataclass(frozen=True)
class History:
    """The earlier trials a comparison measures its noise with, and how to say what they are."""

    trial_ids: tuple[str, ...]
    description: str


def _history_latencies(connection: duckdb.DuckDBPyConnection, names: Iterable[str],
                       trial_ids: Sequence[str]) -> dict[str, dict[str, list[float]]]:
    """The history trials' p50 and p99 of each compared request name, from the marts: wakes from
    wake_latency_distribution, steps from step_latency."""
    wakes = _per_trial(connection, "wake_latency_distribution", ("p50_ms", "p99_ms"), trial_ids)
    steps: dict[str, dict[str, dict[str, float | None]]] = {}
    if trial_ids and has_table(connection, "step_latency"):
        for trial_id, step, p50, p99 in connection.execute(
                "SELECT trial_id, step, p50_ms, p99_ms FROM step_latency WHERE list_contains(?::VARCHAR[], trial_id)",
                [list(trial_ids)]).fetchall():
            steps.setdefault(f"Step_{step}", {})[trial_id] = {"p50_ms": p50, "p99_ms": p99}
    found = {}
    for name in names:
        by_trial = wakes if name in WAKE_NAMES else steps.get(name, {})
        found[name] = {label: _measured(by_trial.get(trial_id, {}).get(f"{label}_ms") for trial_id in trial_ids)
                       for label, _ in LATENCY_PERCENTILES}
    return found


def _request_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda name: (name not in WAKE_NAMES, name))


def measured_figures(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side,
                     history: Sequence[str] = ()) -> list[Measured]:
    """Every figure of both sides' trials, with the history trials' values of each: the wake and step latencies,
    densities, capacity (when a trial of either side has one) and the failure ratio."""
    samples = trial_samples(connection, [*baseline.trial_ids, *candidate.trial_ids])
    names = _request_order(samples)
    past = _history_latencies(connection, names, history)
    empty = np.empty(0)
    figures: list[Measured] = []
    for name in names:
        by_trial = samples[name]
        figures += latency_figures(name, [by_trial.get(trial, empty) for trial in baseline.trial_ids],
                                   [by_trial.get(trial, empty) for trial in candidate.trial_ids], past[name])
    everyone = [*baseline.trial_ids, *candidate.trial_ids, *history]
    densities = _per_trial(connection, "density_frontiers", [column for column, _ in DENSITIES], everyone)
    for column, unit in DENSITIES:
        figures.append(_scalar(column, unit, "higher", "density", densities, column, baseline, candidate, history))
    capacities = _per_trial(connection, "slo_capacity", ["capacity_users"], everyone)
    if any(capacities.get(trial, {}).get("capacity_users") is not None
           for trial in (*baseline.trial_ids, *candidate.trial_ids)):
        figures.append(_scalar("capacity_users", "users", "higher", "density", capacities, "capacity_users",
                               baseline, candidate, history))
    failures = {trial: {"ratio": ratio} for trial, ratio in _failure_ratios(connection, everyone).items()}
    figures.append(_scalar("failure_ratio", "ratio", "lower", "failure_ratio", failures, "ratio", baseline,
                           candidate, history))
    return figures


def _scalar(figure: str, unit: str, better: str, kind: str, table: dict[str, dict[str, float | None]], column: str,
            baseline: Side, candidate: Side, history: Sequence[str]) -> Measured:
    def values(trial_ids: Sequence[str]) -> list[float | None]:
        return [table.get(trial, {}).get(column) for trial in trial_ids]

    return scalar_figure(figure, unit, better, kind, values(baseline.trial_ids),  # type: ignore[arg-type]
                         values(candidate.trial_ids), _measured(values(history)))


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


def configuration_of(connection: duckdb.DuckDBPyConnection,
                     trial_ids: Sequence[str]) -> tuple[str | None, str, int] | None:
    """The (suite, configuration) every one of the trials ran, and the lowest trial number among them; None when
    they ran more than one, or capacity_history does not know them all."""
    rows = connection.execute("SELECT suite, configuration, count(*), min(trial_number) FROM capacity_history "
                              "WHERE list_contains(?::VARCHAR[], trial_id) GROUP BY ALL", [list(trial_ids)]).fetchall()
    if len(rows) != 1 or rows[0][2] != len(set(trial_ids)):
        return None
    return rows[0][0], rows[0][1], int(rows[0][3])


def history_window(connection: duckdb.DuckDBPyConnection, suite: str | None, configuration: str,
                   before: int | None = None, exclude: Iterable[str] = ()) -> History:
    """The configuration's trials in metric_history (those that ran to their end) since its latest change point
    (before trial number ``before`` when given: the window a trial that starts there is judged against), the last
    :data:`HISTORY_WINDOW` of them, less ``exclude``; in trial order. noise_floor's window, with ``before`` None and
    nothing excluded."""
    if not has_table(connection, "metric_history"):
        return History((), "none: the warehouse has no metric_history yet")
    limit = before if before is not None else 2 ** 62
    since = 1
    if has_table(connection, "change_points"):
        since = int(_values(connection, """
            SELECT coalesce(max(trial_number), 1) FROM change_points
            WHERE suite IS NOT DISTINCT FROM ? AND configuration = ? AND trial_number < ?""",
                            [suite, configuration, limit])[0])
    trial_ids = _values(connection, """
        SELECT trial_id FROM metric_history
        WHERE suite IS NOT DISTINCT FROM ? AND configuration = ? AND trial_number >= ? AND trial_number < ?
          AND NOT list_contains(?::VARCHAR[], trial_id)
        GROUP BY trial_id, trial_number ORDER BY trial_number DESC LIMIT ?""",
                        [suite, configuration, since, limit, list(exclude), HISTORY_WINDOW])
    chosen = tuple(str(trial) for trial in reversed(trial_ids))
    point = f" since its change point at trial #{since}" if since > 1 else ""
    return History(chosen, f"{_trials(len(chosen))} of suite {suite}'s configuration {configuration}{point}")


def compare(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side, thresholds: Thresholds,
            history: History | None = None) -> Comparison:
    """Every figure of both sides, judged with the noise of their repeats and of ``history`` (by default the
    window of the baseline's configuration, less both sides' trials; none when the baseline's trials ran more than
    one configuration). SideNotFound when the sides share a trial: a comparison of a trial with itself says
    nothing."""
    shared = sorted(set(baseline.trial_ids) & set(candidate.trial_ids))
    if shared:
        raise SideNotFound(f"both sides hold {', '.join(shared)}: compare two different trials or groups")
    if history is None:
        configured = configuration_of(connection, baseline.trial_ids)
        history = History((), "none: the baseline's trials ran more than one configuration") if configured is None \
            else history_window(connection, configured[0], configured[1],
                                exclude=[*baseline.trial_ids, *candidate.trial_ids])
    figures, level = judge(measured_figures(connection, baseline, candidate, history.trial_ids), thresholds)
    return Comparison(baseline, candidate, thresholds, figures,
                      [*configuration_differences(connection, baseline, candidate),
                       *unfinished(connection, baseline, candidate)], history.description, level)


def judge_against_history(connection: duckdb.DuckDBPyConnection, candidate: Side,
                          thresholds: Thresholds) -> Comparison | None:
    """The candidate (a trial or a group of one configuration) against its configuration's history before its first
    trial, which is the baseline; None when there is no earlier trial to judge it against."""
    configured = configuration_of(connection, candidate.trial_ids)
    if configured is None:
        return None
    suite, configuration, first = configured
    window = history_window(connection, suite, configuration, before=first, exclude=candidate.trial_ids)
    if not window.trial_ids:
        return None
    baseline = Side(f"history: {window.description}", window.trial_ids)
    return compare(connection, baseline, candidate, thresholds,
                   History((), f"the baseline is the history ({window.description})"))


def unfinished(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> list[str]:
    """A line for each trial of either side that did not run to its end (named by id, so only one given by id)."""
    stopped = _values(connection, "SELECT trial_id FROM trial_manifests WHERE trial_id IN (SELECT unnest(?)) AND "
                      "completed IS FALSE ORDER BY ALL", [[*baseline.trial_ids, *candidate.trial_ids]])
    return [f"trial {trial_id} did not run to its end: its figures are of part of a run" for trial_id in stopped]
