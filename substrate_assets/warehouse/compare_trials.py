"""Two sets of trials from the warehouse, compared figure by figure (:mod:`substrate_assets.analysis.verdicts`),
with the history of the baseline's configuration as more measurements of the noise.

The sides come from :mod:`~substrate_assets.warehouse.sides` (disturbed trials left out), their figures from
:mod:`~substrate_assets.warehouse.compare_figures`. The two groups of one ``ab`` run are analysed as rounds.

**History.** The trials of a configuration (``capacity_history``'s suite and configuration) since its latest change
point, at most the last :data:`~noise.HISTORY_WINDOW`, completed and not disturbed: the window its noise floor is
measured over (``noise_floor``). A comparison of two sides takes the window of the baseline's configuration, less the
sides' own trials, as more measurements of the noise; judging a new trial or group *against history* takes the
window of its configuration before its first trial as the baseline itself. A history whose primary figure drifted
(:mod:`~substrate_assets.analysis.moments`) makes groups run at different moments differ on their own: the
comparison counts that in the figure's error, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from substrate_assets.analysis.comparison import Comparison, Side
from substrate_assets.analysis.noise import HISTORY_WINDOW
from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.analysis.verdicts import judge
from substrate_assets.warehouse.compare_figures import measured_figures
from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.sides import SideNotFound, rounds, trials_text

# What a side ran, from capacity_history: a difference is printed beside the figures, as it may explain them.
CONFIGURATION_COLUMNS = ("suite", "script_sha256", "sandbox_class", "lifecycle_mode", "actor_memory", "sut_version",
                         "machine_type", "think_scale", "ladder", "node_count", "users", "actors_per_user",
                         "duration_s", "inject_wake_delay_ms")


def _values(connection: duckdb.DuckDBPyConnection, sql: str, parameters: Sequence[object]) -> list[Any]:
    return [row[0] for row in connection.execute(sql, list(parameters)).fetchall()]


@dataclass(frozen=True)
class History:
    """The earlier trials a comparison measures its noise with, and how to say what they are."""

    trial_ids: tuple[str, ...]
    description: str


def suite_of(connection: duckdb.DuckDBPyConnection, side: Side) -> str | None:
    """The suite a side's (first) trial ran: whose thresholds judge it as a candidate."""
    suite = _values(connection, "SELECT any_value(suite) FROM trial_manifests WHERE trial_id = ?",
                    [side.trial_ids[0]])[0]
    assert suite is None or isinstance(suite, str)  # trial_manifests.suite is VARCHAR
    return suite


def configuration_differences(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> list[str]:
    """``column: baseline values → candidate values`` for each configuration column the sides differ in."""
    rows = connection.execute(
        f"SELECT trial_id, {', '.join(CONFIGURATION_COLUMNS)} FROM capacity_history "
        "WHERE trial_id IN (SELECT unnest(?))", [[*baseline.trial_ids, *candidate.trial_ids]]).fetchall()
    differences = []
    for index, column in enumerate(CONFIGURATION_COLUMNS, start=1):
        sides = [sorted({_shown(row[index]) for row in rows if row[0] in side.trial_ids})
                 for side in (baseline, candidate)]
        if sides[0] != sides[1]:
            differences.append(f"{column}: {', '.join(sides[0]) or 'not known'} → {', '.join(sides[1]) or 'not known'}")
    return differences


def _shown(value: object) -> str:
    """A configuration value as a difference line shows it: null is not recorded; an empty mode is the family's own
    default (suspend, and its resume)."""
    if value is None:
        return "null"
    return "the family's default" if value == "" else str(value)


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
    """The configuration's trials in metric_history (those that ran to their end, not disturbed) since its latest
    change point
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
    return History(chosen, f"{trials_text(len(chosen))} of suite {suite}'s configuration {configuration}{point}")


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
    measured = measured_figures(connection, baseline, candidate, history.trial_ids, thresholds.primary,
                                thresholds.requested())
    pairs = rounds(baseline, candidate)
    figures = judge(measured, thresholds, pairs)
    warnings = [f"left out of the {role}: {line}" for role, side in (("baseline", baseline), ("candidate", candidate))
                for line in side.left_out]
    warnings += kept_disturbed(connection, baseline, candidate)
    named = {row.figure for row in measured}
    warnings += [f"the suite's primary figure {name!r} is not one of this comparison's figures: nothing of it was "
                 "judged, and its share of the false-alarm budget went to the others"
                 for name in thresholds.primary or () if name not in named]
    return Comparison(baseline, candidate, thresholds, figures,
                      [*configuration_differences(connection, baseline, candidate),
                       *unfinished(connection, baseline, candidate)], history.description,
                      len(pairs) if pairs else 0, warnings)


def kept_disturbed(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> list[str]:
    """A line for each disturbed trial a side holds (kept with --include-disturbed)."""
    rows = connection.execute("SELECT trial_id, disturbed_because FROM trial_manifests WHERE "
                              "list_contains(?::VARCHAR[], trial_id) AND disturbed ORDER BY trial_id",
                              [[*baseline.trial_ids, *candidate.trial_ids]]).fetchall()
    return [f"trial {trial_id} is disturbed ({because}), kept as asked: its figures carry other work's load"
            for trial_id, because in rows]


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
