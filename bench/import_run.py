"""`substrate-bench import` of one upstream run, start to finish (the command's whole process, as a person runs it),
into a project whose warehouse already holds 0 and N trials (copies of the same upstream run under other start
times, loaded by a rebuild beforehand). Prints the median of a few imports and its ratio to the 3 s target.

    .venv/bin/python -m bench.import_run [--history 0,600] [--repeats 3]

The Dagster instance exists before the first import (creating one is a one-time cost of a new project).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from substrate_assets.results.layout import RunStore
from substrate_assets.warehouse.models.discovery import models_directory
from substrate_assets.warehouse.rebuild import rebuild

ROOT = Path(__file__).resolve().parents[1]

RUN = ROOT / "tests" / "data" / "upstream_runs" / "runs" / "glutton_baseline_5_users"
CLI = str(Path(sys.executable).parent / "substrate-bench")
TARGET_S = 3.0  # issue 43: an import of one run, whole process
BASELINE_S = 12.7  # issue 16: one run into a fresh project before the import paths were made incremental


def history_copies(store_runs: Path, count: int) -> None:
    """``count`` copies of the upstream run, each under its own start second (a trial of its own)."""
    [date_dir] = RUN.iterdir()
    [ts_dir] = date_dir.iterdir()
    base = int(ts_dir.name.split("=")[1])
    for index in range(count):
        target = store_runs / "glutton_baseline_history" / date_dir.name / f"run_ts={base - 3600 * (index + 1)}"
        shutil.copytree(ts_dir, target)


def import_seconds(env: dict[str, str], upstream: Path, store: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([CLI, "import", str(upstream)], env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"import failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    shutil.rmtree(store / "runs" / RUN.name)  # the next import copies and loads it anew
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", default="0,600")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'trials before':>13} {'import s (median)':>18} {'runs':>24} {'vs 3 s target':>13} "
          f"{'vs 12.7 s before':>16}", flush=True)
    for count in (int(value) for value in args.history.split(",")):
        with tempfile.TemporaryDirectory() as work:
            home = Path(work)
            env = {**os.environ, "SUBSTRATE_BENCH_STORE": str(home / "store"),
                   "SUBSTRATE_BENCH_WAREHOUSE": str(home / "warehouse.duckdb"), "DAGSTER_HOME": str(home / "dagster")}
            (home / "store" / "runs").mkdir(parents=True)
            if count:
                history_copies(home / "store" / "runs", count)
                rebuilt = rebuild(RunStore(home / "store"), home / "warehouse.duckdb", models_directory())
                assert len(rebuilt.trials) == count, rebuilt.skipped
            upstream = home / "upstream" / "runs"
            shutil.copytree(RUN, upstream / RUN.name)
            subprocess.run([sys.executable, "-c", "from substrate_assets.app.instance import project_instance; "
                            "project_instance()"], env=env, check=True, cwd=ROOT)
            seconds = [import_seconds(env, upstream.parent, home / "store") for _ in range(args.repeats)]
            median = statistics.median(seconds)
            print(f"{count:>13} {median:>18.2f} {' '.join(f'{s:.2f}' for s in seconds):>24} "
                  f"{median / TARGET_S:>13.2f} {median / BASELINE_S:>16.2f}", flush=True)


if __name__ == "__main__":
    main()
