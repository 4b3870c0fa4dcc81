"""The screenshots of docs/: each kind of report (trial, comparison, history), opened in headless Chromium and saved
as docs/report-<kind>.png. The trial report is of the report tests' hand-filled ladder trial (lognormal wake
latencies, a ladder past its SLO); the comparison and the history are of twelve synthetic trials loaded through the
real load path and marts, the last six with wakes a quarter slower, compared (the three trials before the change
against the three after it) and searched for change points as `substrate-bench compare` and `change_points` do.

    .venv/bin/python -m bench.report_screenshots [--out docs]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


SUITE = "coding-session-baseline"
STEPS = ("Step_01_load_context", "Step_02_clone_repo", "Step_03_edit_files")


def history_warehouse(scratch: Path) -> Path:
    """Twelve trials of SUITE, one version each, the last six with wakes a quarter slower."""
    import numpy as np

    from substrate_assets.results.layout import RunStore
    from substrate_assets.results.trial_directory import TrialDirectory
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.models.marts import build_marts
    from substrate_assets.warehouse.trial_writes import load_trials
    from tests.support.synthetic_trials import write_trial

    rng = np.random.default_rng(20261201)
    store = RunStore(scratch / "store")
    for number in range(12):
        median = (40.0 if number < 6 else 50.0) * rng.normal(1.0, 0.02)
        latencies = {"WakeFirstTouch": rng.lognormal(np.log(median), 0.45, 20_000),
                     **{step: rng.lognormal(np.log(20.0 * (index + 1)), 0.3, 4_000)
                        for index, step in enumerate(STEPS)}}
        write_trial(store, SUITE, 1_764_000_000 + 86_400 * number, latencies, tag="nightly",
                    sut_version=f"v0.12.{number}", users=24, failures=int(rng.integers(0, 30)))
    path = scratch / "history.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    arguments = parser.parse_args()
    from substrate_assets.analysis.comparison import Side
    from substrate_assets.report.pages import compared_page, history_report, trial_report
    from substrate_assets.suites import compare_thresholds, load_suites
    from substrate_assets.warehouse.compare_trials import compare
    from substrate_assets.warehouse.connection import connect
    from tests.report import warehouse
    from tests.report.browser import assert_clean, assert_not_blank, chromium, visit

    with tempfile.TemporaryDirectory() as scratch:
        path = warehouse.fill(Path(scratch) / "warehouse.duckdb", per_step=20_000)
        with connect(path, read_only=True) as connection:
            pages = {"trial": trial_report(connection, warehouse.LADDER_TRIAL)}
        history = history_warehouse(Path(scratch))
        with connect(history, read_only=True) as connection:
            ids = [row[0] for row in connection.execute(
                "SELECT trial_id FROM trial_manifests ORDER BY started_at").fetchall()]
            # The three trials before the change against the three after it, with the history of the others.
            sides = [Side(f"{ids[3]} … {ids[5]} (3 trials)", tuple(ids[3:6])),
                     Side(f"{ids[6]} … {ids[8]} (3 trials)", tuple(ids[6:9]))]
            thresholds, source = compare_thresholds(SUITE, load_suites())
            pages["comparison"] = compared_page(connection, compare(connection, *sides, thresholds), source)
            pages["history"] = history_report(connection, SUITE)
        arguments.out.mkdir(parents=True, exist_ok=True)
        with chromium() as browser:
            for kind, page in pages.items():
                page_file = Path(scratch) / f"report-{kind}.html"
                page_file.write_text(page)
                seen = visit(browser, page_file, arguments.out / f"report-{kind}.png")
                assert_clean(seen)
                assert_not_blank(seen.screenshot)
                print(arguments.out / f"report-{kind}.png")


if __name__ == "__main__":
    main()
