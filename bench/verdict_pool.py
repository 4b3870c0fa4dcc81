"""Real trials for bench/verdicts.py, run the way people run them: back to back in time order, on the embedded runtime
of this machine, kept in a run store of their own so the analysis can be run again without running them again.

Three phases, each a tag of the pool's trials:

- ``aa``: trials of the suite as it is, one after another (``run --repeat`` after ``run --repeat``): back-to-back
  A/A comparisons, and the real noise and drift that injected effects are added to;
- ``ab``: blocks of rounds as ``ab --rounds`` runs them (A B, B A, …), B with a wake delay injected into the runtime
  that moves the wake's geometric mean by a chosen effect (0 % is an interleaved A/A); the delay of each effect is
  chosen from the ``aa`` trials' own wakes;
- ``load``: ab blocks under a background-load schedule (``stress-ng`` on for some trials, as users share machines:
  one or two cores, the whole trial or half of it), started outside the trial's process tree as another user's
  work would be.

As ``run`` and ``ab`` do, a trial the machine's other work disturbed runs again in its place (it stays in the pool,
marked disturbed). Each trial's suite metadata says its phase, block, round and side.

    .venv/bin/python -m bench.verdict_pool --phase aa --trials 96
    .venv/bin/python -m bench.verdict_pool --phase ab --blocks 20 --effects 0,10,20
    .venv/bin/python -m bench.verdict_pool --phase load --blocks 6 --effects 0,10

The load phase needs stress-ng (Debian's package).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from substrate_assets.driver.trial import run_local_trial
from substrate_assets.project import project_root, scripts_directory
from substrate_assets.results.layout import RunStore
from substrate_assets.suites import Suite, get_suite
from substrate_assets.workload import ScriptLibrary

DEFAULT_POOL = project_root() / ".bench" / "verdicts"
# A background load: (cores, seconds after the trial's start it begins, seconds it lasts; None: to the end).
Load = tuple[int, float, float | None]
# The load phase's schedule: most trials quiet, the rest under one or two cores of other work, whole or in part.
LOAD_SCHEDULE: tuple[tuple[float, Load | None], ...] = (
    (0.55, None), (0.15, (1, 0.0, None)), (0.15, (2, 0.0, None)), (0.15, (2, 10.0, 12.0)))


def pool_store(pool: Path) -> RunStore:
    return RunStore(pool / "store")


def manifests(pool: Path) -> list[dict]:
    """Every trial's trial.json in the pool, in time order."""
    found = [json.loads((path / "trial.json").read_text()) | {"_dir": str(path)}
             for path in pool_store(pool).trial_dirs()]
    return sorted(found, key=lambda manifest: manifest["run_ts"])


@contextlib.contextmanager
def background_load(load: Load | None) -> Iterator[None]:
    """``stress-ng --cpu N`` for a part of the trial about to start, launched through a shell that exits at once, so
    the load is no child of this process (whose tree is the trial's) but another user's work."""
    if load is None:
        yield
        return
    cores, after, lasts = load
    group: list[int] = []
    stop = threading.Event()

    def start() -> None:
        if stop.wait(after):
            return
        shell = subprocess.Popen(["sh", "-c", f"stress-ng --cpu {cores} --quiet >/dev/null 2>&1 &"],
                                 start_new_session=True)
        shell.wait()
        group.append(shell.pid)  # stress-ng keeps the shell's process group after the shell exits
        if lasts is not None and not stop.wait(lasts):
            os.killpg(shell.pid, signal.SIGTERM)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    try:
        yield
    finally:
        stop.set()
        starter.join()
        for pid in group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)


def run_one(pool: Path, suite: Suite, metadata: dict[str, object], load: Load | None, replace_budget: list[int]) -> str:
    """One trial of ``suite``, run again while the machine's other work disturbs it (at most the budget left);
    the trial id that counts."""
    library = ScriptLibrary(scripts_directory())
    while True:
        tagged = suite.with_overrides(metadata={**suite.metadata, **metadata,
                                                "load": None if load is None else list(load)})
        started = time.monotonic()
        with background_load(load):
            result = run_local_trial(tagged, pool_store(pool), library)
        share = (result.machine_load or {}).get("foreign_cpu_share")
        print(f"  {result.trial_id} {json.dumps(metadata)} load {load}: wakes {result.summary.wake_n}, p50 "
              f"{result.summary.wake_p50_ms or float('nan'):.1f} ms, foreign CPU "
              f"{'?' if share is None else f'{share:.1%}'}{', DISTURBED' if result.disturbed else ''} "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        if not result.disturbed or replace_budget[0] <= 0:
            return result.trial_id
        replace_budget[0] -= 1
        load = None  # the replacement runs as ab's would: the other work may or may not still be there
        metadata = {**metadata, "replaces": result.trial_id}


def wake_log_means(pool: Path, phase: str = "aa") -> list[np.ndarray]:
    """Each completed, undisturbed trial's wake latencies of a phase (the suite as it is), from its request log."""
    found = []
    for manifest in manifests(pool):
        if (manifest.get("metadata") or {}).get("phase") != phase or not manifest.get("completed") or \
                (manifest.get("machine_load") or {}).get("disturbed"):
            continue
        requests = pl.read_parquet(Path(manifest["_dir"]) / "requests.parquet")
        wakes = requests.filter(pl.col("wake") & pl.col("locust_counted").fill_null(True))["latency_ms"].drop_nulls()
        found.append(wakes.to_numpy())
    return found


def delay_for(effect_pct: float, trials: list[np.ndarray]) -> int:
    """The wake delay (whole ms) that moves the trials' geometric mean wake by ``effect_pct``: the median over the
    trials of the delay that moves each one's by that much."""
    from scipy.optimize import brentq

    if effect_pct == 0:
        return 0
    target = np.log1p(effect_pct / 100)
    delays = [brentq(lambda d, t=trial: float(np.mean(np.log(t + d)) - np.mean(np.log(t))) - target, 0, 10_000)
              for trial in trials]
    return max(1, round(float(np.median(delays))))


def run_blocks(pool: Path, suite: Suite, phase: str, blocks: int, rounds: int, effects: list[float],
               seed: int) -> None:
    trials = wake_log_means(pool)
    if not trials:
        raise SystemExit("the ab and load phases choose their delays from the aa phase's trials: run --phase aa first")
    delays = {effect: delay_for(effect, trials) for effect in effects}
    print(f"delays from {len(trials)} aa trials: {', '.join(f'+{e:g} %: {d} ms' for e, d in delays.items())}",
          flush=True)
    rng = random.Random(seed)
    first = 1 + max((int((m.get("metadata") or {}).get("block", 0)) for m in manifests(pool)
                     if (m.get("metadata") or {}).get("phase") == phase), default=0)
    for block in range(first, first + blocks):
        effect = effects[(block - 1) % len(effects)]
        budget = [max(2, rounds)]
        print(f"{phase} block {block}: effect +{effect:g} % (B: {delays[effect]} ms), {rounds} rounds", flush=True)
        for number in range(1, rounds + 1):
            order = ("a", "b") if number % 2 else ("b", "a")
            for side in order:
                delay = delays[effect] if side == "b" else None
                load = None
                if phase == "load":
                    pick, total = rng.random(), 0.0
                    for weight, choice in LOAD_SCHEDULE:
                        total += weight
                        if pick <= total:
                            load = choice
                            break
                meta = {"bench": "verdicts", "phase": phase, "block": block, "round": number, "side": side,
                        "effect_pct": effect, "delay_ms": delays[effect] if side == "b" else 0}
                run_one(pool, suite.with_overrides(tag=phase, inject_wake_delay_ms=delay or None), meta, load, budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL)
    parser.add_argument("--suite", default="quick-smoke")
    parser.add_argument("--phase", choices=("aa", "ab", "load"), required=True)
    parser.add_argument("--trials", type=int, default=96, help="aa: trials to run.")
    parser.add_argument("--blocks", type=int, default=12, help="ab, load: blocks of rounds to run.")
    parser.add_argument("--rounds", type=int, default=4, help="ab, load: rounds per block.")
    parser.add_argument("--effects", default="0,10,20", help="ab, load: effects on the wake's geometric mean, "
                        "percent, one per block in turn.")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    suite = get_suite(args.suite)
    if args.phase == "aa":
        budget = [args.trials]
        for number in range(1, args.trials + 1):
            run_one(args.pool, suite.with_overrides(tag="aa"), {"bench": "verdicts", "phase": "aa",
                                                                 "number": number}, None, budget)
    else:
        run_blocks(args.pool, suite, args.phase, args.blocks, args.rounds,
                   [float(effect) for effect in args.effects.split(",")], args.seed)


if __name__ == "__main__":
    main()
