"""How often the comparison's verdicts are right, from real trials on this machine: the A/A false-regression rate
(identical configurations: any figure called "regressed" is a false alarm), the detection rate of a known slowdown
(a wake delay injected into the embedded runtime), and the change each number of trials could detect.

    .venv/bin/python bench/verdicts.py [--pool DIR] [--draws 200] [--sides 1,3,5] [--no-fill]

The trials come from bench/verdict_pool.py's pools (run first, here, for any trial a pool lacks): quiet trials,
trials under ``stress-ng --cpu 1``, and trials with an injected wake delay. A comparison draws disjoint groups of k
trials at random from a pool (baseline and candidate), and, as its history, up to 20 other trials of the
baseline's pool; each is judged exactly as `substrate-bench compare` judges (the warehouse's figures, the suite's
thresholds, 10,000 bootstrap replicates). The same splits are also judged by the rule this project used before
(every request of a side pooled into one sample; request-level bootstrap and Mann–Whitney U), to show the
difference. Prints markdown tables (docs/verdicts.md holds a run of them).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.verdict_pool import DEFAULT_POOL, DELAYED, QUIET, STRESSED, fill, pool_store  # noqa: E402
from substrate_assets.analysis.bootstrap import bootstrap_percentiles, percentile_interval  # noqa: E402
from substrate_assets.analysis.noise import Noise, detectable_shift  # noqa: E402
from substrate_assets.analysis.statistics import floor_index  # noqa: E402
from substrate_assets.analysis.verdicts import (  # noqa: E402
    LATENCY_PERCENTILES,
    Comparison,
    Side,
    rank_test,
)
from substrate_assets.results.trial_directory import TrialDirectory  # noqa: E402
from substrate_assets.suites import get_suite  # noqa: E402
from substrate_assets.warehouse.compare_trials import History, compare, trial_samples  # noqa: E402
from substrate_assets.warehouse.connection import connect  # noqa: E402
from substrate_assets.warehouse.models.marts import build_marts  # noqa: E402
from substrate_assets.warehouse.trial_writes import load_trials  # noqa: E402

WAKE_P50 = "WakeFirstTouch p50"
HISTORY = 20


@dataclass
class Tally:
    comparisons: int = 0
    false_alarms: int = 0
    detected: int = 0
    inconclusive: int = 0
    old_false_alarms: int = 0
    old_detected: int = 0
    wake_p_values: list[float] | None = None

    def rate(self, count: int) -> str:
        return f"{count / self.comparisons * 100:.1f} % ({count}/{self.comparisons})" if self.comparisons else "-"


def pools(connection, suite: str, delay_ms: int) -> dict[str, list[str]]:
    """Each pool's completed trials in order; the delayed pool's of ``delay_ms`` only."""
    rows = connection.execute("SELECT tag, trial_id, inject_wake_delay_ms FROM trial_manifests WHERE suite = ? AND "
                              "completed ORDER BY started_at", [suite]).fetchall()
    found: dict[str, list[str]] = {}
    for tag, trial_id, delay in rows:
        if delay in (None, delay_ms):
            found.setdefault(tag, []).append(trial_id)
    return found


def old_rule(connection, baseline: Side, candidate: Side) -> set[str]:
    """The figures the former rule called regressed: each side's requests pooled across its trials, a 95 %
    request-level bootstrap interval (Bonferroni over the latency percentiles) excluding 0, a 10 % move, and for a
    p50 Mann–Whitney U over the pooled requests below 0.002."""
    found = trial_samples(connection, [*baseline.trial_ids, *candidate.trial_ids])
    names = [name for name in found if all(trial in found[name] for trial in (*baseline.trial_ids,
                                                                               *candidate.trial_ids))]
    regressed = set()
    family = 2 * len(names)
    for name in names:
        sides = [np.sort(np.concatenate([found[name][trial] for trial in side.trial_ids]))
                 for side in (baseline, candidate)]
        p_value = rank_test(*sides)
        for label, per_mille in LATENCY_PERCENTILES:
            before, after = floor_index(sides[0], per_mille), floor_index(sides[1], per_mille)
            if min(len(side) - min(len(side) * per_mille // 1000, len(side) - 1) for side in sides) < 10:
                continue
            rng = np.random.default_rng(20_261_201)
            replicates = bootstrap_percentiles(sides[1], per_mille, 10_000, rng) - \
                bootstrap_percentiles(sides[0], per_mille, 10_000, rng)
            low, _ = percentile_interval(replicates, 1 - 0.05 / family)
            moved = abs(after / before - 1) >= 0.10
            significant = label != "p50" or p_value < 0.002
            if moved and low > 0 and significant:
                regressed.add(f"{name} {label}")
    return regressed


def judge_split(connection, rng: np.random.Generator, baseline_pool: list[str], candidate_pool: list[str], k: int,
                with_history: bool, thresholds) -> tuple[Comparison, set[str]]:
    if baseline_pool is candidate_pool:
        drawn = list(rng.choice(baseline_pool, 2 * k, replace=False))
        base, cand = drawn[:k], drawn[k:]
    else:
        base, cand = list(rng.choice(baseline_pool, k, replace=False)), list(rng.choice(candidate_pool, k,
                                                                                         replace=False))
    rest = [trial for trial in baseline_pool if trial not in base and trial not in cand]
    past = list(rng.choice(rest, min(HISTORY, len(rest)), replace=False)) if with_history and rest else []
    history = History(tuple(sorted(past)), f"{len(past)} other trials of the baseline's pool")
    sides = Side("baseline", tuple(base)), Side("candidate", tuple(cand))
    return compare(connection, *sides, thresholds, history), old_rule(connection, *sides)


def tally(connection, rng, baseline_pool, candidate_pool, k, draws, with_history, thresholds, effect: bool) -> Tally:
    result = Tally(wake_p_values=[])
    for _ in range(draws):
        comparison, old = judge_split(connection, rng, baseline_pool, candidate_pool, k, with_history, thresholds)
        rows = {row.figure: row for row in comparison.figures}
        result.comparisons += 1
        regressed = {figure for figure, row in rows.items() if row.verdict == "regressed"}
        result.false_alarms += bool(regressed) and not effect
        result.detected += WAKE_P50 in regressed
        result.inconclusive += rows[WAKE_P50].verdict == "inconclusive"
        result.old_false_alarms += bool(old) and not effect
        result.old_detected += WAKE_P50 in old
        if rows[WAKE_P50].p_value is not None:
            result.wake_p_values.append(rows[WAKE_P50].p_value)
    return result


def trial_spread(connection, trial_ids: list[str]) -> tuple[float, float]:
    """The pool's trial-to-trial spread of the wake p50: standard deviation of the logarithms, robust CV."""
    values = [row[0] for row in connection.execute(
        "SELECT p50_ms FROM wake_latency_distribution WHERE list_contains(?::VARCHAR[], trial_id)",
        [trial_ids]).fetchall()]
    logs = np.log(values)
    median = statistics.median(values)
    robust = 1.4826 * statistics.median(abs(value - median) for value in values) / median
    return float(np.std(logs, ddof=1)), robust


def pool_line(connection, name: str, trial_ids: list[str]) -> str:
    p50s = [row[0] for row in connection.execute(
        "SELECT p50_ms FROM wake_latency_distribution WHERE list_contains(?::VARCHAR[], trial_id) ORDER BY trial_id",
        [trial_ids]).fetchall()]
    spread, robust = trial_spread(connection, trial_ids)
    return (f"| {name} | {len(trial_ids)} | {statistics.median(p50s):.1f} | {min(p50s):.1f} – {max(p50s):.1f} | "
            f"{spread * 100:.1f} % | {robust * 100:.1f} % |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL)
    parser.add_argument("--suite", default="quick-smoke")
    parser.add_argument("--draws", type=int, default=200, help="Comparisons per row.")
    parser.add_argument("--sides", default="1,3,5", help="Trials a side to compare, comma-separated.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-fill", action="store_true", help="Analyse the pools as they are.")
    parser.add_argument("--quiet", type=int, default=24)
    parser.add_argument("--stressed", type=int, default=8)
    parser.add_argument("--delayed", type=int, default=8)
    parser.add_argument("--delay-ms", type=int, default=60)
    args = parser.parse_args()
    if not args.no_fill:
        fill(args.pool, args.suite, Counter({QUIET: args.quiet, STRESSED: args.stressed, DELAYED: args.delayed}),
             args.delay_ms)
    thresholds = get_suite(args.suite).compare
    sides = [int(k) for k in args.sides.split(",")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "w.duckdb"
        with connect(path) as connection:
            load_trials(connection, [TrialDirectory(directory) for directory in pool_store(args.pool).trial_dirs()])
            build_marts(connection)
        with connect(path, read_only=True) as connection:
            found = pools(connection, args.suite, args.delay_ms)
            quiet, stressed, delayed = (found.get(tag, []) for tag in (QUIET, STRESSED, DELAYED))
            print(f"## Pools ({args.pool})\n")
            print("| pool | trials | wake p50 median (ms) | range (ms) | trial-to-trial spread (SD of log) | "
                  "robust CV |")
            print("|---|---|---|---|---|---|")
            for name, trial_ids in (("quiet", quiet), ("stress-ng --cpu 1", stressed),
                                    (f"wake delay +{args.delay_ms} ms", delayed)):
                if len(trial_ids) >= 2:
                    print(pool_line(connection, name, trial_ids))
            rng = np.random.default_rng(args.seed)
            print(f"\n## Verdicts over {args.draws} random splits per row\n")
            print("| comparison | trials a side | history | false regressions | WakeFirstTouch p50 regressed | "
                  "WakeFirstTouch p50 inconclusive | former rule: false regressions / detected |")
            print("|---|---|---|---|---|---|---|")
            rows = [("A/A quiet", quiet, quiet, False), ("A/A under stress-ng --cpu 1", stressed, stressed, False),
                    (f"A/B +{args.delay_ms} ms wake delay", quiet, delayed, True)]
            aa_p_values: list[float] = []
            for name, base_pool, cand_pool, effect in rows:
                for k in sides:
                    for with_history in (True, False):
                        needed = 2 * k if base_pool is cand_pool else k
                        if len(base_pool) < needed or len(cand_pool) < k:
                            continue
                        result = tally(connection, rng, base_pool, cand_pool, k, args.draws, with_history,
                                       thresholds, effect)
                        if not effect and with_history and k > 1:
                            aa_p_values += result.wake_p_values or []
                        history = f"≤ {HISTORY} trials" if with_history else "none"
                        old = result.old_detected if effect else result.old_false_alarms
                        print(f"| {name} | {k} | {history} | {'-' if effect else result.rate(result.false_alarms)} | "
                              f"{result.rate(result.detected)} | {result.rate(result.inconclusive)} | "
                              f"{'detected ' if effect else ''}{result.rate(old)} |", flush=True)
            if aa_p_values:
                from scipy.stats import kstest

                print(f"\nA/A WakeFirstTouch p50 t-test p-values (2+ trials a side, with history): "
                      f"{len(aa_p_values)}, KS against uniform p = {kstest(aa_p_values, 'uniform').pvalue:.2g}")
            aa_trials = quiet + stressed
            series = connection.execute("SELECT count(DISTINCT trial_id), count(DISTINCT metric) FROM metric_history "
                                        "WHERE list_contains(?::VARCHAR[], trial_id)", [aa_trials]).fetchone()
            points = connection.execute("SELECT metric, trial_id, change_pct FROM change_points WHERE "
                                        "list_contains(?::VARCHAR[], trial_id)", [aa_trials]).fetchall()
            print(f"\nChange points in the A/A history (quiet and stressed trials, one configuration, {series[0]} "
                  f"trials, {series[1]} metrics): {len(points)}"
                  + "".join(f"\n  {metric} at {trial} ({change:+.1f} %)" for metric, trial, change in points))
            spread, _ = trial_spread(connection, quiet)
            level = thresholds.false_alarm_rate / 10
            print(f"\n## Minimal detectable change of the wake p50 (quiet spread {spread * 100:.1f} %, figure tests "
                  f"at {level:g}: the false-alarm rate over 10 figures)\n")
            print("| trials a side | with a history of 20 | without history |")
            print("|---|---|---|")
            for k in sides:
                cells = []
                for history in (HISTORY, 0):
                    df = 2 * (k - 1) + (history - 1 if history else 0)
                    cells.append("unknown (no noise estimate)" if df == 0 else
                                 f"≥ {math.expm1(detectable_shift(Noise(spread, df, 0, 0), k, k, level)) * 100:.0f} %")
                print(f"| {k} | {' | '.join(cells)} |")
    print(f"\n(analysis took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
