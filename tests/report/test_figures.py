"""One rule shows a figure to a person (report/figures.py): the command line's tables, the HTML report, the
comparisons' text and the Dagster metadata all read a figure the same way."""

import math

import pytest

from substrate_assets.analysis.comparison import FigureComparison, Interval
from substrate_assets.cli.output import shown
from substrate_assets.defs.warehouse.metadata import preview_markdown
from substrate_assets.report.figures import MISSING, change, figure, percent, rounded
from substrate_assets.report.html import table
from substrate_assets.report.verdict_text import (
    change_text,
    figure_text,
    interval_text,
    p_value_text,
    percent_text,
    spread_text,
    why_text,
)

CASES = [(748.7297, "p50_ms"), (1234.56, "wake_max_ms"), (0.012345678, "failure_ratio"), (0.35555, "slow_share"),
         (12.3456, "actors_per_node"), (21.94, "change_pct"), (0.000312345, "p_value"), (None, "p50_ms"),
         (48000, "n_wakes"), (3, "points"), (1796593951, "run_start"), (1796593951, "timestamp"),
         (4.0, "actors_per_node")]


@pytest.mark.parametrize(("value", "column"), CASES)
def test_a_figure_reads_the_same_in_a_table_a_preview_and_a_page(value, column):
    expected = figure(value, column)
    assert shown(value, column) == expected
    assert preview_markdown([column], [{column: value}, {column: value}]).splitlines()[2] == f"| {expected} |"
    assert f">{expected}</td>" in str(table([{column: value}]))


@pytest.mark.parametrize(("value", "unit", "text"), [
    (748.7297, "ms", "748.7"), (1234.56, "ms", "1,234.6"), (0.012345678, "ratio", "0.0123"),
    (0.35555, "share", "0.356"), (12.3456, "users", "12.35"), (4.0, "actors", "4.00"), (3.5, "actors/vCPU", "3.50"),
    (None, "ms", MISSING)])
def test_a_comparisons_figures_follow_the_same_rule(value, unit, text):
    assert figure_text(value, unit) == text == figure(value, unit=unit)


def test_changes_p_values_and_sizes_in_percent():
    assert percent_text(21.94) == change(21.94) == "+21.9 %" == figure(21.94, "change_pct")
    assert percent_text(-3.04) == "-3.0 %" and percent_text(math.inf) == "+∞ %" and percent_text(None) == MISSING
    assert percent(12.345) == "12.3 %" and percent(None) == MISSING and percent(math.inf) == "∞ %"
    assert change(-0.04) == "+0.0 %" and figure(-0.00004, "failure_ratio") == "0.0000" and change(-math.inf) == "-∞ %"
    assert p_value_text(0.000312345) == "0.00031" and p_value_text(1e-320) == "< 1e-300" and \
        p_value_text(0.0) == "< 1e-300"
    assert figure(0.0123, unit="ratio", signed=True) == "+0.0123" and figure(-2.5, unit="ms", signed=True) == "-2.5"
    assert spread_text(0.0523, "ratio", "ms") == "5.2 %" and spread_text(0.004, "difference", "ratio") == \
        "0.0040 ratio" and spread_text(None, "ratio", "ms") == "unknown"
    assert rounded(0.35555, "slow_share") == 0.356 and rounded(748.7297, "p50_ms") == 748.7 and rounded(None) is None


def _row(**given: object) -> FigureComparison:
    fields = {"figure": "wake p50", "unit": "ms", "better": "lower", "scale": "ratio", "baseline": 100.0,
              "candidate": 104.0, "change_pct": 4.0, "difference": 4.0, "interval": Interval(-2.5, 11.25),
              "noise": 0.05, "noise_df": 8.0, "detectable": 14.0, "p_value": 0.21, "baseline_trials": 3,
              "candidate_trials": 3, "history_trials": 8, "verdict": "inconclusive", "level": 0.0125,
              "equivalence_interval": Interval(-1.0, 9.0), "threshold": 5.0, "trials_needed": 12}
    return FigureComparison(**{**fields, **given})


def test_epoch_seconds_read_without_separators():
    assert figure(1796593951, "run_start") == figure(1796593951, "run_end") == "1796593951"
    assert figure(1796593951.0, "timestamp") == "1796593951" and figure(1796593951, "bytes") == "1,796,593,951"


def test_an_inconclusive_figure_says_why_from_its_fields():
    row = _row()
    assert change_text(row) == "+4.0 %" and interval_text(row) == "[-2.5 %, +11.2 %]"
    assert why_text(row) == ("neither beyond the threshold's ±5 % at p < 0.013 nor inside it (90 % interval "
                             "[-1.0 %, +9.0 %]); could detect ≥ 14.0 % with 3 and 3 trials: about 12 trials a side "
                             "would settle it")
    counts = _row(unit="ratio", scale="difference", counted=True, threshold=0.01, equivalence_interval=Interval(-0.004, 0.012))
    assert why_text(counts) == ("neither beyond the threshold's ±0.01 at p < 0.013 nor inside it (90 % interval "
                                "[-0.0040, +0.0120])")
    assert why_text(_row(verdict=None, why="a side made no request")) == "a side made no request"
    assert why_text(_row(verdict="regressed")) is None
