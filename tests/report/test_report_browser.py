"""Each kind of report, written from a warehouse filled by hand, opened in a real headless Chromium (Debian's), offline:
nothing but the file is requested, nothing errs in the console or the page, and the screenshot is not blank. Negative
controls show each check can fail."""

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.cli import main
from substrate_assets.report.pages import comparison_report, wake_samples
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from tests.report import warehouse
from tests.report.browser import assert_clean, assert_not_blank, chromium, executable, pixels, visit
from tests.support.synthetic_trials import write_trial

HOSTILE_TRIAL = 'evil-<img src=x onerror="console.error(1)">'
HOSTILE_SUITE = '<script>console.error("suite")</script>'


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    path = warehouse.fill(tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb", per_step=4_000)
    with connect(path) as connection:
        connection.execute("INSERT INTO trials (trial_id, suite, status) VALUES (?, ?, 'completed')",
                           [HOSTILE_TRIAL, HOSTILE_SUITE])
    return path


@pytest.fixture(scope="module")
def browser():
    executable()
    with chromium() as running:
        yield running


def write_with_cli(filled: Path, output: Path, *args: str) -> Path:
    done = CliRunner().invoke(main, ["report", *args, "-o", str(output)],
                              env={"SUBSTRATE_BENCH_WAREHOUSE": str(filled)})
    assert done.exit_code == 0, done.output
    assert done.output.strip() == str(output.resolve())
    return output


def comparison(filled: Path, output: Path) -> Path:
    with connect(filled, read_only=True) as connection:
        samples = {label: wake_samples(connection, label)
                   for label in (warehouse.BASELINE_TRIAL, warehouse.CANDIDATE_TRIAL)}
        distributions = connection.execute(
            "SELECT trial_id, p50_ms, p99_ms FROM wake_latency_distribution WHERE trial_id IN (?, ?)",
            list(samples)).fetchall()
    figures = {trial_id: (p50, p99) for trial_id, p50, p99 in distributions}
    base, cand = figures[warehouse.BASELINE_TRIAL], figures[warehouse.CANDIDATE_TRIAL]
    rows = [{"metric": name, "unit": "ms", "baseline": b, "candidate": c, "change_pct": 100 * (c - b) / b,
             "p_value": 3.1e-12, "verdict": "regressed"} for name, b, c in (("wake_p50_ms", base[0], cand[0]),
                                                                           ("wake_p99_ms", base[1], cand[1]))]
    page = comparison_report("Wake latency: v0.11.1 against v0.11.2", warehouse.BASELINE_TRIAL,
                             warehouse.CANDIDATE_TRIAL, rows, samples, warehouse=str(filled))
    output.write_text(page)
    return output


KINDS = {
    "trial": (lambda filled, out: write_with_cli(filled, out, "--trial", warehouse.LADDER_TRIAL),
              f"Trial {warehouse.LADDER_TRIAL}", 2),
    "comparison": (comparison, "Wake latency: v0.11.1 against v0.11.2", 1),
    "history": (lambda filled, out: write_with_cli(filled, out, "--suite", warehouse.HISTORY_SUITE),
                f"Suite {warehouse.HISTORY_SUITE}: history", 1),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_report_opens_offline_in_chromium_without_errors(filled, browser, tmp_path, kind):
    write, title, charts = KINDS[kind]
    page_file = write(filled, tmp_path / f"report-{kind}.html")
    # The SVG namespaces are names, never fetched; any other URL would be.
    markup = re.sub(r'xmlns(:\w+)?="http://www\.w3\.org/[^"]*"', "", page_file.read_text())
    assert not re.search(r"https?:|(src|href)=\"//|@import|url\((?!#)", markup)
    seen = visit(browser, page_file, tmp_path / f"report-{kind}.png")
    assert_clean(seen)
    assert_not_blank(seen.screenshot)
    assert seen.title == title
    assert len(seen.svg_boxes) == charts and all(box["width"] > 400 and box["height"] > 200 for box in seen.svg_boxes)
    assert seen.scripts == 0


def test_long_values_wrap_in_key_value_tables(filled, browser, tmp_path):
    """A 71-character image digest as the version under test: the trial table wraps it, and the figures beside it
    stay in sight."""
    digest = "sha256:" + "0123456789abcdef" * 4
    with connect(filled) as connection:
        connection.execute("UPDATE trials SET sut_version = ? WHERE trial_id = ?", [digest, warehouse.LADDER_TRIAL])
    try:
        seen = visit(browser, write_with_cli(filled, tmp_path / "long.html", "--trial", warehouse.LADDER_TRIAL))
    finally:
        with connect(filled) as connection:
            connection.execute("UPDATE trials SET sut_version = 'v0.11.2' WHERE trial_id = ?",
                               [warehouse.LADDER_TRIAL])
    assert_clean(seen)
    assert digest in seen.body_text.replace("\n", "") and seen.overflowing_key_values == 0


def test_user_text_is_shown_as_text_never_run(filled, browser, tmp_path):
    page_file = write_with_cli(filled, tmp_path / "hostile.html", "--trial", HOSTILE_TRIAL)
    seen = visit(browser, page_file)
    assert_clean(seen)
    assert seen.scripts == 0
    assert HOSTILE_TRIAL in seen.body_text and HOSTILE_SUITE in seen.body_text
    assert seen.title == f"Trial {HOSTILE_TRIAL}"


# Negative controls: the checks above would catch a page that errs, reaches out or shows nothing.

def test_a_console_error_is_caught(browser, tmp_path):
    page_file = tmp_path / "console-error.html"
    page_file.write_text("<!DOCTYPE html><html><body><h1>figures</h1>"
                         "<script>console.error('deliberate: a chart failed')</script></body></html>")
    seen = visit(browser, page_file)
    assert seen.console_errors == ["deliberate: a chart failed"]
    with pytest.raises(AssertionError, match="console errors"):
        assert_clean(seen)


def test_a_page_error_and_a_request_beyond_the_file_are_caught(browser, tmp_path):
    page_file = tmp_path / "reaching-out.html"
    page_file.write_text('<!DOCTYPE html><html><body><img src="https://cdn.example.com/chart.png">'
                         "<script>undefinedFunction()</script></body></html>")
    seen = visit(browser, page_file)
    assert seen.blocked == ["https://cdn.example.com/chart.png"]
    assert any("undefinedFunction" in error for error in seen.page_errors)
    with pytest.raises(AssertionError, match="requests beyond the file"):
        assert_clean(seen)


def test_a_blank_page_is_caught(browser, tmp_path):
    page_file = tmp_path / "blank.html"
    page_file.write_text("<!DOCTYPE html><html><body style='background:#fff'></body></html>")
    seen = visit(browser, page_file)
    assert_clean(seen)
    distinct, share = pixels(seen.screenshot)
    assert distinct == 1 and share == 0
    with pytest.raises(AssertionError, match="blank page"):
        assert_not_blank(seen.screenshot)


def test_a_comparison_of_two_real_trials_reads_in_the_browser(browser, tmp_path):
    """`report --compare` on two groups of three trials loaded through the real load path and marts, the second
    twice as slow: the command's own table and verdicts, both CDFs, nothing fetched, nothing erring."""
    store = RunStore(tmp_path / "store")
    rng = np.random.default_rng(3)
    groups = ("s-20251201t000000z-a3", "s-20251201t000000z-b3")
    for n, (m, group) in enumerate([(100.0, groups[0])] * 3 + [(200.0, groups[1])] * 3):
        level = m * np.exp(rng.normal(0, 0.05))
        write_trial(store, "s", 1_764_547_200 + 100 * n, {"WakeFirstTouch": rng.lognormal(np.log(level), 0.5, 4000),
                                                          "Step_01_edit": rng.lognormal(3.0, 0.3, 800)}, group=group)
    path = tmp_path / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    page = write_with_cli(path, tmp_path / "compare.html", "--compare", *groups)
    text = page.read_text()
    # The groups of one ab run, judged round by round; the wake's geometric mean (primary: no paths here) regressed.
    assert "WakeFirstTouch p50" in text and "word-regressed" in text and "Regressed: WakeFirstTouch gmean" in text
    assert "analysed as 3 rounds" in text
    assert text.count("<svg") >= 1
    seen = visit(browser, page, tmp_path / "compare.png")
    assert_clean(seen)
    assert_not_blank(seen.screenshot)


def test_a_disturbed_trial_says_so_at_the_top_of_its_page(browser, tmp_path):
    """A trial run while other processes took 24 % of the CPU: its page opens with the warning, in its own colour
    where a person looks first, and the figures below it keep their place."""
    from PIL import Image

    store = RunStore(tmp_path / "store")
    rng = np.random.default_rng(5)
    trial_id = write_trial(store, "s", 1_764_547_200, {"WakeFirstTouch": rng.lognormal(4.0, 0.5, 400)},
                           foreign_cpu_share=0.24)
    path = tmp_path / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    page = write_with_cli(path, tmp_path / "trial.html", "--trial", trial_id)
    seen = visit(browser, page, tmp_path / "trial.png")
    assert_clean(seen)
    assert_not_blank(seen.screenshot)
    assert "Disturbed: the machine was busy with other work while this trial measured (CPU taken by other " \
           "processes 24.0%" in seen.body_text
    assert seen.body_text.index("Disturbed:") < seen.body_text.index("Wake latency (ms)")
    assert "s · completed · disturbed" in seen.body_text
    image = Image.open(tmp_path / "trial.png").convert("RGB")
    warning = sum(count for count, colour in image.getcolors(image.width * image.height) if colour == (255, 244, 224))
    assert warning > 10_000  # the warning's band, a full line across the page
