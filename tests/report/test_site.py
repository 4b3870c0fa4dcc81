"""The benchmark site, built from a warehouse loaded through the real load path (trial directories in every file's
format, the models built): three suites, 31 trials, a step change, a disturbed trial, a trial stopped early, a
group. Every page opened in a real headless Chromium, offline; every link followed to a page of the site."""

import json
import math
import os
import shutil
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.cli import main
from substrate_assets.report.html import Link, anchor
from substrate_assets.report.primary_chart import primary_history_chart
from substrate_assets.report.site import SITE_MARK, NotASite, build_site, page_name
from substrate_assets.report.site_server import SiteServer
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import compare_thresholds
from substrate_assets.warehouse.compare_trials import judge_against_history
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.primary_history import SuiteHistory, suite_history
from substrate_assets.warehouse.sides import select_side
from substrate_assets.warehouse.trial_writes import load_trials
from tests.report.browser import assert_clean, assert_not_blank, chromium, executable, visit
from tests.support.synthetic_trials import write_trial

T0 = 1_780_000_000
HOUR = 3600
STEADY, GLUTTON, PAUSE = "agent-steady", "glutton-resume", "agent-pause"
GROUP = "agent-steady-20260601t000000z-x3"
DISTURBED_AT, STEP_AT, STOPPED_AT = 4, 7, 3


def requests(seed: int, median: float, wake: str = "WakeFirstTouch", question: str | None = None) -> dict:
    """One trial's requests: its own level drawn around ``median`` (the trial-to-trial spread), then its wakes."""
    rng = np.random.default_rng(seed)
    level = median * math.exp(rng.normal(0, 0.04))
    drawn = {wake: rng.lognormal(np.log(level), 0.4, 300)}
    if question:
        drawn[question] = rng.lognormal(np.log(3 * level), 0.3, 100)
    return drawn


def thresholds(suite):
    return compare_thresholds(suite, {})


def write_suites(store: RunStore) -> dict[str, list[str]]:
    """agent-steady: 12 trials an hour apart, 40 % slower from the eighth, the fifth disturbed, three in a group;
    glutton-resume: 10 glutton trials (ResumeActor answers its question); agent-pause: 9, the fourth stopped early."""
    trials: dict[str, list[str]] = {STEADY: [], GLUTTON: [], PAUSE: []}
    for i in range(12):
        trials[STEADY].append(write_trial(
            store, STEADY, T0 + HOUR * i, requests(i, 100.0 if i < STEP_AT else 140.0),
            foreign_cpu_share=0.2 if i == DISTURBED_AT else 0.01, group=GROUP if i in (8, 9, 10) else None))
    for i in range(10):
        trials[GLUTTON].append(write_trial(store, GLUTTON, T0 + 1800 + HOUR * i,
                                           requests(100 + i, 5.0, "GluttonPing", "ResumeActor"), family="glutton"))
    for i in range(9):
        trials[PAUSE].append(write_trial(store, PAUSE, T0 + 2400 + HOUR * i, requests(200 + i, 30.0),
                                         completed=i != STOPPED_AT))
    return trials


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    store = RunStore(root / "store")
    trials = write_suites(store)
    path = root / "warehouse.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    return path, trials, store


@pytest.fixture(scope="module")
def site(warehouse, tmp_path_factory):
    path, _trials, _store = warehouse
    directory = tmp_path_factory.mktemp("built") / "site"
    with connect(path, read_only=True) as connection:
        built = build_site(connection, directory, thresholds, warehouse=str(path))
    return built


def test_the_site_holds_a_page_per_suite_trial_and_latest_comparison(site, warehouse):
    _path, trials, _store = warehouse
    assert (site.suites, site.trials, site.comparisons) == (3, 31, 3)
    files = {str(path.relative_to(site.directory)) for path in site.directory.rglob("*.html")}
    assert len(files) == site.pages == 38
    assert {f"trials/{trial}.html" for suite in trials.values() for trial in suite} <= files
    assert {f"suites/{suite}.html" for suite in trials} <= files
    index = site.index.read_text()
    for suite in trials:
        assert f'href="suites/{suite}.html"' in index
        assert f'href="trials/{trials[suite][-1]}.html"' in index  # each configuration's latest trial
    # The glutton suite's question is judged on the landing page beside its wake row.
    assert "ResumeActor gmean" in index and "GluttonPing" in index


def test_the_site_hands_over_the_comparison_it_judged_each_configurations_latest_trial_by(site, warehouse):
    path, trials, _store = warehouse
    latest = trials[PAUSE][-1]
    with connect(path, read_only=True) as connection:
        afresh = judge_against_history(connection, select_side(connection, latest), thresholds(PAUSE)[0])
    assert afresh is not None and site.judged(latest) == afresh
    assert site.judged(trials[PAUSE][-2]) is None  # not a configuration's latest: the site did not judge it


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href" and value is not None]


def test_every_link_leads_to_a_page_of_the_site(site):
    pages = sorted(site.directory.rglob("*.html"))
    targets: set[Path] = set()
    for page_file in pages:
        links = Links()
        links.feed(page_file.read_text())
        for href in links.hrefs:
            assert not urlparse(href).scheme and not href.startswith("/"), (page_file, href)
            target = (page_file.parent / unquote(href)).resolve()
            assert target.is_file(), f"{page_file.name} links to {href}, which is not there"
            assert target.is_relative_to(site.directory.resolve())
            targets.add(target)
    # Every trial page, suite page and comparison can be reached from another page.
    assert {path.resolve() for path in pages} - targets <= {site.index.resolve()}


def test_the_pages_read_in_a_browser(site, warehouse):
    """The landing page, every suite page and comparison, and a trial page of each suite (every trial page is the
    trial report, which tests/report/test_report_browser.py reads page by page) in a real headless Chromium:
    nothing errs, nothing is fetched, nothing is blank, and a person clicks from page to page."""
    _path, trials, _store = warehouse
    executable()
    pages = [site.index, *sorted((site.directory / "suites").glob("*.html")),
             *sorted((site.directory / "comparisons").glob("*.html")),
             *(site.directory / "trials" / f"{suite[-1]}.html" for suite in trials.values())]
    with chromium() as browser:
        for page_file in pages:
            seen = visit(browser, page_file)
            assert_clean(seen)
            assert_not_blank(seen.screenshot, colours=40, ink=0.02)
            assert seen.scripts == 0
            assert all(link.startswith(site.directory.resolve().as_uri()) for link in seen.links), seen.links
        # A person clicks from the landing page to a suite, then back.
        context = browser.new_context(offline=True)
        page = context.new_page()
        page.goto(site.index.as_uri())
        page.get_by_role("link", name=STEADY).first.click()
        page.wait_for_load_state()
        assert page.title() == f"Suite {STEADY}"
        assert "Primary figures through time" in page.inner_text("body")
        page.get_by_role("link", name="All suites").click()
        page.wait_for_load_state()
        assert page.title() == "Benchmarks"
        context.close()


def test_a_history_is_drawn_by_time_and_never_mixes_suites(warehouse):
    path, trials, _store = warehouse
    with connect(path, read_only=True) as connection:
        histories = {suite: suite_history(connection, suite) for suite in trials}
    for suite, history in histories.items():
        assert {point.trial_id for point in history.points} == set(trials[suite])
        spec = primary_history_chart(history, suite).to_dict()
        panels = spec["vconcat"]
        assert len(panels) == len(history.figures)
        for panel in panels:
            for layer in panel["layer"]:
                x = layer["encoding"]["x"]
                assert x["type"] == "temporal" and x["field"] in ("started_at", "start"), x
                assert x["scale"]["type"] == "utc"
                drawn = layer["data"]["values"]
                assert all(row.get("suite", suite) == suite for row in drawn)
                assert {row["trial_id"] for row in drawn if "trial_id" in row} <= set(trials[suite])
    # Given another suite's rows too, a chart draws its own suite's only.
    mixed = SuiteHistory(histories[STEADY].points + histories[PAUSE].points, [], [])
    spec = primary_history_chart(mixed, PAUSE).to_dict()
    drawn = {row["trial_id"] for panel in spec["vconcat"] for layer in panel["layer"]
             for row in layer["data"]["values"] if "trial_id" in row}
    assert drawn == set(trials[PAUSE])


def test_the_history_marks_what_cannot_count_and_finds_the_step(warehouse):
    path, trials, _store = warehouse
    with connect(path, read_only=True) as connection:
        steady, pause, glutton = (suite_history(connection, suite) for suite in (STEADY, PAUSE, GLUTTON))
    wake = [point for point in steady.points if point.figure == "WakeFirstTouch gmean"]
    assert [point.trial_id for point in wake if point.disturbed] == [trials[STEADY][DISTURBED_AT]]
    assert [point.trial_id for point in pause.points if point.completed is False] == [trials[PAUSE][STOPPED_AT]]
    assert {point.trial_id for point in wake if point.group_id == GROUP} == set(trials[STEADY][8:11])
    # The 40 % step is one change point, at the first slower trial, a regression.
    changes = [change for change in steady.changes if change.metric == "WakeFirstTouch gmean"]
    assert [(change.trial_id, change.direction) for change in changes] == [(trials[STEADY][STEP_AT], "regressed")]
    assert 30 < changes[0].change_pct < 50
    # The band is measured over the trials at the new level only; the flat suite's over all its judged trials.
    band, = [band for band in steady.bands if band.figure == "WakeFirstTouch gmean"]
    assert band.trials == 12 - STEP_AT and 125 < band.level < 155 and band.noise < 0.15
    assert {band.figure for band in glutton.bands} == {"GluttonPing gmean", "ResumeActor gmean"}
    resume = [point.value for point in glutton.points if point.figure == "ResumeActor gmean"]
    assert len(resume) == 10 and all(10 < value < 20 for value in resume)
    spec = primary_history_chart(steady, STEADY).to_dict()
    kinds = {row["trial_id"]: row["kind"] for layer in spec["vconcat"][0]["layer"]
             for row in layer["data"]["values"] if "kind" in row}
    assert kinds[trials[STEADY][DISTURBED_AT]] == "disturbed" and kinds[trials[STEADY][0]] == "judged"
    groups = [row for layer in spec["vconcat"][0]["layer"] for row in layer["data"]["values"] if "group" in row
              and "trials" in row]
    assert [(row["group"], row["trials"]) for row in groups] == [(GROUP, 3)]


def test_pages_that_did_not_change_are_carried_over_and_a_new_trial_redraws_its_suite(site, warehouse, tmp_path):
    path, trials, _store = warehouse
    store = RunStore(tmp_path / "store")  # the new trials': the module's store stays as it was
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(path.read_bytes())
    directory = tmp_path / "site"
    shutil.copytree(site.directory, directory)  # the module's site, built from the same rows
    named = str(path)  # the name its pages show
    # A kept page is one this site wrote: one replaced since (here by a link to a secret) is drawn again.
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    tampered = directory / "trials" / f"{trials[PAUSE][0]}.html"
    tampered.unlink()
    tampered.symlink_to(secret)
    with connect(copy, read_only=True) as connection:
        again = build_site(connection, directory, thresholds, warehouse=named)
    assert again.trials_kept == 30
    assert not tampered.is_symlink() and "TOPSECRET" not in tampered.read_text() and trials[PAUSE][0] in \
        tampered.read_text()
    suite_page = directory / "suites" / f"{PAUSE}.html"
    before = suite_page.read_text()
    other = (directory / "suites" / f"{STEADY}.html").read_text()
    added = write_trial(store, PAUSE, T0 + 2400 + HOUR * 9, requests(300, 60.0))
    busy = write_trial(store, PAUSE, T0 + 2400 + HOUR * 10, requests(301, 30.0), foreign_cpu_share=0.3)
    with connect(copy) as connection:
        load_trials(connection, [TrialDirectory(store.find(trial)) for trial in (added, busy)])
        build_marts(connection)
    with connect(copy, read_only=True) as connection:
        third = build_site(connection, directory, thresholds, warehouse=named)
    assert (third.trials, third.trials_kept) == (33, 31)
    assert suite_page.read_text() != before and added in suite_page.read_text()
    assert (directory / "suites" / f"{STEADY}.html").read_text() == other
    recorded = json.loads((directory / SITE_MARK).read_text())["pages"]
    assert f"trials/{added}.html" in recorded and f"suites/{PAUSE}.html" in recorded
    assert not list(tmp_path.glob(".site.*")), "nothing left beside the site"
    # The newest trial is disturbed: the latest verdict is of the newest that is not, and says so.
    index = (directory / "index.html").read_text()
    row = next(line for line in index.split("<tr>") if f">{PAUSE}<" in line)
    assert f">{added}<" in row and busy not in row and "1 newer trial(s) disturbed, not judged" in row


def test_a_link_to_a_site_builds_the_site_it_points_to(site, warehouse, tmp_path):
    path, _trials, _store = warehouse
    real = tmp_path / "real"
    shutil.copytree(site.directory, real)
    link = tmp_path / "link"
    link.symlink_to(real)
    with connect(path, read_only=True) as connection:
        built = build_site(connection, link, thresholds, warehouse=str(path))
    assert built.directory == real.resolve() and link.is_symlink() and (real / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # nothing left beside them


def test_a_directory_that_is_not_a_site_is_never_replaced(warehouse, tmp_path):
    path, _trials, _store = warehouse
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    with connect(path, read_only=True) as connection, pytest.raises(NotASite, match="not a benchmark site"):
        build_site(connection, mine, thresholds)
    assert [p.name for p in mine.iterdir()] == ["thesis.txt"]
    result = CliRunner().invoke(main, ["site", "-o", str(mine), "--warehouse", str(path)])
    assert result.exit_code == 1 and "not a benchmark site" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_command_builds_the_site_and_says_where(site, warehouse, tmp_path):
    path, _trials, _store = warehouse
    shutil.copytree(site.directory, tmp_path / "out")
    result = CliRunner().invoke(main, ["site", "-o", str(tmp_path / "out"), "--warehouse", str(path)])
    assert result.exit_code == 0, result.output
    assert "built 38 pages (3 suites, 31 trials, 3 comparisons)" in result.output
    assert result.output.strip().endswith(str(tmp_path / "out" / "index.html"))


@pytest.mark.parametrize("name", ["../../etc/passwd", "a/b", "", ".hidden", "x" * 300, "trial\x00id", "ü-suite"])
def test_a_page_name_never_leaves_its_folder(name):
    made = page_name(name)
    assert "/" not in made and "\x00" not in made and not made.startswith(".") and made
    assert len(made) <= 140 and made == page_name(name)
    assert page_name("a b") != page_name("a_b")  # two names never share a page
    assert page_name("a b") != page_name(page_name("a b"))  # nor one named as another's page


def test_a_link_is_a_relative_path_only():
    assert anchor(Link("trials/x.html", "<b>x</b>")) == '<a href="trials/x.html">&lt;b&gt;x&lt;/b&gt;</a>'
    for href in ("javascript:alert(1)", "file:///etc/passwd", "/etc/passwd", "https://example.com/"):
        with pytest.raises(ValueError):
            anchor(Link(href, "x"))


def _get(url: str, host: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_server_answers_for_the_site_only(site, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "index.html").write_text("<p>site</p>")
    (served / "trials").mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the web")
    os.symlink(outside, served / "trials" / "leak.html")
    with SiteServer(served) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert _get(server.url) == 200
        assert _get(server.url + "index.html") == 200
        assert _get(server.url + "trials/") == 404  # no listing
        assert _get(server.url + "trials/leak.html") == 404  # a link pointing out
        assert _get(server.url + "../secret.txt") == 404
        assert _get(server.url, host=f"attacker.example:{server.port}") == 421
        assert _get(server.url, host=f"localhost:{server.port}") == 200
        (served / ".substrate-bench-site").write_text("{}")
        assert _get(server.url + ".substrate-bench-site") == 404  # a hidden file is not the site's
        assert _get(server.url + "index.html%00") == 404  # a name no file system holds
