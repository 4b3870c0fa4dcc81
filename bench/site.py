"""How long the benchmark site takes to build after a load: drawn whole (a first build), again with nothing changed,
and after one more trial of one suite (what the main job and warehouse_refresh pay after each load), on a warehouse
of synthetic trials in several suites loaded through the real load path and marts. Last, what a load run draws in
one process: the suites' history charts of the marts' Dagster metadata, then the site after one more trial (a chart
drawn for both is rendered once).

    .venv/bin/python -m bench.site [--suites 3] [--trials 10] [--repeat 5]

Prints each build's median over ``--repeat`` builds, its pages drawn and carried over, and the ratios to the
whole build.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.report.plots import forget_renderings
from substrate_assets.report.site import BuiltSite, build_site
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import compare_thresholds
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.synthetic_trials import write_trial

T0 = 1_780_000_000
HOUR = 3600


def requests(seed: int, median: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    level = median * math.exp(rng.normal(0, 0.04))
    return {"WakeFirstTouch": rng.lognormal(np.log(level), 0.4, 300), "Step_01_edit": rng.lognormal(3.0, 0.4, 100)}


def thresholds(suite: str | None) -> tuple[Thresholds, str]:
    return compare_thresholds(suite, {})


def build(warehouse: Path, directory: Path) -> BuiltSite:
    forget_renderings()
    # One name for the warehouse before and after the load, as a project's warehouse has: a page shows it.
    with connect(warehouse, read_only=True) as connection:
        return build_site(connection, directory, thresholds, warehouse="warehouse.duckdb")


def histories_and_site(warehouse: Path, directory: Path) -> float:
    """Seconds a load run spends drawing, in one process, from a renderer already started: the suites' histories
    for the marts' Dagster metadata, then the site."""
    from substrate_assets.defs.warehouse.models import suite_histories

    forget_renderings()
    started = time.perf_counter()
    with connect(warehouse, read_only=True) as connection:
        suite_histories(connection)
        site = build_site(connection, directory, thresholds, warehouse="warehouse.duckdb")
    assert site.trials_kept > 0, "the site before the load was not carried over"
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=int, default=3)
    parser.add_argument("--trials", type=int, default=10, help="trials per suite")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        store = RunStore(root / "store")
        for suite in range(args.suites):
            for n in range(args.trials):
                write_trial(store, f"suite-{suite}", T0 + HOUR * n + 60 * suite, requests(100 * suite + n, 50.0))
        warehouse, after = root / "w.duckdb", root / "after.duckdb"
        with connect(warehouse) as connection:
            load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
            build_marts(connection)
        shutil.copyfile(warehouse, after)
        more = RunStore(root / "more")
        added = write_trial(more, "suite-0", T0 + HOUR * args.trials, requests(999, 50.0))
        with connect(after) as connection:
            load_trials(connection, [TrialDirectory(more.find(added))])
            build_marts(connection)
        whole, unchanged, one_more, load_run = [], [], [], []
        for _ in range(args.repeat):
            site = root / "site"
            shutil.rmtree(site, ignore_errors=True)
            whole.append(build(warehouse, site))
            unchanged.append(build(warehouse, site))
            shutil.rmtree(site)
            build(warehouse, site)  # the site before the load
            one_more.append(build(after, site))
            shutil.rmtree(site)
            build(warehouse, site)
            load_run.append(histories_and_site(after, site))
        base = statistics.median(b.seconds for b in whole)
        print(f"{args.suites} suites x {args.trials} trials ({whole[0].pages} pages), median of {args.repeat}:")
        for label, builds in (("drawn whole", whole), ("nothing changed", unchanged),
                              ("one more trial of one suite", one_more)):
            seconds = statistics.median(b.seconds for b in builds)
            drawn = builds[0].trials - builds[0].trials_kept
            print(f"  {label:30s} {seconds:6.2f} s  ({drawn} trial pages drawn, {builds[0].trials_kept} carried "
                  f"over)  x{seconds / base:.2f} of whole")
        seconds = statistics.median(load_run)
        print(f"  {'histories, then one more trial':30s} {seconds:6.2f} s  (a load run's drawing: the marts' "
              f"history charts and the site)  x{seconds / base:.2f} of whole")


if __name__ == "__main__":
    main()
