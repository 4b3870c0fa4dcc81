"""A long trial's page shows its wake latency window by window, from the real load path and models; a short trial's
does not. The page opens in a real headless Chromium with the drift chart drawn."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from substrate_assets.cli import main
from substrate_assets.report.drift import drift_chart
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from tests.report.browser import assert_clean, assert_not_blank, chromium, executable, visit
from tests.support.synthetic_trials import write_trial

# 22 minutes of wakes whose level climbs by 20 ms a window: five windows, the last one two minutes long.
SPAN_S, PER_WINDOW, LEVELS = 1320.0, 600, (100.0, 120.0, 140.0, 160.0, 180.0)


@pytest.fixture(scope="module")
def soaked(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    store = RunStore(root / "store")
    rng = np.random.default_rng(11)
    # Evenly spread samples: the first 5 minutes hold the first PER_WINDOW of them, and so on.
    per_window = [PER_WINDOW] * 4 + [PER_WINDOW * 2 // 5]
    wakes = np.concatenate([level * np.exp(rng.normal(0, 0.1, count)) for level, count in zip(LEVELS, per_window,
                                                                                                 strict=True)])
    soak = write_trial(store, "soak", 1_764_547_200, {"WakeFirstTouch": wakes}, span_s=SPAN_S * len(wakes) /
                       (len(wakes) - 1))
    short = write_trial(store, "soak", 1_764_550_000, {"WakeFirstTouch": rng.lognormal(4.6, 0.2, 500)})
    path = root / "w.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    return path, soak, short, wakes


def windows(path, trial_id):
    with connect(path, read_only=True) as connection:
        cursor = connection.execute("SELECT * FROM wake_latency_windows WHERE trial_id = ? ORDER BY window_index",
                                    [trial_id])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_windows_follow_the_drift_with_exact_percentiles(soaked):
    path, soak, _, wakes = soaked
    rows = windows(path, soak)
    assert [row["window_index"] for row in rows] == [0, 1, 2, 3, 4]
    assert [row["n_wakes"] for row in rows] == [600, 600, 600, 600, 240]
    starts = np.cumsum([0, 600, 600, 600, 600])
    for row, start in zip(rows, starts, strict=True):
        ordered = np.sort(wakes[start:start + row["n_wakes"]])
        assert row["p50_ms"] == ordered[len(ordered) // 2]
        assert row["p99_ms"] == ordered[int(len(ordered) * 0.99)]
    assert rows[-1]["window_end_s"] == pytest.approx(SPAN_S)
    p50s = [row["p50_ms"] for row in rows]
    assert p50s == sorted(p50s) and p50s[-1] / p50s[0] == pytest.approx(1.8, rel=0.05)


def test_the_drift_chart_draws_p50_and_p99_by_minute(soaked):
    path, soak, _, _ = soaked
    spec = drift_chart(windows(path, soak)).to_dict()
    encoding = spec["encoding"] if "encoding" in spec else spec["layer"][0]["encoding"]
    assert encoding["x"]["field"] == "minute" and encoding["y"]["field"] == "latency_ms"
    assert {tip["field"] for tip in encoding["tooltip"]} >= {"window", "wakes", "latency_ms"}
    drawn = json.dumps(spec["datasets"] if "datasets" in spec else spec["data"])
    assert drawn.count('"percentile": "p99"') == 5 and drawn.count('"percentile": "p50"') == 5


def write_report(path, trial_id, output):
    done = CliRunner().invoke(main, ["report", "--trial", trial_id, "-o", str(output)],
                              env={"SUBSTRATE_BENCH_WAREHOUSE": str(path)})
    assert done.exit_code == 0, done.output
    return output


def test_a_short_trial_has_no_drift_section(soaked, tmp_path):
    path, _, short, _ = soaked
    assert len(windows(path, short)) == 1
    assert "Wake latency over the trial" not in write_report(path, short, tmp_path / "short.html").read_text()


def test_a_long_trial_page_shows_its_drift_in_the_browser(soaked, tmp_path):
    executable()
    path, soak, _, _ = soaked
    page = write_report(path, soak, tmp_path / "soak.html")
    text = page.read_text()
    assert "Wake latency over the trial" in text and "minutes into the trial" in text
    with chromium() as browser:
        seen = visit(browser, page, tmp_path / "soak.png")
    assert_clean(seen)
    assert_not_blank(seen.screenshot)
    # The CDF and the drift chart; a flat trial draws no ladder.
    assert len(seen.svg_boxes) == 2 and all(box["width"] > 400 and box["height"] > 200 for box in seen.svg_boxes)
