"""A comparison as people and programs read it: figures shown by the one rule of :mod:`.figures` (ms to 0.1,
ratios to 4 dp, shares to 3 dp, densities to 2 dp, changes to 0.1 %, p-values to 2 significant digits, a dash for
null) in tables, markdown and the reasons given, unrounded in CSV and JSON; and the comparison's outcome, which a CI
gate reads from the exit code."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from typing import Any, Literal

from substrate_assets.analysis.comparison import (
    Comparison,
    FigureComparison,
    Interval,
    improved,
    inconclusive,
    lost,
    regressed,
    unjudged,
)
from substrate_assets.analysis.verdicts import FRACTION_UNITS, SHOWN_REACH_PCT, beyond_showing
from substrate_assets.report.figures import MISSING, change, figure, percent

FIELDS = ("figure", "unit", "better", "scale", "primary", "baseline", "candidate", "change_pct", "difference",
          "interval_low", "interval_high", "equivalence_interval_low", "equivalence_interval_high", "noise",
          "noise_df", "drift", "correlation", "detectable", "p_value", "level", "threshold", "baseline_trials",
          "candidate_trials", "history_trials", "trials_needed", "verdict", "why", "note")
Outcome = Literal["regressed", "inconclusive", "no regression"]
# What `substrate-bench compare` exits with for each outcome: a CI gate can tell them apart.
EXIT_CODES: dict[Outcome, int] = {"no regression": 0, "regressed": 3, "inconclusive": 4}


def figure_text(value: float | None, unit: str, signed: bool = False) -> str:
    """A figure of ``unit`` as :func:`~.figures.figure` shows it."""
    return figure(value, unit=unit, signed=signed)


def percent_text(value: float | None) -> str:
    return change(value)


def p_value_text(value: float | None) -> str:
    return figure(value, "p_value")


def change_text(row: FigureComparison) -> str:
    """The change as the figure's scale reads it: a percentage, or (difference scale) the unit's signed amount."""
    if row.scale == "difference" and row.unit in FRACTION_UNITS:
        return figure_text(row.difference, row.unit, signed=True)
    return percent_text(row.change_pct)


def _interval(interval: Interval | None, scale: str, unit: str) -> str:
    if interval is None:
        return MISSING
    if scale == "ratio":
        return f"[{percent_text(interval.low)}, {percent_text(interval.high)}]"
    return f"[{figure_text(interval.low, unit, signed=True)}, {figure_text(interval.high, unit, signed=True)}]"


def interval_text(row: FigureComparison) -> str:
    return _interval(row.interval, row.scale, row.unit)


def spread_text(spread: float | None, scale: str, unit: str) -> str:
    """A trial-to-trial spread: a coefficient of variation in percent on the ratio scale, else in the unit."""
    if spread is None:
        return "unknown"
    return percent(spread * 100) if scale == "ratio" else f"{figure_text(spread, unit)} {unit}"


def noise_text(row: FigureComparison) -> str:
    if row.noise is None:
        return "unknown"
    if row.counted:  # the dispersion over binomial, from the trials' scatter
        return f"dispersion {figure(row.noise, unit='users')} (df {_df(row.noise_df)})"
    drift = f" + drift {spread_text(row.drift, row.scale, row.unit)}" if row.drift is not None else ""
    return f"{spread_text(row.noise, row.scale, row.unit)}{drift} (df {_df(row.noise_df)})"


def _df(df: float | None) -> str:
    return "∞" if df is None or df == float("inf") else f"{df:.0f}"


def detectable_text(row: FigureComparison) -> str:
    if row.detectable is None:
        return "unknown"
    if beyond_showing(row.detectable, row.scale, row.unit):
        return "none: too few trials"
    if row.scale == "ratio":
        return f"≥ {percent(row.detectable)}"
    return f"≥ {figure_text(row.detectable, row.unit)}"


def threshold_text(row: FigureComparison) -> str:
    """The suite's threshold for the figure as the suite states it: a percentage, or the unit's amount for a
    failure ratio or a share."""
    if row.threshold is None:
        return MISSING
    return f"±{row.threshold:g}" if row.unit in FRACTION_UNITS else f"±{row.threshold:g} %"


def why_text(row: FigureComparison) -> str | None:
    """Why the figure has no verdict of change or no change: the reason the comparison gave (a side without the
    figure, too few samples), or for an inconclusive figure what its interval, its level and the trials could
    tell."""
    if row.why is not None or row.verdict != "inconclusive" or row.equivalence_interval is None:
        return row.why
    interval = _interval(row.equivalence_interval, row.scale, row.unit)
    said = (f"neither beyond the threshold's {threshold_text(row)} at p < {figure(row.level, 'p_value')} nor inside "
            f"it (90 % interval {interval})")
    if row.counted:  # no detectable change a side of trials would reach
        return said
    if row.detectable is None:
        detects = "unknown"
    elif beyond_showing(row.detectable, row.scale, row.unit):
        detects = f"no change it could show ({_past_showing(row)})"
    else:
        detects = f"≥ {_reach(row)}"
    more = f"about {row.trials_needed} trials a side would settle it" if row.trials_needed else \
        "more than 100 trials a side would be needed to settle it"
    return (f"{said}; could detect {detects} with {row.baseline_trials} and {row.candidate_trials} trials: {more}")


def _past_showing(row: FigureComparison) -> str:
    """What :func:`beyond_showing` means for the figure, in words."""
    return f"none under +{SHOWN_REACH_PCT:,.0f} %" if row.scale == "ratio" else f"a {row.unit} moves at most 1"


def notes(comparison: Comparison) -> list[str]:
    """The comparison's notes on its data (trials left out, disturbed trials kept, a primary figure not measured),
    then those its figures tell: a primary figure whose sides ran at moments of a drifting machine (how much the
    moments alone move it, counted in its error), and the rounds' correlation of the primary figure."""
    lines = list(comparison.warnings)
    lines += [f"{row.figure}'s history drifted: groups run at different moments differ by about "
              f"{percent(math.expm1(row.drift) * 100) if row.scale == 'ratio' else figure_text(row.drift, row.unit)}"
              f" on their own (and consecutive trials by {spread_text(row.noise, row.scale, row.unit)}), which more "
              "trials a side do not shrink: it is counted in the change's interval and detectable change. Rounds (ab) "
              "cancel it"
              for row in comparison.figures if row.primary and row.drift is not None and row.noise is not None]
    primary = next((row for row in comparison.figures if row.primary and row.correlation is not None), None)
    if comparison.rounds and primary is not None:
        lines.append(f"analysed as {comparison.rounds} rounds (the groups of one ab run): {primary.figure}'s "
                     f"correlation between a round's two trials is {primary.correlation:+.2f}")
    return lines


def _reach(row: FigureComparison) -> str:
    assert row.detectable is not None
    if row.scale == "ratio":
        return percent(row.detectable)
    return f"{figure_text(row.detectable, row.unit)} {row.unit}"


def trials_text(row: FigureComparison) -> str:
    return f"{row.baseline_trials} / {row.candidate_trials} / {row.history_trials}"


def level_text(row: FigureComparison) -> str:
    return figure(row.level, "p_value")


def figure_name(row: FigureComparison) -> str:
    """The figure's name, starred when it is primary."""
    return f"{row.figure} *" if row.primary else row.figure


def shown_row(row: FigureComparison) -> list[str]:
    return [figure_name(row), figure_text(row.baseline, row.unit), figure_text(row.candidate, row.unit),
            change_text(row), interval_text(row), noise_text(row), detectable_text(row), p_value_text(row.p_value),
            level_text(row), trials_text(row), row.verdict or why_text(row) or "not measured"]


SHOWN_COLUMNS = ["figure", "baseline", "candidate", "change", "95 % CI", "noise", "could detect", "p", "level",
                 "trials", "verdict"]
# What the short column names stand for, printed under every table of a comparison.
COLUMN_LEGEND = ("*: a primary figure, most of the false-alarm budget; 95 % CI: the change's interval from the "
                 "trials' noise; noise: trial-to-trial spread (a CV, or the dispersion of a count: the failure "
                 "ratio, the slow share), the drift between the sides' moments where the history drifted, and the "
                 "degrees of freedom; could detect: the change the rule finds with 80 % power; p: the test of the "
                 "trials' values, a verdict when below its level and the change reaches the threshold; no change: "
                 "the 90 % interval inside ±threshold; trials: baseline / candidate / history.")


def plain_row(row: FigureComparison) -> dict[str, Any]:
    values = asdict(row)
    for name in ("interval", "equivalence_interval"):
        interval = values.pop(name)
        values[f"{name}_low"] = interval["low"] if interval else None
        values[f"{name}_high"] = interval["high"] if interval else None
    values["why"] = why_text(row)
    # JSON has no infinity: a change past what a double holds (a bar no data could reach) is written "inf".
    return {name: "inf" if values[name] == math.inf else values[name] for name in FIELDS}


def outcome(comparison: Comparison) -> Outcome:
    """What a CI gate stops on: ``regressed`` when a figure regressed, or the baseline measured one the candidate
    lost; else ``inconclusive`` when a figure both sides measured got no verdict of change or no change — the data
    cannot tell, or cannot be judged (a p99 of too few samples) — so exit 0 means every figure was judged; else
    ``no regression``."""
    if regressed(comparison.figures) or lost(comparison.figures):
        return "regressed"
    return "inconclusive" if inconclusive(comparison.figures) or unjudged(comparison.figures) else "no regression"


def as_json(comparison: Comparison) -> str:
    return json.dumps({
        "baseline": {"label": comparison.baseline.label, "trial_ids": list(comparison.baseline.trial_ids)},
        "candidate": {"label": comparison.candidate.label, "trial_ids": list(comparison.candidate.trial_ids)},
        "history": comparison.history,
        "thresholds": comparison.thresholds.model_dump(),
        "configuration_differences": comparison.differences,
        "paired": comparison.paired,
        "warnings": notes(comparison),
        "outcome": outcome(comparison),
        "figures": [plain_row(row) for row in comparison.figures],
        "primary": [row.figure for row in comparison.figures if row.primary],
        "regressed": [row.figure for row in regressed(comparison.figures)],
        "improved": [row.figure for row in improved(comparison.figures)],
        "inconclusive": [row.figure for row in inconclusive(comparison.figures)],
        "unjudged": [row.figure for row in unjudged(comparison.figures)],
        "lost": [row.figure for row in lost(comparison.figures)],
    }, indent=2, allow_nan=False)


def as_csv(comparison: Comparison) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in comparison.figures:
        writer.writerow({key: "" if value is None else value for key, value in plain_row(row).items()})
    return text.getvalue()


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def as_markdown(comparison: Comparison, source: str) -> str:
    lines = [f"**Baseline** {_markdown_cell(comparison.baseline.label)} · **candidate** "
             f"{_markdown_cell(comparison.candidate.label)}"
             + (f" · **history** {_markdown_cell(comparison.history)}" if comparison.history else ""), ""]
    lines += [f"| {' | '.join(SHOWN_COLUMNS)} |", f"|{'---|' * len(SHOWN_COLUMNS)}"]
    for row in comparison.figures:
        cells = shown_row(row)
        if row.verdict in ("regressed", "inconclusive"):
            why = why_text(row)
            cells[-1] = f"**{row.verdict}**" + (f": {why}" if why else "")
        lines.append(f"| {' | '.join(_markdown_cell(cell) for cell in cells)} |")
    lines += ["", f"_{COLUMN_LEGEND}_", "", summary(comparison, source)]
    lines += [f"- configuration differs: {_markdown_cell(difference)}" for difference in comparison.differences]
    lines += [f"- note: {_markdown_cell(warning)}" for warning in notes(comparison)]
    return "\n".join(lines) + "\n"


def rules(comparison: Comparison, source: str) -> str:
    thresholds = comparison.thresholds
    return (f"{source}: latency ±{thresholds.latency_change_pct:g} %, densities and capacity "
            f"±{thresholds.density_change_pct:g} %, failure ratio ±{thresholds.failure_ratio_change:g}, shares "
            f"±{thresholds.share_change:g}; a false-alarm rate of {thresholds.false_alarm_rate:g}, "
            f"{thresholds.primary_share * 100:.0f} % of it on the primary figures")


def summary(comparison: Comparison, source: str) -> str:
    """One line: what regressed or improved, what was lost, what the data cannot tell or could not judge, and the
    rules it was judged by."""
    rows = comparison.figures
    worse, better, gone = regressed(rows), improved(rows), lost(rows)
    unsure, unseen = inconclusive(rows), unjudged(rows)
    lines = [f"Regressed: {', '.join(row.figure for row in worse)}" if worse else "No figure regressed"]
    if better:
        lines.append(f"improved: {', '.join(row.figure for row in better)}")
    if gone:
        lines.append(f"not measured by the candidate: {', '.join(row.figure for row in gone)}")
    if unsure:
        lines.append(f"inconclusive: {', '.join(row.figure for row in unsure)}")
    if unseen:
        lines.append(f"not judged: {', '.join(row.figure for row in unseen)}")
    return f"{'; '.join(lines)} ({rules(comparison, source)})."


def settling_advice(comparison: Comparison) -> str | None:
    """What would settle the inconclusive figures: trials a side, from each figure's noise (or a first repeat)."""
    unsure = inconclusive(comparison.figures)
    if not unsure:
        return None
    if all(row.noise is None for row in unsure):
        return "no noise estimate: repeat each side (at least 2 trials a side), or build a history of 3 trials"
    primary = [row for row in unsure if row.primary and row.noise is not None]
    chosen = primary or [row for row in unsure if row.noise is not None]
    needed = [row.trials_needed for row in chosen]
    most = max((n for n in needed if n is not None), default=None)
    which = "the primary figures" if primary else "the inconclusive figures"
    if most is None or None in needed:
        return f"more than 100 trials a side would be needed to settle {which} at their thresholds"
    return f"about {most} trials a side would settle {which}: with them, a comparison that changed nothing says so"
