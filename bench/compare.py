"""The work of `substrate-bench compare` on two groups of trials of 100k request samples each (4 a side by default,
the groups of one ab run, so judged round by round): selecting both sides, reading their samples and wake paths by
trial, and every figure (the wake's geometric means, each path's p50 and the slow share, each trial's p50 and p99,
the noise, the t test, the rule's minimal detectable change, densities, the failure ratio as counts), after start-up
(imports, opening the warehouse). Judged against a budget of 200 ms.

    .venv/bin/python -m bench.compare [--samples 100000] [--trials 4] [--repeat 7]

The trials are written with every file a local trial has, their wakes' paths in a runtime event log, and loaded
through the warehouse's real load path; 90 % of each trial's samples are WakeFirstTouch (30 % of them slow), the
rest five Step rows.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from substrate_assets.analysis.verdicts import Thresholds
from substrate_assets.project import project_root
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.compare_trials import compare
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.sides import select_side
from substrate_assets.warehouse.trial_writes import load_trials
from tests.support.synthetic_trials import write_trial

ROOT = project_root()

BUDGET_MS = 200.0
STEPS = [f"Step_0{i}_step" for i in range(1, 6)]


def latencies(rng: np.random.Generator, samples: int, median: float) -> tuple[dict[str, np.ndarray], list[str]]:
    """A trial's samples, and its wakes' paths: 30 % of the wakes slow (cold restores)."""
    wakes = samples * 9 // 10
    per_step = (samples - wakes) // len(STEPS)
    cold = rng.random(wakes) < 0.3
    wake = np.where(cold, rng.lognormal(np.log(4 * median), 0.2, wakes), rng.lognormal(np.log(median), 0.4, wakes))
    return ({"WakeFirstTouch": wake, **{step: rng.lognormal(np.log(20.0), 0.4, per_step) for step in STEPS}},
            ["restore_cold" if flag else "restore_warm" for flag in cold])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=4, help="Trials a side.")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    groups = (f"bench-20251201t000000z-a{args.trials}", f"bench-20251201t000000z-b{args.trials}")
    with tempfile.TemporaryDirectory() as work:
        store = RunStore(Path(work) / "store")
        ids = []
        for index in range(2 * args.trials):
            side = index % 2
            requests, paths = latencies(rng, args.samples, (100.0, 110.0)[side])
            ids.append(write_trial(store, "bench", 1_764_547_200 + 100 * index, requests, group=groups[side],
                                   wake_paths=paths))
        warehouse = Path(work) / "w.duckdb"
        with connect(warehouse) as connection:
            load_trials(connection, [TrialDirectory(path) for path in store.trial_dirs()])
            build_marts(connection)
        timings = []
        with connect(warehouse, read_only=True) as connection:
            for _ in range(args.repeat):
                started = time.perf_counter()
                result = compare(connection, select_side(connection, groups[0]),
                                 select_side(connection, groups[1]), Thresholds())
                timings.append((time.perf_counter() - started) * 1e3)
        wall = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([str(ROOT / ".venv/bin/substrate-bench"), "compare", *groups, "--format", "json"],
                           env={"SUBSTRATE_BENCH_WAREHOUSE": str(warehouse), "PATH": "/usr/bin:/bin"},
                           capture_output=True, check=False)
            wall.append(time.perf_counter() - started)
    median = statistics.median(timings)
    print(f"compare, 2 groups of {args.trials} trials x {args.samples:,} request samples ({len(ids)} trials, "
          f"{'judged by round' if result.paired else 'unpaired'}), {len(result.figures)} figures")
    print(f"  work after start-up: median {median:.1f} ms (min {min(timings):.1f}, max {max(timings):.1f}) "
          f"over {args.repeat} runs")
    print(f"  budget {BUDGET_MS:.0f} ms: ratio {median / BUDGET_MS:.2f} of the budget")
    print(f"  the whole command, start-up included: median {statistics.median(wall):.2f} s")


if __name__ == "__main__":
    main()
