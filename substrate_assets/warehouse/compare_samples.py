"""The exact samples a comparison judges, read from the warehouse: each trial's wakes with their paths
(``wake_samples``, the marts' population: every wake Locust counted, failed or not) and the successful samples of
each ``Step_`` row, or of any request row asked for (as ``step_latency`` counts them; rows Locust booked after its
last stats write left out).

One list per (name, trial) from DuckDB, each sorted by numpy (a third of the time of an ORDER BY over all of them)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import numpy.typing as npt

from substrate_assets.analysis.wake_figures import WAKE_PATHS, TrialWakes
from substrate_assets.warehouse.introspection import has_table

TrialSamples = dict[str, dict[str, npt.NDArray[np.float64]]]
TrialWakeSamples = dict[str, dict[str, TrialWakes]]


def step_samples(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> TrialSamples:
    """Each ``Step_`` row's successful samples, by name and trial, ascending."""
    return _successful(connection, trial_ids, "starts_with(name, 'Step_')", [])


def row_samples(connection: duckdb.DuckDBPyConnection, rows: Sequence[str], trial_ids: Sequence[str]) -> TrialSamples:
    """The successful samples of each request row of ``rows`` (by name), by name and trial, ascending."""
    return _successful(connection, trial_ids, "list_contains(?::VARCHAR[], name)", [list(rows)]) if rows else {}


def recorded_rows(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> list[str]:
    """The names of the request rows the trials' request logs hold a successful sample of, in order."""
    return [str(row[0]) for row in connection.execute(
        "SELECT DISTINCT name FROM request_samples WHERE list_contains(?::VARCHAR[], trial_id) AND success "
        "AND locust_counted IS NOT FALSE AND latency_ms IS NOT NULL ORDER BY name", [list(trial_ids)]).fetchall()]


def _successful(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str], which: str,
                parameters: list[object]) -> TrialSamples:
    found = connection.execute(f"""
        SELECT name, trial_id, list(latency_ms) AS latencies FROM request_samples
        WHERE list_contains(?::VARCHAR[], trial_id) AND locust_counted IS NOT FALSE AND latency_ms IS NOT NULL
          AND {which} AND success
        GROUP BY ALL ORDER BY name, trial_id""", [list(trial_ids), *parameters]).fetchnumpy()
    samples: TrialSamples = {}
    for name, trial_id, latencies in zip(found["name"], found["trial_id"], found["latencies"], strict=True):
        samples.setdefault(str(name), {})[str(trial_id)] = np.sort(np.asarray(latencies, dtype=float))
    return samples


def wake_trials(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> TrialWakeSamples:
    """Each trial's wakes with a latency, by wake row and trial: ascending, each with its path (wake_samples; the
    request log alone, no path known, in a warehouse whose models are not built yet). Read as flat numeric columns
    per wake row (the trial as its index in ``trial_ids``, the path as its index in WAKE_PATHS) and sorted by numpy:
    no Python object per sample."""
    if has_table(connection, "wake_samples"):
        source, path = "wake_samples WHERE true", "coalesce(list_position(?::VARCHAR[], wake_path) - 1, -1)"
        codes: list[object] = [list(WAKE_PATHS)]
    else:
        source, path, codes = ("request_samples WHERE locust_counted IS NOT FALSE AND is_wake(wake, name)", "-1", [])
    wanted = [list(trial_ids)]
    names = [row[0] for row in connection.execute(
        f"SELECT DISTINCT name FROM {source} AND list_contains(?::VARCHAR[], trial_id) ORDER BY name",
        wanted).fetchall()]
    wakes: TrialWakeSamples = {}
    for name in names:
        found = connection.execute(
            f"SELECT list_position(?::VARCHAR[], trial_id) - 1 AS trial, latency_ms, {path}::TINYINT AS path "
            f"FROM {source} AND name = ? AND list_contains(?::VARCHAR[], trial_id) AND latency_ms IS NOT NULL",
            [*wanted, *codes, name, *wanted]).fetchnumpy()
        trials = np.asarray(found["trial"], dtype=np.int64)
        latencies = np.asarray(found["latency_ms"], dtype=float)
        paths = np.asarray(found["path"], dtype=np.int8)
        # By trial (a stable integer sort), then each trial's wakes by latency: a third of one sort on both keys.
        by_trial = np.argsort(trials, kind="stable")
        bounds = np.flatnonzero(np.diff(trials[by_trial])) + 1
        for start, end in zip([0, *bounds], [*bounds, len(trials)], strict=True):
            rows = by_trial[start:end]
            rows = rows[np.argsort(latencies[rows], kind="stable")]
            known = paths[rows]
            wakes.setdefault(str(name), {})[trial_ids[trials[rows[0]]]] = TrialWakes(
                latencies[rows], known if (known >= 0).any() else known[:0])
    return wakes


def pooled_wakes(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> npt.NDArray[np.float64]:
    """The trials' wake latencies, pooled and ascending, to draw (a CDF): every wake the marts count, failed or not.
    Pooled for a picture only; no verdict is drawn from requests pooled across trials."""
    found = [trial.latencies for by_trial in wake_trials(connection, trial_ids).values() for trial in by_trial.values()]
    return np.sort(np.concatenate(found)) if found else np.empty(0)
