"""The benchmark site: static pages built from the warehouse, read offline from their files or served on 127.0.0.1
(:mod:`.site_server`).

- ``index.html``: the latest verdict of each suite and configuration — its newest trial judged against the history
  before it, as the Dagster check ``no_regression_against_history`` judges it (primary figures: change, interval,
  verdict) — and the suites.
- ``suites/<suite>.html``: the suite's primary figures through time (:mod:`.primary_chart`: noise bands, change
  points, groups, disturbed trials marked), its change points, its trials, and every headline metric's history.
- ``trials/<trial>.html``: a trial's report (:func:`~.pages.trial_report`).
- ``comparisons/<suite>--<configuration>.html``: a configuration's latest verdict in full
  (:func:`~.pages.compared_page`).

Every page links only to pages of the site, by relative paths: the directory can be moved, copied or served
anywhere. File names are made from trial ids and suite names (other people's text, through ``import``) by
:func:`page_name`, which can name nothing outside its folder. The site is built beside its directory and swapped in
whole: a reader sees the old site or the new one, never half of one. A directory that is not a site this built
(no :data:`SITE_MARK` in it) is never replaced.

A page is rendered again only when something it shows changed: :data:`SITE_MARK` records each page's fingerprint,
and a page whose fingerprint is unchanged is carried over from the site it replaces. A trial page's fingerprint is a
digest of the trial's rows in the tables it reads and of this package's code; a suite page's (and its comparisons')
one of its trials' fingerprints and places in their configurations and of the suite's thresholds. The landing page,
which reads every suite, is rendered every time.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.analysis.comparison import Comparison
from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.cache import files_digest
from substrate_assets.report import plots
from substrate_assets.report.html import Link, chart, note, page, paragraph, section, table
from substrate_assets.report.pages import compared_page, history_chart, trial_report
from substrate_assets.report.primary_chart import kind, primary_history_chart
from substrate_assets.report.site_files import SITE_MARK, PageSet, SitePages, swap_in, write_page
from substrate_assets.report.verdict_text import change_text, interval_text
from substrate_assets.warehouse.compare_trials import judge_against_history
from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.primary_history import SuiteHistory, suite_history
from substrate_assets.warehouse.sides import AllDisturbed, judged_with_its_group

# The tables a trial's page reads, by trial (its CDF reads request_samples, whose figures wake_latency_distribution
# holds: a change in its samples changes them).
TRIAL_PAGE_READS = ("trial_manifests", "trials", "wake_latency_distribution", "density_frontiers", "slo_capacity",
                    "load_points", "step_latency", "wake_latency_windows")
INDEX = "index.html"
# How a configuration (a digest of what ran) is shown: enough of it to tell two apart.
CONFIGURATION_SHOWN = 10

DIGESTED = re.compile(r"-[0-9a-f]{10}$")

ThresholdsOf = Callable[[str | None], tuple[Thresholds, str]]


class NotASite(RuntimeError):
    """The directory asked for holds something other than a site built here: it is not replaced."""


def page_name(value: str) -> str:
    """A trial id or suite name as a file name: letters, digits, ``.``, ``_`` and ``-`` kept, anything else
    replaced; a name changed so (or too long), or one that already ends as such a digest does, gains a digest of
    the original, so two names never share a page."""
    kept = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("._-")[:120]
    if kept == value and kept and not DIGESTED.search(kept):
        return kept
    return f"{kept or 'unnamed'}-{hashlib.sha256(value.encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class LatestVerdict:
    """A configuration of a suite: its trials and its newest trial that is not disturbed (``latest_trial``), judged
    against the history before it (``comparison``; None when there is none, ``why`` says so); ``disturbed_after``
    counts the disturbed trials newer than it, which are never judged."""

    suite: str
    configuration: str
    trials: int
    latest_trial: str
    started_at: datetime | None
    sut_version: str | None
    comparison: Comparison | None
    source: str
    why: str | None
    completed: bool | None = None
    disturbed_after: int = 0

    @property
    def page(self) -> str:
        return f"comparisons/{page_name(self.suite)}--{page_name(self.configuration)}.html"


@dataclass(frozen=True)
class BuiltSite:
    directory: Path
    suites: int
    trials: int
    comparisons: int
    seconds: float
    # Trial pages carried over unchanged from the site this one replaced.
    trials_kept: int = 0
    # Each configuration's latest verdict, as the index shows it.
    verdicts: tuple[LatestVerdict, ...] = ()

    def judged(self, trial_id: str) -> Comparison | None:
        """The comparison this build judged ``trial_id`` by, when it is a configuration's latest judged trial."""
        return next((latest.comparison for latest in self.verdicts if latest.latest_trial == trial_id), None)

    @property
    def index(self) -> Path:
        return self.directory / INDEX

    @property
    def pages(self) -> int:
        return 1 + self.suites + self.trials + self.comparisons


def _latest(connection: duckdb.DuckDBPyConnection, thresholds_of: ThresholdsOf) -> list[LatestVerdict]:
    rows = connection.execute("""
        WITH trials AS (
            SELECT h.suite, h.configuration, h.trial_id, h.trial_number, h.started_at, h.sut_version, t.completed,
                   coalesce(t.disturbed, false) AS disturbed
            FROM capacity_history AS h JOIN trial_manifests AS t USING (trial_id) WHERE h.suite IS NOT NULL
        ),
        configurations AS (
            SELECT suite, configuration, count(*) AS trials, max(trial_number) AS newest,
                   max(trial_number) FILTER (WHERE NOT disturbed) AS judged
            FROM trials GROUP BY ALL
        )
        -- Each configuration's trial to show: its newest judged one, else (every trial disturbed) its newest.
        SELECT c.suite, c.configuration, c.trials, t.trial_id, t.started_at, t.sut_version,
               CASE WHEN c.judged IS NOT NULL THEN t.completed END,
               (SELECT count(*) FROM trials AS d WHERE d.suite = c.suite AND d.configuration = c.configuration
                  AND d.disturbed AND d.trial_number > coalesce(c.judged, 0)),
               c.judged IS NULL
        FROM configurations AS c
        JOIN trials AS t ON t.suite = c.suite AND t.configuration = c.configuration
         AND t.trial_number = coalesce(c.judged, c.newest)
        ORDER BY c.suite, c.configuration""").fetchall()
    verdicts = []
    for suite, configuration, trials, latest, started_at, version, completed, newer, none_judged in rows:
        thresholds, source = thresholds_of(suite)
        comparison, why = None, None
        if none_judged:
            why = "every trial of it is disturbed (the machine was busy with other work): none is judged"
        else:
            try:
                comparison = judge_against_history(connection, judged_with_its_group(connection, latest), thresholds)
            except AllDisturbed:  # judged just above as not disturbed: only a warehouse changing under us
                comparison = None
            if comparison is None:
                why = "its first judged trial: no history to judge it against yet"
        verdicts.append(LatestVerdict(suite, configuration, int(trials), latest, started_at, version, comparison,
                                      source, why, completed, int(newer)))
    return verdicts


def _verdict_rows(verdicts: Sequence[LatestVerdict], to_root: str) -> list[dict[str, Any]]:
    """A row per primary figure of each configuration's latest verdict (one saying why, without a verdict)."""
    rows = []
    for latest in verdicts:
        common = {"suite": Link(f"{to_root}suites/{page_name(latest.suite)}.html", latest.suite),
                  "configuration": latest.configuration[:CONFIGURATION_SHOWN], "trials": latest.trials,
                  "judged trial": Link(f"{to_root}trials/{page_name(latest.latest_trial)}.html", latest.latest_trial),
                  "started (UTC)": latest.started_at,
                  "note": "; ".join([*(["stopped early: its figures are of part of a run"]
                                       if latest.completed is False else []),
                                     *([f"{latest.disturbed_after} newer trial(s) disturbed, not judged"]
                                       if latest.disturbed_after else [])]) or None}
        if latest.comparison is None:
            rows.append({**common, "figure": None, "verdict": None, "why": latest.why})
            continue
        for figure in [row for row in latest.comparison.figures if row.primary]:
            rows.append({**common, "figure": figure.figure, "change": change_text(figure),
                         "95 % CI": interval_text(figure), "verdict": Link(f"{to_root}{latest.page}",
                                                                          figure.verdict or "not judged")})
    return rows


def _navigation(to_root: str, suite: str | None = None) -> list[Link]:
    links = [Link(f"{to_root}{INDEX}", "All suites")]
    if suite is not None:
        links.append(Link(f"{to_root}suites/{page_name(suite)}.html", f"Suite {suite}"))
    return links


def _suite_rows(connection: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    found = connection.execute("""
        SELECT h.suite, count(*), count(DISTINCT h.configuration), count(*) FILTER (WHERE t.disturbed),
               min(h.started_at), max(h.started_at)
        FROM capacity_history AS h JOIN trial_manifests AS t USING (trial_id)
        WHERE h.suite IS NOT NULL GROUP BY ALL ORDER BY h.suite""").fetchall()
    return [{"suite": Link(f"suites/{page_name(suite)}.html", suite), "trials": trials,
             "configurations": configurations, "disturbed": disturbed, "first trial (UTC)": first,
             "latest trial (UTC)": last}
            for suite, trials, configurations, disturbed, first, last in found]


def index_page(connection: duckdb.DuckDBPyConnection, verdicts: Sequence[LatestVerdict], *, warehouse: str | None,
               generated_at: datetime) -> str:
    latest = [paragraph("Each configuration's newest trial that is not disturbed, judged against its configuration's "
                        "trials before it (since the latest change point, at most 20, none disturbed): the primary "
                        "figures' change (+: the figure grew; each is lower-is-better), its 95 % interval and the "
                        "verdict, which leads to the comparison in full."),
              table(_verdict_rows(verdicts, "")) if verdicts else note("No trials in the warehouse yet.")]
    suites = _suite_rows(connection)
    return page("Benchmarks", [section("Latest verdicts", latest),
                               section("Suites", [table(suites) if suites else note("No suites yet.")])],
                subtitle=f"{len(suites)} suites · {sum(row['trials'] for row in suites)} trials",
                warehouse=warehouse, generated_at=generated_at)


def _trial_rows(history: SuiteHistory) -> list[dict[str, Any]]:
    trials: dict[str, dict[str, Any]] = {}
    for point in sorted(history.points, key=lambda p: (p.started_at is None, p.started_at or datetime.min.replace(
            tzinfo=UTC), p.trial_id)):
        row = trials.setdefault(point.trial_id, {
            "trial": Link(f"../trials/{page_name(point.trial_id)}.html", point.trial_id),
            "started (UTC)": point.started_at, "configuration": point.configuration[:CONFIGURATION_SHOWN],
            "group": point.group_id, "trial is": kind(point), "sut_version": point.sut_version})
        row[f"{point.figure} (ms)"] = point.value
    return list(reversed(trials.values()))


def suite_page(connection: duckdb.DuckDBPyConnection, suite: str, verdicts: Sequence[LatestVerdict], *,
               warehouse: str | None, generated_at: datetime) -> str:
    history = suite_history(connection, suite)
    drawn = primary_history_chart(history, suite)
    sections = [section("Primary figures through time", [chart(plots.svg(drawn), (
        "x: each trial's start (UTC). Lines join a configuration's judged trials; a cross is a disturbed trial (the "
        "machine was busy with other work), a square one stopped early: drawn where they ran, never counted. "
        "Dashed grey boxes: a group of repeated trials (run --repeat, ab). Shaded: each configuration's noise band, "
        "its geometric mean times e^±(the standard deviation of the logarithms) over its trials since its latest "
        "change point. Vertical rules: change points (red regressed, green improved)."))])]
    changes = [{"configuration": change.configuration[:CONFIGURATION_SHOWN], "figure": change.metric,
                "direction": change.direction, "change %": change.change_pct, "mean before": change.mean_before,
                "mean after": change.mean_after, "p": change.p_value,
                "first trial at the new level": Link(f"../trials/{page_name(change.trial_id)}.html", change.trial_id),
                "started (UTC)": change.started_at} for change in history.changes]
    sections.append(section("Change points", [table(changes) if changes else note(
        "No change points in the primary figures' histories.")]))
    mine = [latest for latest in verdicts if latest.suite == suite]
    sections.append(section("Latest verdicts", [table(_verdict_rows(mine, "../")) if mine else note(
        "No configuration of this suite has a trial.")]))
    trials = _trial_rows(history)
    sections.append(section("Trials", [table(trials) if trials else note(
        "No trial of this suite measured a primary figure.")]))
    headline = history_chart(connection, suite)
    if headline is not None:
        sections.append(section("Every headline metric", [chart(plots.svg(headline), (
            "metric_history: the judged trials' headline figures; shaded, each configuration's noise floor; vertical "
            "rules, change points."))]))
    return page(f"Suite {suite}", sections, subtitle=f"{len({p.trial_id for p in history.points})} trials with "
                f"primary figures", warehouse=warehouse, generated_at=generated_at, navigation=_navigation("../"))


def _renderer() -> str:
    """A digest of the code that draws a page: a change to it renders every page again."""
    here = Path(__file__).parent
    return files_digest(here.glob("*.py"), here)


def trial_fingerprints(connection: duckdb.DuckDBPyConnection, warehouse: str | None = None) -> dict[str, str]:
    """Each trial's fingerprint: a digest of its rows in :data:`TRIAL_PAGE_READS`, of the renderer and of the
    warehouse's name (which its page shows)."""
    parts: dict[str, list[str]] = {}
    for name in TRIAL_PAGE_READS:
        if not has_table(connection, name):
            continue
        for trial_id, digest in connection.execute(
                f'SELECT trial_id, md5(string_agg(CAST(t AS VARCHAR), chr(30) ORDER BY CAST(t AS VARCHAR))) '
                f'FROM "{name}" AS t WHERE trial_id IS NOT NULL GROUP BY trial_id').fetchall():
            parts.setdefault(str(trial_id), []).append(f"{name}:{digest}")
    renderer = f"{_renderer()}\n{warehouse}"
    return {trial_id: hashlib.sha256("\n".join([renderer, *digests]).encode()).hexdigest()
            for trial_id, digests in parts.items()}


def suite_fingerprint(suite: str, trials: Sequence[tuple[str, str]], fingerprints: dict[str, str],
                      thresholds: Thresholds) -> str:
    """A suite page's (and its comparisons') fingerprint: its trials' places in their configurations
    (``trials``: each trial's id and capacity_history row as text), their fingerprints and the suite's thresholds."""
    digest = hashlib.sha256(f"{suite}\n{thresholds.model_dump_json()}\n".encode())
    for trial_id, place in sorted(trials):
        digest.update(f"{trial_id}\t{place}\t{fingerprints.get(trial_id)}\n".encode())
    return digest.hexdigest()


def build_site(connection: duckdb.DuckDBPyConnection, directory: Path, thresholds_of: ThresholdsOf, *,
               warehouse: str | None = None, generated_at: datetime | None = None) -> BuiltSite:
    """Every page of the site, from the warehouse the connection reads, written to ``directory`` (replacing the
    site there). NotASite when ``directory`` exists and is not a site built here. The models must be built:
    without capacity_history the site has one page, saying so."""
    started = time.perf_counter()
    directory = directory.resolve()  # a link to a site builds the site it points to
    if directory.exists() and not (directory / SITE_MARK).is_file():
        raise NotASite(f"{directory} exists and is not a benchmark site built by substrate-bench (no {SITE_MARK} "
                       "in it): choose another directory, or remove it")
    moment = generated_at or datetime.now(UTC)
    directory.parent.mkdir(parents=True, exist_ok=True)
    built = directory.with_name(f".{directory.name}.building-{os.getpid()}")
    shutil.rmtree(built, ignore_errors=True)
    built.mkdir()
    pages = SitePages(directory, built)
    try:
        (built / SITE_MARK).write_text("{}\n")
        if not has_table(connection, "capacity_history"):
            write_page(built / INDEX, page("Benchmarks", [section("Latest verdicts", [note(
                "The warehouse's models are not built yet: substrate-bench rebuild builds them.")])],
                warehouse=warehouse, generated_at=moment).encode())
            swap_in(built, directory)
            return BuiltSite(directory, 0, 0, 0, time.perf_counter() - started)
        verdicts = _latest(connection, thresholds_of)
        write_page(built / INDEX, index_page(connection, verdicts, warehouse=warehouse, generated_at=moment).encode())
        fingerprints = trial_fingerprints(connection, warehouse)
        trials = connection.execute("SELECT trial_id, suite, CAST(h AS VARCHAR) FROM capacity_history AS h "
                                    "ORDER BY trial_id").fetchall()
        # Each trial's page, then each suite's page with its comparisons: the suites' pages are the slowest, and
        # are drawn while the last trials' pages are.
        sets = [PageSet([f"trials/{page_name(trial_id)}.html"], fingerprints.get(trial_id),
                        partial(_trial_pages, trial_id=trial_id, suite=suite, moment=moment))
                for trial_id, suite, _place in trials]
        suites = sorted({suite for _trial_id, suite, _place in trials if suite is not None})
        for suite in suites:
            mine = [latest for latest in verdicts if latest.suite == suite and latest.comparison is not None]
            fingerprint = suite_fingerprint(suite, [(trial_id, place) for trial_id, of, place in trials
                                                    if of == suite], fingerprints, thresholds_of(suite)[0])
            sets.append(PageSet([f"suites/{page_name(suite)}.html", *(latest.page for latest in mine)], fingerprint,
                                partial(_suite_pages, suite=suite, mine=mine, verdicts=verdicts, warehouse=warehouse,
                                        moment=moment)))
        pages.put(connection, sets)
        pages.mark(moment)
        swap_in(built, directory)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise
    compared = sum(1 for latest in verdicts if latest.comparison is not None)
    kept = sum(1 for key in pages.kept if key.startswith("trials/"))
    return BuiltSite(directory, len(suites), len(trials), compared, time.perf_counter() - started, kept,
                     tuple(verdicts))


def _trial_pages(connection: duckdb.DuckDBPyConnection, *, trial_id: str, suite: str | None,
                 moment: datetime) -> list[str]:
    return [trial_report(connection, trial_id, generated_at=moment, navigation=_navigation("../", suite))]


def _suite_pages(connection: duckdb.DuckDBPyConnection, *, suite: str, mine: Sequence[LatestVerdict],
                 verdicts: Sequence[LatestVerdict], warehouse: str | None, moment: datetime) -> list[str]:
    return [suite_page(connection, suite, verdicts, warehouse=warehouse, generated_at=moment),
            *(_comparison_page(connection, latest, warehouse, moment) for latest in mine)]


def _comparison_page(connection: duckdb.DuckDBPyConnection, latest: LatestVerdict, warehouse: str | None,
                     moment: datetime) -> str:
    assert latest.comparison is not None
    return compared_page(connection, latest.comparison, latest.source, warehouse=warehouse, generated_at=moment,
                         navigation=[*_navigation("../", latest.suite),
                                     Link(f"../trials/{page_name(latest.latest_trial)}.html",
                                          f"Trial {latest.latest_trial}")])
