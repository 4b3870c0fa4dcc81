"""The reports, each one self-contained HTML page read from the warehouse (a read-only DuckDB connection):

- :func:`trial_report`: one trial — what ran, its wake-latency distribution and CDF, its wake latency window by
  window (a trial of ten minutes or more: :mod:`.drift`), its density frontier, its SLO capacity and knee (with the
  load-points chart of a ladder), and its step latencies.
- :func:`history_report`: one suite — its figures trial by trial (``metric_history``) and their change points
  (``change_points``).
- :func:`comparison_report`: two sample sets side by side — the rows of a comparison as given, and both CDFs.

A figure the warehouse does not hold (a model not built yet, a trial without that row) is a note saying so, never an
error; a trial or suite the warehouse does not know at all is :class:`NotInWarehouse`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import altair as alt
import duckdb
import numpy as np
import numpy.typing as npt
import polars as pl

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS
from substrate_assets.analysis.comparison import Comparison
from substrate_assets.report import plots
from substrate_assets.report.drift import drift_section
from substrate_assets.report.html import (
    Html,
    Link,
    chart,
    heading,
    key_values,
    note,
    page,
    paragraph,
    section,
    side_by_side,
    table,
    warning,
)
from substrate_assets.report.verdict_text import (
    COLUMN_LEGEND,
    SHOWN_COLUMNS,
    settling_advice,
    shown_row,
    summary,
    why_text,
)
from substrate_assets.report.verdict_text import (
    notes as comparison_notes,
)
from substrate_assets.warehouse.compare_samples import pooled_wakes
from substrate_assets.warehouse.introspection import has_table

TRIAL_COLUMNS = ("trial_id", "suite", "script", "backend", "tag", "sut_version", "started_at", "ended_at", "status",
                 "failure", "failed_requests", "users", "duration_s", "think_scale", "lifecycle_mode", "disturbed",
                 "foreign_cpu_share", "steal_share", "cpu_pressure")
DISTRIBUTION_COLUMNS = ("n_wakes", "n_failed", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms",
                        "mean_ms", "gmean_ms", "slow_share")
FRONTIER_COLUMNS = ("peak_users", "actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50",
                    "actors_per_pod_p90", "actors_per_pod_p99", "aggregate_failure_ratio", "figures_from",
                    "frontier_mismatch")
CAPACITY_COLUMNS = ("slo_wake_p99_ms", "slo_failure_ratio", "points", "planned_steps", "complete_points",
                    "capacity_step", "capacity_users", "capacity_actors_per_node", "capacity_actors_per_vcpu",
                    "capacity_actors_per_gb_ram", "capacity_wake_p99_ms", "capacity_failure_ratio",
                    "capacity_null_because", "knee_step", "knee_users", "knee_actors_per_node", "knee_wake_p99_ms",
                    "knee_failure_ratio", "broken_by", "knee_null_because", "met_above_knee")
LOAD_POINT_COLUMNS = ("step", "target_users", "users", "actors_per_node", "wake_n", "wake_p50_ms", "wake_p99_ms",
                      "wake_max_ms", "failure_ratio", "complete")
STEP_COLUMNS = ("step", "n_ok_steps", "failures", "p50_ms", "p95_ms", "p99_ms")
HISTORY_COLUMNS = ("suite", "configuration", "trial_id", "started_at", "trial_number", "sut_version", "metric",
                   "value", "unit", "better")
NOISE_FLOOR_COLUMNS = ("configuration", "metric", "unit", "scale", "trials_used", "since_trial_number",
                       "first_trial_id", "last_trial_id", "median", "level", "noise", "noise_df", "robust_noise")
CHANGE_POINT_COLUMNS = ("configuration", "metric", "direction", "change_pct", "mean_before", "mean_after", "unit",
                        "p_value", "trial_number", "trial_id", "sut_version", "started_at", "previous_trial_id")


class NotInWarehouse(LookupError):
    """The warehouse holds no trial, or no suite, of that name."""


def _warehouse(connection: duckdb.DuckDBPyConnection) -> str | None:
    found = connection.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return found[0] if found and found[0] else None


def _rows(connection: duckdb.DuckDBPyConnection, sql: str, parameters: Sequence[Any]) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, list(parameters))
    names = [description[0] for description in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _trial_rows(connection: duckdb.DuckDBPyConnection, model: str, trial_id: str,
                order: str | None = None) -> list[dict[str, Any]] | None:
    """``model``'s rows of the trial; None when the warehouse has no such table yet."""
    if not has_table(connection, model):
        return None
    ordering = f" ORDER BY {order}" if order else ""
    return _rows(connection, f'SELECT * FROM "{model}" WHERE trial_id = ?{ordering}', [trial_id])


def _only(row: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """The row's figures among ``columns``, in that order: a model that gained or lost a column still reports."""
    return {column: row[column] for column in columns if column in row}


def _not_built(model: str) -> Html:
    return note(f"The warehouse has no {model} table yet: substrate-bench rebuild builds every model.")


def wake_samples(connection: duckdb.DuckDBPyConnection, trial_id: str) -> npt.NDArray[np.float64]:
    """The trial's exact wake latencies, of the requests wake_latency_distribution's main figures count: every
    WakeFirstTouch Locust counted (or whose count is unknown), failed or not."""
    return pooled_wakes(connection, (trial_id,))


def _trial_row(connection: duckdb.DuckDBPyConnection, trial_id: str) -> dict[str, Any]:
    for source in ("trials", "trial_manifests"):
        rows = _trial_rows(connection, source, trial_id)
        if rows:
            return rows[0]
    raise NotInWarehouse(f"no trial {trial_id!r} in the warehouse {_warehouse(connection) or ''}".rstrip())


def _headline(connection: duckdb.DuckDBPyConnection, trial: dict[str, Any]) -> Html:
    """The wake-latency distribution across the top; what ran, the density frontier and the SLO capacity beside
    each other below it."""
    trial_id = trial["trial_id"]
    parts: list[Html] = []
    if trial.get("disturbed"):
        parts.append(warning(f"Disturbed: the machine was busy with other work while this trial measured "
                             f"({trial.get('disturbed_because') or 'over the suite’s limits'}). Its figures carry "
                             "that work's load: it is left out of noise estimates and verdicts."))
    parts.append(heading("Wake latency (ms)"))
    distribution = _trial_rows(connection, "wake_latency_distribution", trial_id)
    if distribution is None:
        parts.append(_not_built("wake_latency_distribution"))
    elif not distribution:
        parts.append(note("No wake-latency row: no session of this trial ever started."))
    else:
        parts.append(table([_only(distribution[0], DISTRIBUTION_COLUMNS)]))
    frontier = _trial_rows(connection, "density_frontiers", trial_id)
    capacity = _trial_rows(connection, "slo_capacity", trial_id)
    blocks = [Html(heading("Trial") + key_values(_only(trial, TRIAL_COLUMNS)))]
    if frontier is None:
        blocks.append(Html(heading("Density frontier") + _not_built("density_frontiers")))
    elif not frontier:
        blocks.append(Html(heading("Density frontier") + note("No density frontier: no session ever started.")))
    else:
        blocks.append(Html(heading("Density frontier") + key_values(_only(frontier[0], FRONTIER_COLUMNS))))
    if capacity is None:
        blocks.append(Html(heading("SLO capacity and knee") + _not_built("slo_capacity")))
    elif not capacity:
        blocks.append(Html(heading("SLO capacity and knee") + note("No slo_capacity row for this trial.")))
    else:
        blocks.append(Html(heading("SLO capacity and knee") + key_values(_only(capacity[0], CAPACITY_COLUMNS))))
    parts.append(side_by_side(blocks))
    return section("Headline figures", parts)


def _cdf_section(connection: duckdb.DuckDBPyConnection, trial_id: str) -> Html:
    samples = wake_samples(connection, trial_id) if has_table(connection, "request_samples") else np.empty(0)
    if not samples.size:
        return section("Wake latency CDF", [note("No wake samples to draw.")])
    drawn = plots.latency_cdf({trial_id: samples}, "wake latency CDF")
    return section("Wake latency CDF", [chart(plots.svg(drawn), "Every wake Locust counted, failed or "
                                                                "not; p50 and p99 are floor-index percentiles of the "
                                                                "exact samples.")])


def ladder_chart(connection: duckdb.DuckDBPyConnection, trial_id: str,
                 points: list[dict[str, Any]] | None = None) -> alt.TopLevelMixin | None:
    """A trial's load points against its SLO, knee and capacity; None for a trial of fewer than two points."""
    points = _trial_rows(connection, "load_points", trial_id, order="step") if points is None else points
    if not points or len(points) < 2:
        return None
    capacity = (_trial_rows(connection, "slo_capacity", trial_id) or [{}])[0]
    return plots.load_points_chart(pl.DataFrame(points, infer_schema_length=None), capacity.get("slo_wake_p99_ms"),
                                   capacity.get("knee_users"), capacity.get("capacity_users"),
                                   title="wake p99 by load point")


def _load_points_section(connection: duckdb.DuckDBPyConnection, trial_id: str) -> Html:
    points = _trial_rows(connection, "load_points", trial_id, order="step")
    if points is None:
        return section("Load points", [_not_built("load_points")])
    if not points:
        return section("Load points", [note("No load points: no session started, or no step's start was "
                                            "recorded.")])
    rows = table([_only(point, LOAD_POINT_COLUMNS) for point in points])
    drawn = ladder_chart(connection, trial_id, points)
    if drawn is None:
        return section("Load points", [paragraph("One load point (a flat trial): no ladder to draw."), rows])
    return section("Load points", [chart(plots.svg(drawn), "Each ladder step over its steady window; a hollow point "
                                                           "was cut short and is not judged."), rows])


def _steps_section(connection: duckdb.DuckDBPyConnection, trial_id: str) -> Html:
    rows = _trial_rows(connection, "step_latency", trial_id, order="step")
    if rows is None:
        return section("Step latency (ms)", [_not_built("step_latency")])
    if not rows:
        return section("Step latency (ms)", [note("No Step_ requests in this trial.")])
    return section("Step latency (ms)", [
        paragraph("The time of each step's ops (no think, no wake); percentiles of the successful requests."),
        table([_only(row, STEP_COLUMNS) for row in rows])])


def trial_report(connection: duckdb.DuckDBPyConnection, trial_id: str, *,
                 generated_at: datetime | None = None, navigation: Sequence[Link] = ()) -> str:
    """One trial's page: its headline figures (the wake-latency distribution; what ran, the density frontier and
    the SLO capacity and knee), the wake-latency CDF, its load points (charted when there is more than one) and its
    step latencies. NotInWarehouse when the warehouse has no such trial."""
    trial = _trial_row(connection, trial_id)
    subtitle = " · ".join([*(str(trial[key]) for key in ("suite", "status", "sut_version") if trial.get(key)),
                           *(["disturbed"] if trial.get("disturbed") else [])])
    drift = drift_section(connection, trial_id)
    sections = [
        _headline(connection, trial),
        _cdf_section(connection, trial_id),
        *([drift] if drift is not None else []),
        _load_points_section(connection, trial_id),
        _steps_section(connection, trial_id),
    ]
    return page(f"Trial {trial_id}", sections, subtitle=subtitle or None, warehouse=_warehouse(connection),
                generated_at=generated_at, navigation=navigation)


def _suite_known(connection: duckdb.DuckDBPyConnection, suite: str) -> bool:
    def rows_of(source: str) -> int:
        counted = connection.execute(f"SELECT count(*) FROM {source} WHERE suite = ?", [suite]).fetchone()
        assert counted is not None  # a count is one row
        return int(counted[0])

    return any(has_table(connection, source) and rows_of(source) for source in ("trial_manifests", "metric_history"))


def _frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> pl.DataFrame:
    return pl.DataFrame([_only(row, columns) for row in rows], infer_schema_length=None)


def _latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration and metric: its trials and the latest trial's figure."""
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    counts: dict[tuple[Any, Any], int] = {}
    for row in rows:
        key = (row.get("configuration"), row.get("metric"))
        counts[key] = counts.get(key, 0) + 1
        if key not in latest or (row.get("trial_number") or 0) >= (latest[key].get("trial_number") or 0):
            latest[key] = row
    return [{"configuration": key[0], "metric": key[1], "trials": counts[key], "latest_trial_id": row.get("trial_id"),
             "sut_version": row.get("sut_version"), "value": row.get("value"), "unit": row.get("unit"),
             "better": row.get("better")} for key, row in latest.items()]


def _history_chart(suite: str, history: list[dict[str, Any]], changes: list[dict[str, Any]] | None,
                   noise: list[dict[str, Any]] | None) -> alt.TopLevelMixin:
    change_frame = _frame(changes, CHANGE_POINT_COLUMNS) if changes else pl.DataFrame()
    noise_frame = _frame(noise, NOISE_FLOOR_COLUMNS) if noise else None
    return plots.history_chart(_frame(history, HISTORY_COLUMNS), change_frame, title=suite, noise_floor=noise_frame)


def _noise_floor(connection: duckdb.DuckDBPyConnection, suite: str) -> list[dict[str, Any]] | None:
    """The suite's rows of noise_floor; None when the warehouse has no such table yet."""
    if not has_table(connection, "noise_floor"):
        return None
    return _rows(connection, "SELECT * FROM noise_floor WHERE suite = ? ORDER BY configuration, metric", [suite])


def history_chart(connection: duckdb.DuckDBPyConnection, suite: str) -> alt.TopLevelMixin | None:
    """A suite's history with its change points and noise floors; None when metric_history has no figures of it."""
    if not has_table(connection, "metric_history"):
        return None
    history = _rows(connection, "SELECT * FROM metric_history WHERE suite = ? ORDER BY metric, configuration, "
                                "trial_number", [suite])
    if not history:
        return None
    changes = _rows(connection, "SELECT * FROM change_points WHERE suite = ? ORDER BY started_at, configuration, "
                                "metric", [suite]) if has_table(connection, "change_points") else None
    return _history_chart(suite, history, changes, _noise_floor(connection, suite))


def history_report(connection: duckdb.DuckDBPyConnection, suite: str, *, generated_at: datetime | None = None) -> str:
    """One suite's page: its figures trial by trial, one panel per metric with its change points, the change points
    as a table and each configuration's latest figures. A note when the warehouse has no metric_history or
    change_points table yet, or the suite no figures in them; NotInWarehouse when the warehouse knows no trial of
    the suite."""
    warehouse = _warehouse(connection)
    if not _suite_known(connection, suite):
        raise NotInWarehouse(f"no trials of suite {suite!r} in the warehouse {warehouse or ''}".rstrip())
    parts: list[Html] = []
    history: list[dict[str, Any]] = []
    if not has_table(connection, "metric_history"):
        parts.append(_not_built("metric_history"))
    else:
        history = _rows(connection, "SELECT * FROM metric_history WHERE suite = ? "
                                    "ORDER BY metric, configuration, trial_number", [suite])
        if not history:
            parts.append(note(f"The suite {suite} has no trials with figures in metric_history yet."))
    changes: list[dict[str, Any]] | None = None
    if has_table(connection, "change_points"):
        changes = _rows(connection, "SELECT * FROM change_points WHERE suite = ? "
                                    "ORDER BY started_at, configuration, metric", [suite])
    noise = _noise_floor(connection, suite)
    if history:
        parts.append(chart(plots.svg(_history_chart(suite, history, changes, noise)),
                           "x: the trial's start (UTC). Shaded: each configuration's noise floor, "
                           "one trial-to-trial spread either side of its level, over the trials it was measured "
                           "from. Vertical rules: change points (red regressed, green improved); dashed: the means "
                           "before and after each."))
    sections = [section("History", parts)]
    if noise is None:
        sections.append(section("Noise floor", [_not_built("noise_floor")]))
    elif noise:
        sections.append(section("Noise floor", [
            paragraph("How much each figure moves from one trial of a configuration to the next, over its trials "
                      "since the latest change point (at most 20): the spread a new trial's change is judged "
                      "against. On the ratio scale, noise is the standard deviation of the logarithms (a coefficient "
                      "of variation); robust_noise is 1.4826 x MAD / median."),
            table([_only(row, NOISE_FLOOR_COLUMNS) for row in noise])]))
    if changes is None:
        sections.append(section("Change points", [_not_built("change_points")]))
    elif not changes:
        sections.append(section("Change points", [note(
            "No change points in this suite's history (a series is analysed from "
            f"{DEFAULT_PARAMETERS.min_trials} trials, and a change is reported once "
            f"{DEFAULT_PARAMETERS.min_segment} trials at the new level confirm it).")]))
    else:
        sections.append(section("Change points", [table([_only(row, CHANGE_POINT_COLUMNS) for row in changes])]))
    if history:
        sections.append(section("Latest figures", [table(_latest(history))]))
    return page(f"Suite {suite}: history", sections, warehouse=warehouse, generated_at=generated_at)


def comparison_report(title: str, baseline_label: str, candidate_label: str, rows: list[dict[str, Any]],
                      samples: dict[str, npt.NDArray[np.float64]], *, warehouse: str | None = None,
                      generated_at: datetime | None = None, notes: Sequence[str] = (),
                      navigation: Sequence[Link] = ()) -> str:
    """A comparison's page: its rows as a table (every key given, in order) and the CDFs of the sample sets
    overlaid, baseline first and candidate second whatever order ``samples`` has."""
    ordered = {label: samples[label] for label in (baseline_label, candidate_label) if label in samples}
    ordered.update({label: values for label, values in samples.items() if label not in ordered})
    parts: list[Html] = [table(rows) if rows else note("No comparison rows."), *(paragraph(line) for line in notes)]
    sections = [section("Comparison", parts)]
    if any(np.asarray(values).size for values in ordered.values()):
        drawn = plots.latency_cdf(ordered, "wake latency CDF: baseline and candidate")
        sections.append(section("Wake latency", [chart(plots.svg(drawn), "Exact samples of each side; p50 and p99 "
                                                                        "are floor-index percentiles.")]))
    else:
        sections.append(section("Wake latency", [note("No samples to draw.")]))
    return page(title, sections, subtitle=f"baseline {baseline_label} · candidate {candidate_label}",
                warehouse=warehouse, generated_at=generated_at, navigation=navigation)


def compared_page(connection: duckdb.DuckDBPyConnection, comparison: Comparison, source: str, *,
                  warehouse: str | None = None, generated_at: datetime | None = None,
                  navigation: Sequence[Link] = ()) -> str:
    """The page of ``substrate-bench compare``'s comparison: its figures as the command prints them, the verdict
    line, what differs between the sides, and both sides' wake CDFs overlaid."""
    # "null" is the terminal's word for not measured; a page shows a dash, as its other tables do.
    rows = [{column: None if cell == "null" else cell for column, cell in zip(SHOWN_COLUMNS, shown_row(row),
                                                                               strict=True)}
            for row in comparison.figures]
    sides = (comparison.baseline, comparison.candidate)
    samples = {side.label: pooled_wakes(connection, side.trial_ids) for side in sides}
    advice = settling_advice(comparison)
    notes = [COLUMN_LEGEND, summary(comparison, source),
             *([f"History (the noise's other measurements): {comparison.history}"] if comparison.history else []),
             *(f"{row.figure} is inconclusive: {why_text(row)}" for row in comparison.figures
               if row.verdict == "inconclusive" and why_text(row)),
             *([f"To settle: {advice}"] if advice else []),
             *(f"configuration differs: {line}" for line in comparison.differences),
             *(f"Note: {line}" for line in comparison_notes(comparison))]
    return comparison_report(f"{comparison.candidate.label} against {comparison.baseline.label}",
                             comparison.baseline.label, comparison.candidate.label, rows, samples,
                             warehouse=warehouse, generated_at=generated_at, notes=notes, navigation=navigation)
