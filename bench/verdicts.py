"""How often the verdicts are right, from real trials of this machine, measured the way users meet them.

The trials are bench/verdict_pool.py's (run it first): a long sequence of identical trials in time order (``aa``),
ab blocks with a wake delay injected into the runtime (``ab``), and ab blocks under a background-load schedule
(``load``). Every comparison is judged as `substrate-bench compare` judges it (the warehouse's figures, the suite's
thresholds, the disturbed trials left out):

- **A/A back to back**: the ``aa`` sequence cut into consecutive, non-overlapping groups of k trials; each group
  compared with the next (``run --repeat k`` twice, then ``compare``), with the 20 trials before the first group as
  history. A regressed or improved verdict on any figure is a false verdict, either way.
- **Effects on real noise**: the same back-to-back pairs with a delay added to every wake of the second group, the
  delay that moves the wake's geometric mean by +5, +10, +20 or +50 % at the ``aa`` trials' measured level; the
  share of comparisons whose primary figure regressed, and the power curve.
- **Real injected delays**: each ``ab`` block (A B B A … rounds, B with the runtime's injected delay) compared round
  by round as ``ab`` compares, against the history of A's trials before it; 0 % blocks are interleaved A/A.
- **Under load**: the ``load`` blocks, disturbed trials left out and replaced (as ``ab`` does), and the same blocks
  with the disturbed trials kept in their place, to show what the exclusion buys.

    .venv/bin/python -m bench.verdicts [--pool DIR] [--sides 2,3,4] [--plot docs/verdicts-power.png]

Prints markdown tables (docs/verdicts.md holds a run of them) and draws the power curve.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.verdict_pool import DEFAULT_POOL, delay_for, manifests, pool_store, wake_log_means
from substrate_assets.analysis.comparison import Comparison, FigureComparison, Side
from substrate_assets.analysis.measured import Measured
from substrate_assets.analysis.rule import detectable
from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.analysis.verdicts import judge
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import get_suite
from substrate_assets.warehouse.compare_figures import mark_primary, measured_figures, wake_rows
from substrate_assets.warehouse.compare_samples import wake_trials
from substrate_assets.warehouse.compare_trials import History, compare
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.sides import rounds
from substrate_assets.warehouse.trial_writes import load_trials

WAKE = "WakeFirstTouch"
HISTORY = 20
EFFECTS = (5.0, 10.0, 20.0, 50.0)
CURVE = tuple(float(effect) for effect in range(0, 31, 2))
# What a trial costs beside its load through `run`: the runtime's and Locust's start, the Dagster runs that land and
# load it (docs/benchmarks.md: 85 s for 60 s of load).
OVERHEAD_S = 25.0


@dataclass
class Trial:
    trial_id: str
    phase: str
    started: int
    disturbed: bool
    metadata: dict = field(default_factory=dict)


def pool_trials(pool: Path) -> list[Trial]:
    """The pool's completed trials, in time order."""
    return [Trial(manifest["trial_id"], (manifest.get("metadata") or {}).get("phase", "?"), manifest["run_ts"],
                  bool((manifest.get("machine_load") or {}).get("disturbed")), manifest.get("metadata") or {})
            for manifest in manifests(pool) if manifest.get("completed")]


def rate(count: int, total: int) -> str:
    """A share with its 95 % Wilson interval: how much the comparisons counted can say."""
    if not total:
        return "-"
    p, z = count / total, 1.96
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return f"{p * 100:.0f} % ({count}/{total}; {max(0, centre - half) * 100:.0f}–{min(1, centre + half) * 100:.0f})"


def false_verdicts(comparison: Comparison) -> tuple[bool, bool]:
    verdicts = {row.verdict for row in comparison.figures}
    return "regressed" in verdicts, "improved" in verdicts


def false_figures(comparison: Comparison) -> list[str]:
    return [f"{row.figure} {row.verdict} {row.change_pct:+.1f} % (p {row.p_value:.2g})"
            if row.change_pct is not None and row.p_value is not None else f"{row.figure} {row.verdict}"
            for row in comparison.figures if row.verdict in ("regressed", "improved")]


def primary(rows: Iterable[FigureComparison]) -> FigureComparison:
    return next(row for row in rows if row.primary)


def back_to_back(sequence: list[str], k: int, step: int | None = None) -> list[tuple[list[str], Side, Side]]:
    """Consecutive, non-overlapping (history, first group, second group) of a sequence in time order, as `run
    --repeat k` twice runs them: each side a group, at one moment of the machine. A ``step`` under ``2k`` gives
    overlapping comparisons, one from every start."""
    found = []
    for number, start in enumerate(range(HISTORY % (2 * k), len(sequence) - 2 * k + 1, step or 2 * k)):
        if start < 3:
            continue
        history = sequence[max(0, start - HISTORY):start]
        found.append((history, Side("first", tuple(sequence[start:start + k]), group=f"pool-{number}-first-x{k}"),
                      Side("second", tuple(sequence[start + k:start + 2 * k]), group=f"pool-{number}-second-x{k}")))
    return found


def as_rounds(sequence: list[str], k: int, step: int | None = None) -> list[tuple[list[str], Side, Side]]:
    """Consecutive, non-overlapping blocks of ``2k`` trials of a sequence taken as ab takes its rounds (A B, B A, A B,
    …), with the trials before a block as its history: rounds of identical configurations, to which an effect can be
    added on one side. A ``step`` under ``2k`` gives overlapping blocks, one from every start."""
    found = []
    for number, start in enumerate(range(HISTORY % (2 * k), len(sequence) - 2 * k + 1, step or 2 * k)):
        if start < 3:
            continue
        block = sequence[start:start + 2 * k]
        a = [block[2 * r + (r % 2)] for r in range(k)]
        b = [block[2 * r + 1 - (r % 2)] for r in range(k)]
        run = f"pool-rounds-{number:08d}t000000z"
        found.append((sequence[max(0, start - HISTORY):start], Side("A", tuple(a), group=f"{run}-a{k}"),
                      Side("B", tuple(b), group=f"{run}-b{k}")))
    return found


def with_delay(connection, thresholds: Thresholds, history: Sequence[str], baseline: Side, candidate: Side,
               delay_ms: float) -> list[FigureComparison]:
    """The comparison of the two sides with ``delay_ms`` added to every wake of the candidate's trials: the wake
    figures rebuilt from the delayed samples, every other figure as measured; judged as compare judges (rounds as
    rounds)."""
    measured = measured_figures(connection, baseline, candidate, history, thresholds.primary)
    wakes = wake_trials(connection, [*baseline.trial_ids, *candidate.trial_ids, *history])[WAKE]
    delayed = {trial: found.delayed(delay_ms) if trial in candidate.trial_ids else found
               for trial, found in wakes.items()}
    rebuilt = {row.figure: row for row in wake_rows(WAKE, delayed, baseline, candidate, history)}
    rows: list[Measured] = [replace(rebuilt[row.figure], primary=False, baseline_moments=row.baseline_moments,
                                    candidate_moments=row.candidate_moments) if row.figure in rebuilt else row
                            for row in measured]
    return judge(mark_primary(rows, thresholds.primary), thresholds, rounds(baseline, candidate))


def spread_line(connection, name: str, trial_ids: list[str]) -> str:
    """A pool's trials: their primary figure's level and trial-to-trial spread (standard deviation of the logs, and
    the successive-difference spread, which drift does not inflate), beside the plain geometric mean's and p50's."""
    rows = dict(connection.execute(
        "SELECT trial_id, struct_pack(gmean_ms, p50_ms, slow_share) FROM wake_latency_distribution WHERE "
        "list_contains(?::VARCHAR[], trial_id)", [trial_ids]).fetchall())
    ordered = [rows[trial] for trial in trial_ids if trial in rows]

    def spreads(values: list[float]) -> str:
        logs = np.log(values)
        successive = 1.048 * float(np.median(np.abs(np.diff(logs))))
        return f"{np.std(logs, ddof=1) * 100:.1f} % / {successive * 100:.1f} %"

    gmeans, p50s = [row["gmean_ms"] for row in ordered], [row["p50_ms"] for row in ordered]
    shares = [row["slow_share"] for row in ordered if row["slow_share"] is not None]
    return (f"| {name} | {len(ordered)} | {np.median(gmeans):.1f} | {spreads(gmeans)} | {np.median(p50s):.1f} | "
            f"{spreads(p50s)} | {np.mean(shares) if shares else float('nan'):.3f} |")


def path_gmean_spread(connection, thresholds: Thresholds, trial_ids: list[str]) -> tuple[float, float]:
    """The primary figure's trial-to-trial spread over a sequence of trials (each at the sequence's common mix)."""
    side = Side("all", tuple(trial_ids))
    rows = measured_figures(connection, side, side, (), thresholds.primary)
    values = np.log(next(row for row in rows if row.primary).baseline)
    return float(np.std(values, ddof=1)), 1.048 * float(np.median(np.abs(np.diff(values))))


def length_table(connection, trial_ids: list[str], full_s: float) -> None:
    """The primary figure's spread over the aa trials had they lasted only their first 10 or 20 s (their wakes
    from the first one on), against their whole: what a shorter trial gives up, and what its time buys."""
    from substrate_assets.analysis.wake_figures import TrialWakes, common_mix, mixed_gmean

    rows = connection.execute(
        "SELECT trial_id, ts - min(ts) OVER (PARTITION BY trial_id) AS at, latency_ms, wake_path FROM wake_samples "
        "WHERE list_contains(?::VARCHAR[], trial_id) AND latency_ms IS NOT NULL", [trial_ids]).fetchall()
    print("\n## Trial length\n")
    print("| first seconds of each trial | wakes a trial (median) | path gmean spread (SD of logs) | trials a side "
          "for the same detectable change (relative) | load minutes for it (relative) |")
    print("|---|---|---|---|---|")
    results = []
    for span in (10.0, 20.0, full_s):
        by_trial: dict[str, tuple[list[float], list[str | None]]] = {}
        for trial_id, at, latency, path in rows:
            if at < span:
                found = by_trial.setdefault(trial_id, ([], []))
                found[0].append(latency)
                found[1].append(path)
        trials = [TrialWakes.of(np.array(latencies), paths) for latencies, paths in by_trial.values()]
        mix = common_mix(trials)
        values = [mixed_gmean(trial, mix) for trial in trials] if mix else []
        logs = np.log([value for value in values if value is not None])
        results.append((span, int(np.median([len(trial.latencies) for trial in trials])), float(np.std(logs, ddof=1))))
    _, _, full_spread = results[-1]
    for span, wakes, spread in results:
        trials = (spread / full_spread) ** 2
        print(f"| {span:.0f} s | {wakes} | {spread * 100:.1f} % | {trials:.2f} | "
              f"{trials * (span + OVERHEAD_S) / (full_s + OVERHEAD_S):.2f} |")


DESIGNS = {"back to back (`run --repeat k` twice)": back_to_back, "rounds (`ab --rounds k`)": as_rounds}


def every_start(connection, thresholds: Thresholds, sequence: list[str], sides: list[int]) -> None:
    """The primary figure's A/A comparisons from every start of the sequence: overlapping, so not independent, but
    many more than the disjoint ones, enough to see whether its p-values fall below a level as often as they should."""
    print("\n## Identical trials, a comparison from every start (overlapping): "
          "is the primary figure's test calibrated?\n")
    print("| design | trials a side | comparisons | false verdicts (primary) | p below its level | p < 0.1 | p < 0.2 "
          "| p < 0.5 |")
    print("|---|---|---|---|---|---|---|---|")
    level = thresholds.false_alarm_rate * thresholds.primary_share
    for design, cut in DESIGNS.items():
        for k in sides:
            rows = [primary(compare(connection, first, second, thresholds,
                                    History(tuple(history), "the trials before")).figures)
                    for history, first, second in cut(sequence, k, 1)]
            p_values = np.array([row.p_value for row in rows if row.p_value is not None])
            false = sum(row.verdict in ("regressed", "improved") for row in rows)
            print(f"| {design} | {k} | {len(rows)} | {rate(false, len(rows))} | "
                  + " | ".join(f"{np.mean(p_values < cut_at) * 100:.0f} % (expected {cut_at * 100:.0f} %)"
                               for cut_at in (level, 0.1, 0.2, 0.5)) + " |", flush=True)


def aa_tables(connection, thresholds: Thresholds, sequence: list[str], sides: list[int], delays: dict[float, int],
              curve_delays: dict[float, int]) -> list[dict]:
    print("\n## Identical trials in time order: false verdicts, and effects added to real noise\n")
    print("| design | trials a side | comparisons | false verdicts (any figure) | false regressed | false improved | "
          "primary no change | primary inconclusive | stated could-detect (median) | "
          + " | ".join(f"+{effect:g} % found" for effect in EFFECTS) + " |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * len(EFFECTS))
    curve, culprits = [], []
    for design, cut in DESIGNS.items():
        for k in sides:
            splits = cut(sequence, k)
            false_any = false_up = false_down = no_change = unsure = 0
            stated, found, p50_found = [], Counter(), Counter()
            for history, first, second in splits:
                comparison = compare(connection, first, second, thresholds,
                                     History(tuple(history), "the trials before"))
                up, down = false_verdicts(comparison)
                if up or down:
                    culprits.append(f"{design.split(' (')[0]}, {k} a side: " + "; ".join(false_figures(comparison)))
                false_any += up or down
                false_up += up
                false_down += down
                main = primary(comparison.figures)
                no_change += main.verdict == "no change"
                unsure += main.verdict == "inconclusive"
                if main.detectable is not None:
                    stated.append(main.detectable)
                for effect, delay in {**delays, **curve_delays}.items():
                    rows = with_delay(connection, thresholds, history, first, second, delay)
                    hit = primary(rows).verdict == "regressed"
                    if effect in delays:
                        found[effect] += hit
                        p50 = next(row for row in rows if row.figure == f"{WAKE} p50")
                        p50_found[effect] += p50.verdict == "regressed"
                    if effect in curve_delays:
                        curve.append({"design": design.split(" (")[0], "k": k, "effect": effect, "found": hit})
            total = len(splits)
            print(f"| {design} | {k} | {total} | {rate(false_any, total)} | {rate(false_up, total)} | "
                  f"{rate(false_down, total)} | {rate(no_change, total)} | {rate(unsure, total)} | "
                  f"{np.median(stated) if stated else float('nan'):.1f} % | "
                  + " | ".join(f"{rate(found[effect], total)} (p50: {p50_found[effect]}/{total})"
                               for effect in EFFECTS) + " |", flush=True)
    if culprits:
        print("\nThe false verdicts, figure by figure:\n")
        for line in culprits:
            print(f"- {line}")
    return curve


def block_sides(trials: list[Trial], phase: str, keep_disturbed: bool) -> list[tuple[int, float, list[str],
                                                                                     list[str], int]]:
    """Each block of a phase: (block, effect, a trials, b trials, disturbed left out), a trial per round and side:
    its replacement when it was disturbed (or, keeping them, the disturbed trial itself)."""
    found = []
    by_block: dict[int, list[Trial]] = {}
    for trial in trials:
        if trial.phase == phase:
            by_block.setdefault(int(trial.metadata["block"]), []).append(trial)
    for block, members in sorted(by_block.items()):
        effect = float(members[0].metadata["effect_pct"])
        chosen: dict[tuple[int, str], Trial] = {}
        left_out = 0
        for trial in members:  # in time order: a replacement comes after the trial it replaces
            slot = (int(trial.metadata["round"]), trial.metadata["side"])
            if trial.disturbed:
                left_out += 1
            if keep_disturbed:
                chosen.setdefault(slot, trial)
            elif not trial.disturbed:
                chosen[slot] = trial
        rounds = sorted({number for number, _ in chosen})
        complete = [number for number in rounds if (number, "a") in chosen and (number, "b") in chosen]
        found.append((block, effect, [chosen[(n, "a")].trial_id for n in complete],
                      [chosen[(n, "b")].trial_id for n in complete], left_out))
    return found


def ab_table(connection, thresholds: Thresholds, trials: list[Trial], phase: str, title: str) -> list[dict]:
    print(f"\n## {title}\n")
    print("| effect (B's injected delay) | blocks | disturbed trials left out | primary change (median) | "
          "rounds' correlation (median) | primary regressed | false verdicts (any figure) | "
          "the same blocks unpaired: regressed |")
    print("|---|---|---|---|---|---|---|---|")
    baseline_trials = [trial for trial in trials if not trial.disturbed and
                       (trial.phase == "aa" or trial.metadata.get("side") == "a")]
    points = []
    for keep in ((False, True) if phase == "load" else (False,)):
        rows_by_effect: dict[float, list] = {}
        for block, effect, a_ids, b_ids, left_out in block_sides(trials, phase, keep):
            if len(a_ids) < 2:
                continue
            first = min(trial.started for trial in trials if trial.trial_id in a_ids + b_ids)
            history = [trial.trial_id for trial in baseline_trials if trial.started < first][-HISTORY:]
            # Named as ab names its two groups, so they are judged round by round as ab's are.
            run = f"pool-{phase}-{block:08d}t000000z"
            base = Side(f"block {block} a", tuple(a_ids), group=f"{run}-a{len(a_ids)}")
            cand = Side(f"block {block} b", tuple(b_ids), group=f"{run}-b{len(b_ids)}")
            paired = compare(connection, base, cand, thresholds, History(tuple(history), "A's trials before"))
            unpaired = compare(connection, replace(base, group=None), replace(cand, group=None), thresholds,
                               History(tuple(history), "A's trials before"))
            rows_by_effect.setdefault(effect, []).append((paired, unpaired, left_out))
        for effect, results in sorted(rows_by_effect.items()):
            mains = [primary(paired.figures) for paired, _, _ in results]
            changes = [row.change_pct for row in mains if row.change_pct is not None]
            correlations = [row.correlation for row in mains if row.correlation is not None]
            regressed = sum(row.verdict == "regressed" for row in mains)
            false_any = sum(any(false_verdicts(paired)) for paired, _, _ in results)
            unpaired_hits = sum(primary(unpaired.figures).verdict == "regressed" for _, unpaired, _ in results)
            left_out = sum(count for _, _, count in results)
            label = f"+{effect:g} %" + (" (disturbed kept)" if keep else "")
            print(f"| {label} | {len(results)} | {left_out if not keep else 0} | "
                  f"{np.median(changes) if changes else float('nan'):+.1f} % | "
                  f"{np.median(correlations) if correlations else float('nan'):+.2f} | "
                  f"{rate(regressed, len(results)) if effect else '-'} | "
                  f"{rate(false_any, len(results)) if not effect else '-'} | "
                  f"{rate(unpaired_hits, len(results)) if effect else '-'} |", flush=True)
            if not keep and effect:
                points += [{"effect": float(np.median(changes)), "k": len(a_ids), "found": row.verdict == "regressed",
                            "real": True} for row in mains]
    return points


def draw(curve: list[dict], real: list[dict], path: Path) -> None:
    """The power curve of each design, side by side: the share of comparisons whose primary figure regressed, by the
    true change added to real trials (lines, one per trials a side), with the real injected delays of the ab blocks
    (diamonds) beside the rounds' curve."""
    import altair as alt
    import polars as pl

    from substrate_assets.report.plots import png

    frame = pl.DataFrame(curve).group_by("design", "k", "effect").agg(
        pl.col("found").mean().alias("found"), pl.len().alias("comparisons")).sort("design", "k", "effect")
    frame = frame.with_columns(pl.format("{} a side", pl.col("k")).alias("trials"))
    x = alt.X("effect:Q", title="true change of the wake's path gmean (%)", scale=alt.Scale(domain=[0, 30]))
    y = alt.Y("found:Q", title="comparisons: regressed", scale=alt.Scale(domain=[0, 1]))
    colour = alt.Color("trials:N", title="trials a side")
    eighty = alt.Chart(pl.DataFrame({"y": [0.8]})).mark_rule(strokeDash=[4, 4], color="#777").encode(y="y:Q")
    panels = []
    for design in ("rounds", "back to back"):
        lines = alt.Chart(frame.filter(pl.col("design") == design)).mark_line(point=True).encode(
            x=x, y=y, color=colour, tooltip=["k", "effect", "found", "comparisons"])
        layers = [lines, eighty]
        if design == "rounds" and real:
            found = pl.DataFrame(real).group_by("k", "effect").agg(pl.col("found").mean().alias("found"),
                                                                   pl.len().alias("blocks"))
            found = found.with_columns(pl.format("{} a side", pl.col("k")).alias("trials"))
            layers.append(alt.Chart(found).mark_point(shape="diamond", size=160, filled=True).encode(
                x=x, y=y, color=colour, tooltip=["k", "effect", "found", "blocks"]))
        title = ("ab rounds (A B, B A, …)" if design == "rounds" else "two groups back to back (run --repeat)")
        panels.append(alt.layer(*layers).properties(width=360, height=300, title=title))
    chart = alt.hconcat(*panels).properties(
        title="Power of the rule on this machine's real trials: a delay added to one side's wakes (lines), real "
        "injected delays (diamonds); dashed: 80 %")
    path.write_bytes(png(chart))
    print(f"\npower curve drawn: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL)
    parser.add_argument("--suite", default="quick-smoke")
    parser.add_argument("--sides", default="2,3,4", help="Trials a side of the back-to-back comparisons.")
    parser.add_argument("--plot", type=Path, help="Where to draw the power curve (PNG).")
    args = parser.parse_args()
    thresholds = get_suite(args.suite).compare
    sides = [int(k) for k in args.sides.split(",")]
    started = time.perf_counter()
    trials = pool_trials(args.pool)
    aa = [trial.trial_id for trial in trials if trial.phase == "aa" and not trial.disturbed]
    sampled = wake_log_means(args.pool)
    delays = {effect: delay_for(effect, sampled) for effect in EFFECTS}
    curve_delays = {effect: delay_for(effect, sampled) for effect in CURVE}
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "w.duckdb"
        with connect(path) as connection:
            load_trials(connection, [TrialDirectory(directory) for directory in pool_store(args.pool).trial_dirs()])
            build_marts(connection)
        with connect(path, read_only=True) as connection:
            counts = Counter((trial.phase, trial.disturbed) for trial in trials)
            print(f"## Pool ({args.pool}): {len(trials)} completed trials of {args.suite}; "
                  + ", ".join(f"{phase} {counts[(phase, False)]} (+{counts[(phase, True)]} disturbed)"
                              for phase in ("aa", "ab", "load")))
            print("\nDelays that move the aa trials' wake geometric mean by "
                  + ", ".join(f"+{effect:g} %: {delay} ms" for effect, delay in delays.items()))
            print("\n| trials | n | gmean median (ms) | gmean spread (SD / successive) | p50 median (ms) | "
                  "p50 spread (SD / successive) | slow share |")
            print("|---|---|---|---|---|---|---|")
            print(spread_line(connection, "aa, in time order", aa))
            for phase in ("ab", "load"):
                quiet_a = [t.trial_id for t in trials if t.phase == phase and t.metadata.get("side") == "a"
                           and not t.disturbed]
                if len(quiet_a) > 2:
                    print(spread_line(connection, f"{phase}, A side", quiet_a))
            spread, successive = path_gmean_spread(connection, thresholds, aa)
            print(f"\nThe primary figure (path gmean) over the aa trials: SD of logs {spread * 100:.1f} % (the drift "
                  f"of the machine over the sequence and the trials' own noise), successive-difference spread "
                  f"{successive * 100:.1f} % (mostly the trials' own)")
            for k in sides:
                within = successive * math.sqrt(2 / k)
                drifting = math.sqrt(2 * max(0.0, spread ** 2 - successive ** 2) + successive ** 2 * 2 / k)
                level, margin = thresholds.false_alarm_rate * thresholds.primary_share, \
                    math.log1p(thresholds.latency_change_pct / 100)
                print(f"  {k} a side, history of 20: rounds could detect "
                      f"{math.expm1(detectable(within, 2 * (k - 1) + HISTORY - 1, level, margin)) * 100:.1f} %, "
                      f"groups back to back "
                      f"{math.expm1(detectable(drifting, HISTORY - 1, level, margin)) * 100:.1f} %")
            length_table(connection, aa, float(get_suite(args.suite).duration_s))
            curve = aa_tables(connection, thresholds, aa, sides, delays, curve_delays)
            every_start(connection, thresholds, aa, sides)
            real = ab_table(connection, thresholds, trials, "ab", "Real injected delays, ab rounds (quiet)")
            real += ab_table(connection, thresholds, trials, "load",
                             "Real injected delays, ab rounds under a background-load schedule")
    if args.plot and curve:
        draw(curve, real, args.plot)
    print(f"\n(analysis took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
