"""What the main job prints once its trials are in, read back from the warehouse: a trial's mart rows (and a
ladder's load points and capacity), a group's trials, the verdict against history, where the site is, and where the
job's seconds went."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from substrate_assets.cli.output import print_rows, shown
from substrate_assets.cli.warehouse_choice import chosen_warehouse

if TYPE_CHECKING:  # imported where a verdict is shown: the CLI's other commands do not pay for it
    from substrate_assets.analysis.comparison import Comparison


def show_trial(console: Console, trial_id: str) -> None:
    """The trial's density-frontier and wake-latency rows, read back from the warehouse, one figure per line."""
    from substrate_assets.warehouse.query import query

    for table in ("density_frontiers", "wake_latency_distribution"):
        result = query(chosen_warehouse(), f"SELECT * FROM {table} WHERE trial_id = ?", [trial_id])
        if not result.rows:
            console.print(f"{table}: no row for {trial_id}", highlight=False)
            continue
        columns, row = result.columns[1:], result.rows[0][1:]
        values = dict(zip(columns, row, strict=True))
        if table == "wake_latency_distribution" and values.get("n_failed") == 0:
            # No wake failed: the successful wakes' twins (ok_*) repeat every figure.
            kept = [index for index, column in enumerate(columns) if not column.startswith("ok_")]
            columns, row = [columns[index] for index in kept], tuple(row[index] for index in kept)
        print_one_row(console, f"{table} ({trial_id})", columns, row)
    show_capacity(console, trial_id)


def show_verdict(console: Console, candidate: str, figures: tuple[str, ...] = (),
                 judged: Comparison | None = None) -> None:
    """The trial or group ``candidate`` judged against its configuration's history, as trial_run's check judges a
    trial (``figures``, from ``--figure``, as the primary ones): the verdict line, the figures that regressed or that
    the data cannot judge, and what would settle them. ``judged``: that comparison, when the job's load judged
    ``candidate`` already by the suite's own thresholds (never with ``figures``)."""
    from substrate_assets.cli.compare import thresholds_of
    from substrate_assets.report.verdict_text import SHOWN_COLUMNS, notes, settling_advice, shown_row, summary
    from substrate_assets.warehouse.compare_figures import FigureNotRecorded
    from substrate_assets.warehouse.compare_trials import judge_against_history, suite_of
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.sides import SideNotFound, select_side

    with connect(chosen_warehouse(), read_only=True) as connection:
        try:
            side = select_side(connection, candidate)
        except SideNotFound as error:
            console.print(f"verdict: none, {error}", style="yellow", highlight=False)
            return
        thresholds, source = thresholds_of(suite_of(connection, side), figures)
        try:
            comparison = judged if judged is not None and not figures else \
                judge_against_history(connection, side, thresholds)
        except FigureNotRecorded as error:
            console.print(f"verdict: none, {error}", style="yellow", highlight=False)
            return
    if comparison is None:
        console.print("verdict: none yet, no earlier trial of this suite and configuration to judge against",
                      highlight=False)
        return
    shown = [row for row in comparison.figures if row.verdict in ("regressed", "inconclusive")]
    if shown:
        print_rows(console, f"{candidate} against {comparison.baseline.label}", SHOWN_COLUMNS,
                   [tuple(shown_row(row)) for row in shown])
    console.print(f"verdict against {comparison.baseline.label}: {summary(comparison, source)}", highlight=False)
    for warning in notes(comparison):
        console.print(f"note: {warning}", style="yellow", highlight=False)
    advice = settling_advice(comparison)
    if advice:
        console.print(f"to settle: {advice}", highlight=False)


def print_one_row(console: Console, title: str, columns: list[str], row: tuple[Any, ...]) -> None:
    """One row as a column/value table: a mart's row is far wider than a terminal."""
    print_rows(console, title, ["column", "value"], [(column, shown(value, column))
                                                     for column, value in zip(columns, row, strict=True)])


LOAD_POINT_COLUMNS = ("step", "target_users", "users", "actors_per_node", "actors_per_vcpu", "actors_per_gb_ram",
                      "window_s", "wake_n", "wake_p50_ms", "wake_p90_ms", "wake_p99_ms", "wake_max_ms", "requests",
                      "failure_ratio")
CAPACITY_COLUMNS = ("slo_wake_p99_ms", "slo_failure_ratio", "capacity_step", "capacity_users",
                    "capacity_actors_per_node", "capacity_actors_per_vcpu", "capacity_actors_per_gb_ram",
                    "capacity_wake_p99_ms", "capacity_null_because", "knee_step", "knee_users", "knee_wake_p99_ms",
                    "knee_failure_ratio", "broken_by", "knee_null_because", "met_above_knee")


def show_capacity(console: Console, trial_id: str) -> None:
    """A ladder trial's load points, and the capacity under its suite's SLO when it sets one."""
    from substrate_assets.warehouse.query import query

    points = query(chosen_warehouse(), f"SELECT {', '.join(LOAD_POINT_COLUMNS)} FROM load_points WHERE trial_id = ? "
                                     "ORDER BY step", [trial_id])
    capacity = query(chosen_warehouse(), f"SELECT {', '.join(CAPACITY_COLUMNS)} FROM slo_capacity WHERE trial_id = ?",
                     [trial_id])
    has_slo = bool(capacity.rows) and (capacity.rows[0][0] is not None or capacity.rows[0][1] is not None)
    if len(points.rows) > 1 or has_slo:
        print_rows(console, f"load_points ({trial_id})", list(points.columns), points.rows)
    if has_slo:
        print_one_row(console, f"slo_capacity ({trial_id})", capacity.columns, capacity.rows[0])


def show_group(console: Console, group: str, trial_ids: tuple[str, ...]) -> None:
    """Each trial of a group in one line: its wakes and their p50 and p99, and its failure ratio."""
    from substrate_assets.warehouse.query import query

    figures = query(chosen_warehouse(), """
        SELECT w.trial_id, w.n_wakes AS wake_n, w.gmean_ms, w.p50_ms, w.p99_ms, w.slow_share,
               d.aggregate_failure_ratio AS failure_ratio, m.foreign_cpu_share, m.disturbed
        FROM wake_latency_distribution AS w LEFT JOIN density_frontiers AS d USING (trial_id)
        LEFT JOIN trial_manifests AS m USING (trial_id)
        WHERE list_contains(?::VARCHAR[], w.trial_id) ORDER BY w.trial_id""", [list(trial_ids)])
    print_rows(console, f"group {group} ({len(trial_ids)} trials)", list(figures.columns), figures.rows)


def dead_time_line(instance: Any, loads: Sequence[Any]) -> str:
    """Where this job's seconds went outside its trials' load, from its process's start until now; a line saying
    why not when its records do not tell (the job's own outcome and exit code stand either way)."""
    from substrate_assets.app.dead_time import measure_dead_time, process_started

    try:
        return measure_dead_time(instance, process_started(), loads, time.time()).line()
    except Exception as error:  # a figure about the job must never end it
        return f"dead time: not measured ({type(error).__name__}: {error})"


def show_site(console: Console) -> None:
    """Where the benchmark site the job built again is: its landing page, to open."""
    from substrate_assets.project import site_directory

    index = site_directory() / "index.html"
    if index.is_file():
        console.print(f"benchmark site: {index} (substrate-bench site --serve serves it)", highlight=False)
