"""A comparison as people and programs read it: figures rounded to what they mean (ms to 0.1, ratios to 4 dp,
densities to 2 dp, p-values to 2 significant digits) for tables and markdown, unrounded in CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from substrate_assets.analysis.comparison import Comparison, FigureComparison, Thresholds, lost, regressed

FIELDS = ("figure", "unit", "better", "baseline", "candidate", "change_pct", "difference_low", "difference_high",
          "p_value", "baseline_n", "candidate_n", "verdict", "why")
DIGITS_BY_UNIT = {"ms": 1, "ratio": 4, "users": 2}


def figure_text(value: float | None, unit: str, signed: bool = False) -> str:
    """A figure rounded to what it means: ms to 0.1, ratios to 4 dp, densities and users to 2 dp."""
    if value is None:
        return "null"
    return f"{value:{'+' if signed else ''}.{DIGITS_BY_UNIT.get(unit, 2)}f}"


def percent_text(value: float | None) -> str:
    return "null" if value is None else f"{value:+.1f} %"


def p_value_text(value: float | None) -> str:
    """Two significant digits; a p-value below what a double holds is ``< 1e-300``."""
    if value is None:
        return "null"
    if value < 1e-300:
        return "< 1e-300"
    return f"{value:.2g}"


def interval_text(row: FigureComparison) -> str:
    if row.difference is None:
        return "null"
    return (f"[{figure_text(row.difference.low, row.unit, signed=True)}, "
            f"{figure_text(row.difference.high, row.unit, signed=True)}]")


def shown_row(row: FigureComparison) -> list[str]:
    return [row.figure, figure_text(row.baseline, row.unit), figure_text(row.candidate, row.unit),
            percent_text(row.change_pct), interval_text(row), p_value_text(row.p_value),
            f"{row.baseline_n} / {row.candidate_n}", row.verdict or row.why or "not measured"]


SHOWN_COLUMNS = ["figure", "baseline", "candidate", "change", "95 % CI of Δ", "p (Mann–Whitney U)",
                 "n (baseline / candidate)", "verdict"]


def plain_row(row: FigureComparison) -> dict[str, Any]:
    values = asdict(row)
    interval = values.pop("difference")
    values["difference_low"] = interval["low"] if interval else None
    values["difference_high"] = interval["high"] if interval else None
    return {name: values[name] for name in FIELDS}


def as_json(comparison: Comparison) -> str:
    return json.dumps({
        "baseline": {"label": comparison.baseline.label, "trial_ids": list(comparison.baseline.trial_ids)},
        "candidate": {"label": comparison.candidate.label, "trial_ids": list(comparison.candidate.trial_ids)},
        "thresholds": comparison.thresholds.model_dump(),
        "configuration_differences": comparison.differences,
        "figures": [plain_row(row) for row in comparison.figures],
        "regressed": [row.figure for row in regressed(comparison.figures)],
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
             f"{_markdown_cell(comparison.candidate.label)}", ""]
    lines += [f"| {' | '.join(SHOWN_COLUMNS)} |", f"|{'---|' * len(SHOWN_COLUMNS)}"]
    for row in comparison.figures:
        cells = shown_row(row)
        if row.verdict == "regressed":
            cells[-1] = "**regressed**"
        lines.append(f"| {' | '.join(_markdown_cell(cell) for cell in cells)} |")
    lines += ["", summary(comparison, source)]
    lines += [f"- configuration differs: {_markdown_cell(difference)}" for difference in comparison.differences]
    return "\n".join(lines) + "\n"


def summary(comparison: Comparison, source: str) -> str:
    worse = regressed(comparison.figures)
    thresholds: Thresholds = comparison.thresholds
    rules = (f"{source}: latency ±{thresholds.latency_change_pct:g} % (p50: p < {thresholds.p_value:g}), densities "
             f"and capacity ±{thresholds.density_change_pct:g} %, failure ratio ±{thresholds.failure_ratio_change:g}")
    gone = lost(comparison.figures)
    lines = [f"Regressed: {', '.join(row.figure for row in worse)}" if worse else "No figure regressed"]
    if gone:
        lines.append(f"not measured by the candidate: {', '.join(row.figure for row in gone)}")
    return f"{'; '.join(lines)} ({rules})."


def gate_fails(comparison: Comparison) -> bool:
    """What a CI gate stops on: a figure that regressed, or one the baseline measured and the candidate lost."""
    return bool(regressed(comparison.figures) or lost(comparison.figures))
