"""The work of `substrate-bench compare` on two groups of trials of 100k request samples each (3 a side by default):
selecting both sides, reading their samples by trial, the history's figures, and every figure (each trial's p50 and
p99, a hierarchical bootstrap of 10,000 replicates each, the noise, the t test, densities, failure ratio), after
start-up (imports, opening the warehouse). Judged against a budget of 200 ms. Also the cost of one trial's percentile
bootstrap as compare draws it (one Beta draw per replicate) against real resampling.

    .venv/bin/python bench/compare.py [--samples 100000] [--trials 3] [--repeat 7]

The trials are written with every file a local trial has and loaded through the warehouse's real load path; 90 % of
each trial's samples are WakeFirstTouch, the rest five Step rows.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from substrate_assets.analysis.bootstrap import REPLICATES, bootstrap_percentiles  # noqa: E402
from substrate_assets.analysis.statistics import floor_index  # noqa: E402
from substrate_assets.analysis.verdicts import Thresholds  # noqa: E402
from substrate_assets.results.layout import RunStore  # noqa: E402
from substrate_assets.results.trial_directory import TrialDirectory  # noqa: E402
from substrate_assets.warehouse.compare_trials import compare, select_side  # noqa: E402
from substrate_assets.warehouse.connection import connect  # noqa: E402
from substrate_assets.warehouse.models.marts import build_marts  # noqa: E402
from substrate_assets.warehouse.trial_writes import load_trials  # noqa: E402
from tests.support.synthetic_trials import write_trial  # noqa: E402

BUDGET_MS = 200.0
STEPS = [f"Step_0{i}_step" for i in range(1, 6)]


def latencies(rng: np.random.Generator, samples: int, median: float) -> dict[str, np.ndarray]:
    wakes = samples * 9 // 10
    per_step = (samples - wakes) // len(STEPS)
    return {"WakeFirstTouch": rng.lognormal(np.log(median), 0.5, wakes),
            **{step: rng.lognormal(np.log(20.0), 0.4, per_step) for step in STEPS}}


NAIVE_REPLICATES = 20


def bootstrap_costs(rng: np.random.Generator, samples: int) -> tuple[float, float]:
    """(ms for one trial's p99 replicates as compare draws them, ms resampling would take for as many)."""
    trial = np.sort(rng.lognormal(4.6, 0.5, samples))
    started = time.perf_counter()
    bootstrap_percentiles(trial, 990, REPLICATES, rng)
    beta_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    for _ in range(NAIVE_REPLICATES):
        floor_index(np.sort(rng.choice(trial, samples)), 990)
    naive_ms = (time.perf_counter() - started) * 1e3 * REPLICATES / NAIVE_REPLICATES
    return beta_ms, naive_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=3, help="Trials a side.")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    groups = ("bench-20251201t000000z-a", "bench-20251201t000000z-b")
    with tempfile.TemporaryDirectory() as work:
        store = RunStore(Path(work) / "store")
        ids = [write_trial(store, "bench", 1_764_547_200 + 100 * index, latencies(rng, args.samples, median),
                           group=groups[side])
               for side, median in enumerate((100.0, 110.0)) for index in range(side * args.trials,
                                                                                 (side + 1) * args.trials)]
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
    beta_ms, naive_ms = bootstrap_costs(rng, args.samples)
    print(f"compare, 2 groups of {args.trials} trials x {args.samples:,} request samples ({len(ids)} trials), "
          f"{len(result.figures)} figures")
    print(f"  work after start-up: median {median:.1f} ms (min {min(timings):.1f}, max {max(timings):.1f}) "
          f"over {args.repeat} runs")
    print(f"  budget {BUDGET_MS:.0f} ms: ratio {median / BUDGET_MS:.2f} of the budget")
    print(f"  the whole command, start-up included: median {statistics.median(wall):.2f} s")
    print(f"bootstrap of one trial's p99, {REPLICATES:,} replicates of {args.samples:,} samples: one Beta draw per "
          f"replicate {beta_ms:.1f} ms; resampling {naive_ms / 1e3:.1f} s (measured on {NAIVE_REPLICATES} "
          f"replicates, scaled); ratio {naive_ms / beta_ms:,.0f}x")


if __name__ == "__main__":
    main()
