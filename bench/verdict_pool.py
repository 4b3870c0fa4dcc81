"""Pools of identical real trials for bench/verdicts.py: quick trials of one suite on this machine's embedded runtime,
kept in a run store of their own so that the analysis can be run again without running them again.

Three pools, told apart by their run tag:

- ``aa-quiet``: the suite as it is, nothing else running;
- ``aa-stressed``: the suite as it is while ``stress-ng --cpu 1`` takes one of the two cores;
- ``ab-delay``: the suite with ``inject_wake_delay_ms`` (a configuration of its own per delay); a pool per delay.

Trials of the three pools are run interleaved (quiet, delayed, quiet, stressed, …), so a slow spell of the machine
falls on every pool alike.

    .venv/bin/python bench/verdict_pool.py [--pool DIR] [--quiet 24] [--stressed 8] [--delayed 8] [--delay-ms 60]

The stressed pool needs stress-ng (Debian's package).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from substrate_assets.driver.trial import run_local_trial  # noqa: E402
from substrate_assets.project import scripts_directory  # noqa: E402
from substrate_assets.results.layout import RunStore  # noqa: E402
from substrate_assets.suites import Suite, get_suite  # noqa: E402
from substrate_assets.workload import ScriptLibrary  # noqa: E402

QUIET, STRESSED, DELAYED = "aa-quiet", "aa-stressed", "ab-delay"
DEFAULT_POOL = ROOT / ".bench" / "verdicts"


def pool_store(pool: Path) -> RunStore:
    return RunStore(pool / "store")


def pool_counts(pool: Path, suite: str, delay_ms: int) -> Counter[str]:
    """How many completed trials of ``suite`` each pool holds (the delayed pool: of that delay)."""
    counts: Counter[str] = Counter()
    for trial_dir in pool_store(pool).trial_dirs():
        manifest = json.loads((trial_dir / "trial.json").read_text())
        delay = manifest["knobs"].get("inject_wake_delay_ms")
        if manifest.get("suite") == suite and manifest.get("completed") and delay in (None, delay_ms):
            counts[manifest["tag"]] += 1
    return counts


def schedule(missing: Counter[str]) -> list[str]:
    """The pools' missing trials interleaved: each next trial from the pool furthest behind its share."""
    total = {kind: count for kind, count in missing.items() if count > 0}
    done: Counter[str] = Counter()
    order = []
    for _ in range(sum(total.values())):
        kind = min((kind for kind in total if done[kind] < total[kind]),
                   key=lambda kind: ((done[kind] + 0.5) / total[kind], kind))
        done[kind] += 1
        order.append(kind)
    return order


@contextlib.contextmanager
def stress(cores: int) -> Iterator[None]:
    """``stress-ng --cpu N`` for as long as the block runs, stopped (with its workers) after it."""
    process = subprocess.Popen(["stress-ng", "--cpu", str(cores), "--quiet"], start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # its workers started and spinning before the trial's runtime starts
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def pool_suite(suite: Suite, kind: str, delay_ms: int) -> Suite:
    return suite.with_overrides(tag=kind, inject_wake_delay_ms=delay_ms if kind == DELAYED else None,
                                metadata={**suite.metadata, "bench": "verdicts", "pool": kind})


def fill(pool: Path, suite_name: str, wanted: Counter[str], delay_ms: int) -> None:
    """Run the trials each pool lacks, interleaved; a trial that does not complete is run again later."""
    suite, library = get_suite(suite_name), ScriptLibrary(scripts_directory())
    have = pool_counts(pool, suite_name, delay_ms)
    order = schedule(Counter({kind: wanted[kind] - have[kind] for kind in wanted}))
    print(f"pool {pool}: {dict(have)} of {dict(wanted)}; running {len(order)} trials of {suite_name} "
          f"({suite.load_description()} each)", flush=True)
    for number, kind in enumerate(order, start=1):
        started = time.monotonic()
        with stress(1) if kind == STRESSED else contextlib.nullcontext():
            result = run_local_trial(pool_suite(suite, kind, delay_ms), pool_store(pool), library)
        summary = result.summary
        print(f"  {number}/{len(order)} {kind:12} {result.trial_id}: wakes {summary.wake_n}, p50 "
              f"{summary.wake_p50_ms or float('nan'):.1f} ms, completed {result.completed} "
              f"({time.monotonic() - started:.0f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL)
    parser.add_argument("--suite", default="quick-smoke")
    parser.add_argument("--quiet", type=int, default=24)
    parser.add_argument("--stressed", type=int, default=8)
    parser.add_argument("--delayed", type=int, default=8)
    parser.add_argument("--delay-ms", type=int, default=60)
    args = parser.parse_args()
    fill(args.pool, args.suite, Counter({QUIET: args.quiet, STRESSED: args.stressed, DELAYED: args.delayed}),
         args.delay_ms)


if __name__ == "__main__":
    main()
