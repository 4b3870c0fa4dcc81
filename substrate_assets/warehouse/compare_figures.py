"""Every figure of a comparison's trials, read from the warehouse and built for the verdict
(:mod:`substrate_assets.analysis.measured`): per side trial and history trial.

- **Wakes** (each family's wake row, from ``wake_samples``): the geometric mean; where the runtime knows each wake's
  path, the geometric mean at a common mix of paths, each path's p50 and the slow share; and upstream's p50 and p99.
  History trials' values come from their own samples, as the sides'.
- **Steps** (each ``Step_`` row's successful samples): p50 and p99; history values from ``step_latency``.
- **Request rows** (:mod:`~substrate_assets.analysis.request_figures`): the rows that answer the family's question
  (``QUESTION_ROWS``: glutton's ``ResumeActor gmean``, p50 and p99) and any the thresholds ask for
  (``compare.figures``, ``--figure``), from each trial's own successful samples, history trials' included.
- **Densities and capacity**: the per-trial figures of kind ``density`` that ``trial_figures`` declares (from
  ``density_frontiers``, ``slo_capacity``); a figure declared there is judged here too.
- **The failure ratio**: each trial's failed and all requests (its Aggregated stats row), judged as counts.

**Primary figures**: those the suite names (``compare.primary``) or ``--figure`` asks for, else the wake's path
geometric mean where present (else its geometric mean) and the geometric mean of each of the family's question rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import duckdb
import numpy as np
import numpy.typing as npt

from substrate_assets.analysis.comparison import Side
from substrate_assets.analysis.counts import Count
from substrate_assets.analysis.figure_spec import STATISTICS, RequestFigure
from substrate_assets.analysis.measured import (
    LATENCY_PERCENTILES,
    Better,
    Measured,
    count_figure,
    latency_figures,
    scalar_figure,
    wake_figures,
)
from substrate_assets.analysis.request_figures import request_figure_row
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.wake_figures import TrialWakes
from substrate_assets.families import QUESTION_ROWS
from substrate_assets.warehouse.compare_samples import recorded_rows, row_samples, step_samples, wake_trials
from substrate_assets.warehouse.introspection import has_table

TRIAL_FIGURES = "trial_figures"  # each trial's headline figures, each declared once (dbt_like_sql/trial_figures.sql)
_NO_WAKES = TrialWakes(np.empty(0))


class FigureNotRecorded(ValueError):
    """A figure asked for of a request row that no trial of either side recorded."""


def per_trial_figures(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side,
                      history: Sequence[str]) -> list[Measured]:
    """The figures with one value per trial that a verdict judges as they are (kind ``density``: the densities,
    the capacity), each as trial_figures declares it, in the order of their names; one that no trial of either side
    measured is left out (a table not built yet has none)."""
    trials = [*baseline.trial_ids, *candidate.trial_ids, *history]
    if not trials or not has_table(connection, TRIAL_FIGURES):
        return []
    values: dict[tuple[str, str, Better], dict[str, float | None]] = {}
    for figure, unit, better, trial, value in connection.execute(
            f"SELECT figure, unit, better, trial_id, value FROM {TRIAL_FIGURES} WHERE kind = 'density' AND "
            "list_contains(?::VARCHAR[], trial_id) ORDER BY figure", [trials]).fetchall():
        values.setdefault((figure, unit, cast(Better, better)), {})[trial] = value
    sides = [*baseline.trial_ids, *candidate.trial_ids]
    return [scalar_figure(figure, unit, better, "density", [by_trial.get(trial) for trial in baseline.trial_ids],
                          [by_trial.get(trial) for trial in candidate.trial_ids],
                          [value for trial in history if (value := by_trial.get(trial)) is not None])
            for (figure, unit, better), by_trial in values.items()
            if any(by_trial.get(trial) is not None for trial in sides)]


def request_counts(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> dict[str, Count]:
    """Each trial's (failed, all) requests: its Aggregated stats row."""
    rows = connection.execute("""
        SELECT trial_id, sum(failure_count), sum(request_count) FROM locust_stats
        WHERE list_contains(?::VARCHAR[], trial_id) AND name = 'Aggregated' GROUP BY trial_id""",
                              [list(trial_ids)]).fetchall()
    return {row[0]: (int(row[1]), int(row[2])) for row in rows if row[1] is not None and row[2] is not None}


def _step_history(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> dict[str, dict[str, list[float]]]:
    """The history trials' p50 and p99 of each step, from step_latency."""
    found: dict[str, dict[str, list[float]]] = {}
    if not trial_ids or not has_table(connection, "step_latency"):
        return found
    for _trial, step, p50, p99 in connection.execute(
            "SELECT trial_id, step, p50_ms, p99_ms FROM step_latency WHERE list_contains(?::VARCHAR[], trial_id) "
            "ORDER BY trial_id", [list(trial_ids)]).fetchall():
        past = found.setdefault(f"Step_{step}", {"p50": [], "p99": []})
        for label, value in (("p50", p50), ("p99", p99)):
            if value is not None:
                past[label].append(float(value))
    return found


def _percentile(latencies: npt.NDArray[np.floating[Any]], per_mille: int) -> float:
    """A history trial's floor-index percentile of its wakes (it has some)."""
    value = floor_index(latencies, per_mille)
    assert value is not None
    return float(value)


def wake_rows(name: str, by_trial: dict[str, TrialWakes], baseline: Side, candidate: Side,
               history: Sequence[str]) -> list[Measured]:
    base = [by_trial.get(trial, _NO_WAKES) for trial in baseline.trial_ids]
    cand = [by_trial.get(trial, _NO_WAKES) for trial in candidate.trial_ids]
    past = [by_trial[trial] for trial in history if trial in by_trial and len(by_trial[trial].latencies)]
    upstream = latency_figures(name, [trial.latencies for trial in base], [trial.latencies for trial in cand],
                               {label: [_percentile(trial.latencies, per_mille) for trial in past]
                                for label, per_mille in LATENCY_PERCENTILES})
    return [*wake_figures(name, base, cand, past), *upstream]


def measured_figures(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side,
                     history: Sequence[str] = (), primary: Sequence[str] | None = None,
                     requests: Sequence[RequestFigure] = ()) -> list[Measured]:
    """Every figure of both sides' trials, with the history trials' values of each, primary ones marked;
    ``requests``: figures of request rows asked for besides the family's (FigureNotRecorded when no trial of either
    side recorded the row)."""
    sides = [*baseline.trial_ids, *candidate.trial_ids]
    wakes = wake_trials(connection, [*sides, *history])
    figures: list[Measured] = []
    for name in sorted(wakes):
        if any(trial in wakes[name] for trial in sides):
            figures += wake_rows(name, wakes[name], baseline, candidate, history)
    steps, past_steps = step_samples(connection, sides), _step_history(connection, history)
    empty = np.empty(0)
    for name in sorted(steps):
        figures += latency_figures(name, [steps[name].get(trial, empty) for trial in baseline.trial_ids],
                                   [steps[name].get(trial, empty) for trial in candidate.trial_ids],
                                   past_steps.get(name))
    wanted = request_figures(connection, sides, requests)
    named = {row.figure for row in figures}  # a wake's or a step's own figure of the name stands
    figures += [row for row in _request_rows(connection, wanted, baseline, candidate, history)
                if row.figure not in named]
    everyone = [*sides, *history]
    figures += per_trial_figures(connection, baseline, candidate, history)
    counts = request_counts(connection, everyone)
    figures.append(count_figure("failure_ratio", [counts.get(trial) for trial in baseline.trial_ids],
                                [counts.get(trial) for trial in candidate.trial_ids],
                                [counts[trial] for trial in history if trial in counts]))
    base_moments, cand_moments = (side_moments(connection, side) for side in (baseline, candidate))
    return [with_moments(row, base_moments, cand_moments) for row in mark_primary(figures, primary)]


def request_figures(connection: duckdb.DuckDBPyConnection, sides: Sequence[str],
                    requests: Sequence[RequestFigure]) -> list[RequestFigure]:
    """The request rows' figures a comparison of these trials judges: each of their families' question rows (its
    geometric mean, p50 and p99) that they recorded, and ``requests``, in that order, each once."""
    families = [str(row[0]) for row in connection.execute(
        "SELECT DISTINCT family FROM trial_manifests WHERE list_contains(?::VARCHAR[], trial_id) AND family IS NOT "
        "NULL ORDER BY ALL", [list(sides)]).fetchall()]
    recorded = set(recorded_rows(connection, sides))
    missing = sorted({figure.row for figure in requests} - recorded)
    if missing:
        said = ", ".join(sorted(recorded)) or "no request with a successful sample (an upstream run keeps no log)"
        raise FigureNotRecorded(f"--figure {', '.join(missing)}: no trial of either side recorded a successful "
                                f"request of that name; they recorded: {said}")
    question = [RequestFigure(row, statistic) for family in families for row in QUESTION_ROWS.get(family, ())
                if row in recorded for statistic in ("gmean", "p50", "p99")]
    return list(dict.fromkeys([*question, *requests]))


def _request_rows(connection: duckdb.DuckDBPyConnection, wanted: Sequence[RequestFigure], baseline: Side,
                  candidate: Side, history: Sequence[str]) -> list[Measured]:
    samples = row_samples(connection, sorted({figure.row for figure in wanted}),
                          [*baseline.trial_ids, *candidate.trial_ids, *history])
    empty = np.empty(0)
    rows = []
    for figure in sorted(wanted, key=lambda figure: (figure.row, STATISTICS.index(figure.statistic))):
        by_trial = samples.get(figure.row, {})
        rows.append(request_figure_row(
            figure, [by_trial.get(trial, empty) for trial in baseline.trial_ids],
            [by_trial.get(trial, empty) for trial in candidate.trial_ids],
            [by_trial[trial] for trial in history if trial in by_trial]))
    return rows


def side_moments(connection: duckdb.DuckDBPyConnection, side: Side) -> list[str]:
    """The moment of the machine each of a side's trials ran at: a side that is a group ran back to back, at one;
    otherwise each trial's group, or the trial itself."""
    if side.group is not None:
        return [f"group {side.group}"] * len(side.trial_ids)
    groups = dict(connection.execute("SELECT trial_id, group_id FROM trial_manifests WHERE "
                                     "list_contains(?::VARCHAR[], trial_id)", [list(side.trial_ids)]).fetchall())
    return [f"group {groups[trial]}" if groups.get(trial) else f"trial {trial}" for trial in side.trial_ids]


def with_moments(row: Measured, baseline: list[str], candidate: list[str]) -> Measured:
    """The figure with its sides' moments, where every trial of a side measured it (a side's values are then its
    trials', in order)."""
    return replace(row, baseline_moments=tuple(baseline) if len(row.baseline) == len(baseline) else (),
                   candidate_moments=tuple(candidate) if len(row.candidate) == len(candidate) else ())


def default_primary(figures: Sequence[Measured]) -> list[str]:
    """Each wake row's path geometric mean where the comparison has one, else its geometric mean; and each family
    question row's geometric mean (every ``<row> gmean`` is one or the other)."""
    names = {row.figure for row in figures if row.baseline and row.candidate}
    chosen = []
    for row in figures:
        if row.figure.endswith(" gmean") and not row.figure.endswith(" path gmean"):
            wake = row.figure.removesuffix(" gmean")
            chosen.append(f"{wake} path gmean" if f"{wake} path gmean" in names else row.figure)
    return chosen


def mark_primary(figures: list[Measured], primary: Sequence[str] | None) -> list[Measured]:
    chosen = set(primary if primary is not None else default_primary(figures))
    return [row.as_primary() if row.figure in chosen else row for row in figures]
