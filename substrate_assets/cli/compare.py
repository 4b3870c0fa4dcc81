"""``substrate-bench compare BASELINE CANDIDATE``: every figure of two trials (or groups of trials) side by side,
with the change, its bootstrap interval, a rank test and a verdict; exit 3 when any figure regressed or the candidate
stopped measuring one the baseline measured."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.table import Table

from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.cli.output import wide_console
from substrate_assets.project import warehouse_path

if TYPE_CHECKING:
    import duckdb

    from substrate_assets.analysis.comparison import Comparison, Side

REGRESSION_EXIT_CODE = 3
VERDICT_STYLE = {"regressed": "bold red", "improved": "bold green", "no change": "dim"}


def print_table(comparison: Comparison, source: str) -> None:
    from substrate_assets.analysis.comparison_text import SHOWN_COLUMNS, shown_row, summary

    console = wide_console()
    for role, side in (("baseline ", comparison.baseline), ("candidate", comparison.candidate)):
        trials = "" if side.trial_ids == (side.label,) else f": {', '.join(side.trial_ids)}"
        console.print(f"[bold]{role}[/bold] {side.label}{trials}", highlight=False)
    for difference in comparison.differences:
        console.print(f"[yellow]configuration differs[/yellow] {difference}", highlight=False)
    table = Table()
    for column in SHOWN_COLUMNS:
        table.add_column(column, justify="left" if column in ("figure", "verdict") else "right")
    for row in comparison.figures:
        cells = shown_row(row)
        table.add_row(*cells[:-1], f"[{VERDICT_STYLE.get(cells[-1], 'yellow')}]{cells[-1]}")
    console.print(table)
    console.print(summary(comparison, source), highlight=False)


def thresholds_of(suite: str | None) -> tuple[Thresholds, str]:
    from substrate_assets.suites import SuiteError, compare_thresholds, load_suites

    try:
        return compare_thresholds(suite, load_suites())
    except SuiteError as error:
        raise click.ClickException(f"suites.yaml does not read, so the suite's thresholds are unknown: {error}") \
            from None


def judged(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side) -> tuple[Comparison, str]:
    """The comparison of the two sides by the thresholds of the candidate's suite, and where those come from."""
    from substrate_assets.warehouse.comparison import compare, suite_of

    thresholds, source = thresholds_of(suite_of(connection, candidate))
    return compare(connection, baseline, candidate, thresholds), source


@click.command("compare")
@click.argument("baseline")
@click.argument("candidate")
@click.option("--suite", help="Compare groups: BASELINE and CANDIDATE are run tags or system-under-test versions "
              "(a commit prefix of 7+ characters) of this suite's trials, instead of trial ids.")
@click.option("--last", type=click.IntRange(min=1), help="With --suite: only each group's N most recent trials.")
@click.option("--format", "output_format", type=click.Choice(["table", "markdown", "csv", "json"]), default="table",
              show_default=True, help="markdown is ready to paste into a pull request; csv and json keep every "
              "figure unrounded.")
def compare_command(baseline: str, candidate: str, suite: str | None, last: int | None, output_format: str) -> None:
    """Compare CANDIDATE with BASELINE (trial ids, or groups with --suite): the wake and step latencies (p50 and
    p99 from the exact samples, the 95 % bootstrap interval of the difference, Mann–Whitney U), densities,
    capacity under the SLO and the failure ratio, each with a verdict. Exit code 3 when any figure regressed, or
    the baseline measured a figure the candidate did not."""
    from substrate_assets.analysis.comparison_text import as_csv, as_json, as_markdown, gate_fails
    from substrate_assets.warehouse.comparison import SideNotFound, select_side
    from substrate_assets.warehouse.connection import WarehouseBusy, connect

    if last is not None and suite is None:
        raise click.UsageError("--last selects among a suite's trials: give --suite too")
    path = warehouse_path()
    if not path.exists():
        raise click.ClickException(f"no warehouse at {path}; run a trial (make run) or substrate-bench rebuild")
    try:
        with connect(path, read_only=True) as connection:
            sides = [select_side(connection, spec, suite, last) for spec in (baseline, candidate)]
            comparison, source = judged(connection, *sides)
    except (SideNotFound, WarehouseBusy) as error:
        raise click.ClickException(str(error)) from None
    if output_format == "table":
        print_table(comparison, source)
    elif output_format == "markdown":
        click.echo(as_markdown(comparison, source), nl=False)
    else:
        click.echo({"json": as_json, "csv": as_csv}[output_format](comparison), nl=False)
    if gate_fails(comparison):
        sys.exit(REGRESSION_EXIT_CODE)
