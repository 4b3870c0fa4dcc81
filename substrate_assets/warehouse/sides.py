"""The sides of a comparison, from the warehouse: a trial (its id), a group of repeated trials (its group id: ``run
--repeat``, ``ab``), or the trials of a suite whose run tag or version of the system under test is the given value (a
version may be given by a prefix of at least 7 characters, as git abbreviates commits), optionally only its ``last``
most recent.

**Disturbed trials are left out** (``trial_manifests.disturbed``: the machine was busy with other work while they
ran), and named in the side's ``left_out``; ``include_disturbed`` keeps them. A side left with no trial is refused,
saying why.

**Rounds.** The two groups of one ``ab`` run (``<suite A>-<time>-a<N>`` and ``<suite B>-<time>-b<N>``, run
alternately) are rounds: the i-th trial of each, in time order, shared the machine's moment. With as many trials
kept on each side, they are analysed as pairs (:func:`rounds`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import duckdb

from substrate_assets.analysis.comparison import Side
from substrate_assets.analysis.verdicts import Pairs

MIN_VERSION_PREFIX = 7
# An ab run's two groups: each its suite's name, then the run's start and the side (a or b) with its rounds.
_AB_GROUP = re.compile(r"-(?P<run>\d{8}t\d{6}z)-(?P<role>[ab])(?P<trials>\d+)$")


class SideNotFound(LookupError):
    """A side that selects no trial; the message says what was looked for and what there is."""


class AllDisturbed(SideNotFound):
    """A side whose every trial is disturbed: the machine was too busy with other work to judge it."""


def _values(connection: duckdb.DuckDBPyConnection, sql: str, parameters: Sequence[object]) -> list[object]:
    return [row[0] for row in connection.execute(sql, list(parameters)).fetchall()]


def trials_text(count: int) -> str:
    return f"{count} {'trial' if count == 1 else 'trials'}"


def disturbed_trials(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str]) -> dict[str, str]:
    """The disturbed ones among ``trial_ids``, each with why."""
    return {str(trial_id): str(because or "the machine was busy") for trial_id, because in connection.execute(
        "SELECT trial_id, disturbed_because FROM trial_manifests WHERE list_contains(?::VARCHAR[], trial_id) "
        "AND disturbed", [list(trial_ids)]).fetchall()}


def _keep(connection: duckdb.DuckDBPyConnection, label: str, trial_ids: Sequence[str], include_disturbed: bool,
          what: str, group: str | None = None) -> Side:
    disturbed = {} if include_disturbed else disturbed_trials(connection, trial_ids)
    kept = tuple(trial for trial in trial_ids if trial not in disturbed)
    left_out = tuple(f"{trial} (disturbed: {because})" for trial, because in disturbed.items())
    if not kept:
        raise AllDisturbed(f"{what}: every trial is disturbed — the machine was busy with other work while it ran "
                           f"({'; '.join(left_out)}); it is left out of verdicts, so the machine was too busy to judge "
                           "it (--include-disturbed judges it anyway)")
    if len(kept) < len(trial_ids):
        label = f"{label.rsplit(' (', 1)[0]} ({trials_text(len(kept))}, {len(left_out)} disturbed left out)"
    return Side(label, kept, left_out, group)


def select_side(connection: duckdb.DuckDBPyConnection, spec: str, suite: str | None = None,
                last: int | None = None, include_disturbed: bool = False) -> Side:
    """The trials ``spec`` names: a trial id or a group id, or with ``suite`` the suite's trials whose tag or
    system-under-test version is ``spec`` (most recent ``last`` of them when given); disturbed ones left out unless
    ``include_disturbed``."""
    if suite is None:
        if _values(connection, "SELECT trial_id FROM trial_manifests WHERE trial_id = ?", [spec]):
            return _keep(connection, spec, (spec,), include_disturbed, f"trial {spec}")
        grouped = _values(connection, "SELECT trial_id FROM trial_manifests WHERE group_id = ? "
                          "ORDER BY started_at NULLS LAST, trial_id", [spec])
        if grouped:
            chosen = tuple(map(str, grouped))
            side = _keep(connection, f"group {spec} ({trials_text(len(chosen))})", chosen, include_disturbed,
                         f"group {spec}", spec)
            if last and len(side.trial_ids) > last:
                return Side(f"group {spec} (last {trials_text(last)})", side.trial_ids[-last:], side.left_out, spec)
            return side
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
    side = _keep(connection, f"{suite}@{spec} ({trials_text(len(trial_ids))})", tuple(map(str, trial_ids)),
                 include_disturbed, f"suite {suite}@{spec}")
    if last and len(side.trial_ids) > last:
        return Side(f"{suite}@{spec} (last {trials_text(last)})", side.trial_ids[:last], side.left_out)
    return side


def rounds(baseline: Side, candidate: Side) -> Pairs | None:
    """The rounds of two sides that are the groups of one ``ab`` run with as many trials each (in time order): the
    i-th of each ran back to back. None otherwise."""
    found = [match for side in (baseline, candidate) if (match := _AB_GROUP.search(side.group or ""))]
    if len(found) != 2 or found[0]["run"] != found[1]["run"] or {found[0]["role"], found[1]["role"]} != {"a", "b"}:
        return None
    if len(baseline.trial_ids) != len(candidate.trial_ids):
        return None
    return tuple((index, index) for index in range(len(baseline.trial_ids)))


def judged_with_its_group(connection: duckdb.DuckDBPyConnection, trial_id: str) -> Side:
    """What a verdict on ``trial_id`` judges: the trial's group when it ran in one (a group is judged whole, and its
    other trials are no history of it), else the trial; AllDisturbed when the trial itself is disturbed (it is judged
    in no side)."""
    alone = select_side(connection, trial_id)
    group = _values(connection, "SELECT group_id FROM trial_manifests WHERE trial_id = ?", [trial_id])
    if not group or group[0] is None:
        return alone
    return select_side(connection, str(group[0]))
