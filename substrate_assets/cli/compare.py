"""``substrate-bench compare BASELINE CANDIDATE``: every figure of two trials or groups of trials side by side, each
judged against the trials' noise: the change, its hierarchical bootstrap interval, the noise and the change the
comparison could detect, and a verdict. Exit 0 no regression, 3 regressed (or a figure lost), 4 inconclusive."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.table import Table

from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.cli.output import wide_console
from substrate_assets.cli.warehouse_choice import WAREHOUSE_OPTION, existing_warehouse

if TYPE_CHECKING:
    import duckdb

    from substrate_assets.analysis.comparison import Comparison, Side

VERDICT_STYLE = {"regressed": "bold red", "improved": "bold green", "no change": "dim", "inconclusive": "yellow"}
EXIT_CODES_HELP = ("Exit code 0: no figure regressed, and every figure both sides measured was judged (no change or "
                   "improved); 3: a figure regressed, or the baseline measured one the candidate did not; 4: nothing "
                   "regressed, but a figure is inconclusive (the data cannot tell) or could not be judged (a "
                   "percentile of too few samples), each named; or the machine was too busy to judge.")


def print_table(comparison: Comparison, source: str) -> None:
    from substrate_assets.report.verdict_text import (
        COLUMN_LEGEND,
        SHOWN_COLUMNS,
        notes,
        settling_advice,
        shown_row,
        summary,
        why_text,
    )

    console = wide_console()
    for role, side in (("baseline ", comparison.baseline), ("candidate", comparison.candidate)):
        trials = "" if side.trial_ids == (side.label,) else f": {', '.join(side.trial_ids)}"
        console.print(f"[bold]{role}[/bold] {side.label}{trials}", highlight=False)
    if comparison.history is not None:
        console.print(f"[bold]history[/bold]   {comparison.history}", highlight=False)
    for difference in comparison.differences:
        console.print(f"[yellow]configuration differs[/yellow] {difference}", highlight=False)
    for warning in notes(comparison):
        console.print(f"[yellow]note[/yellow] {warning}", highlight=False)
    table = Table()
    for column in SHOWN_COLUMNS:
        table.add_column(column, justify="left" if column in ("figure", "verdict") else "right")
    for row in comparison.figures:
        cells = shown_row(row)
        table.add_row(*cells[:-1], f"[{VERDICT_STYLE.get(row.verdict or '', 'dim')}]{cells[-1]}")
    console.print(table)
    console.print(COLUMN_LEGEND, style="dim", highlight=False)
    for row in comparison.figures:
        why = why_text(row)
        if row.verdict == "inconclusive" and why:
            console.print(f"[yellow]{row.figure}[/yellow]: {why}", highlight=False)
    console.print(summary(comparison, source), highlight=False)
    advice = settling_advice(comparison)
    if advice:
        console.print(f"[yellow]to settle[/yellow]: {advice}", highlight=False)


def thresholds_of(suite: str | None, figures: tuple[str, ...] = ()) -> tuple[Thresholds, str]:
    """The thresholds of ``suite`` (see :func:`compare_thresholds`), judging ``figures`` (``--figure``) as the
    primary ones when given; and where they come from."""
    from substrate_assets.suites import SuiteError, compare_thresholds, load_suites

    try:
        thresholds, source = compare_thresholds(suite, load_suites())
    except SuiteError as error:
        raise click.ClickException(f"suites.yaml does not read, so the suite's thresholds are unknown: {error}") \
            from None
    if not figures:
        return thresholds, source
    return thresholds.judging(figures), f"{source}, primary as --figure asks"


def judged(connection: duckdb.DuckDBPyConnection, baseline: Side, candidate: Side,
           figures: tuple[str, ...] = ()) -> tuple[Comparison, str]:
    """The comparison of the two sides by the thresholds of the candidate's suite (``figures`` asked for as the
    primary ones), and where those come from."""
    from substrate_assets.warehouse.compare_trials import compare, suite_of

    thresholds, source = thresholds_of(suite_of(connection, candidate), figures)
    return compare(connection, baseline, candidate, thresholds), source


def _figures_read(_context: click.Context, _parameter: click.Parameter, specs: tuple[str, ...]) -> tuple[str, ...]:
    from substrate_assets.analysis.figure_spec import NotAFigure, RequestFigure

    for spec in specs:
        try:
            RequestFigure.parse(spec)
        except NotAFigure as error:
            raise click.BadParameter(str(error)) from None
    return specs


FIGURE = click.option(
    "--figure", "figures", multiple=True, metavar="NAME[:gmean|p50|p99|mean]", callback=_figures_read,
    help="Judge the request row NAME (any name the trials' request logs recorded, e.g. ResumeActor:p99; alone, its "
    "geometric mean) from each trial's exact samples, as the comparison's primary figure; repeatable. A row no "
    "trial recorded is refused, naming the rows they did.")


def show_comparison(comparison: Comparison, source: str, output_format: str) -> int:
    """The comparison in ``output_format``; the exit code of its outcome."""
    from substrate_assets.report.verdict_text import EXIT_CODES, as_csv, as_json, as_markdown, outcome

    if output_format == "table":
        print_table(comparison, source)
    elif output_format == "markdown":
        click.echo(as_markdown(comparison, source), nl=False)
    else:
        click.echo({"json": as_json, "csv": as_csv}[output_format](comparison), nl=False)
    return EXIT_CODES[outcome(comparison)]


INCLUDE_DISTURBED = click.option(
    "--include-disturbed", is_flag=True, help="Keep disturbed trials (run while the machine was busy with other "
    "work), which are left out by default; each is named in the output.")
FORMAT = click.option("--format", "output_format", type=click.Choice(["table", "markdown", "csv", "json"]),
                      default="table", show_default=True, help="markdown is ready to paste into a pull request; csv "
                      "and json keep every figure unrounded.")


@click.command("compare", epilog=EXIT_CODES_HELP)
@click.argument("baseline")
@click.argument("candidate")
@click.option("--suite", help="Compare a suite's trials by run tag or system-under-test version (a commit prefix of "
              "7+ characters): BASELINE and CANDIDATE are those, instead of trial or group ids.")
@click.option("--last", type=click.IntRange(min=1), help="Only each group's N most recent trials.")
@INCLUDE_DISTURBED
@FIGURE
@WAREHOUSE_OPTION
@FORMAT
def compare_command(baseline: str, candidate: str, suite: str | None, last: int | None, include_disturbed: bool,
                    figures: tuple[str, ...], warehouse_setting: str | None, output_format: str) -> None:
    """Compare CANDIDATE with BASELINE: trial ids, group ids (`run --repeat`, `ab`), or with --suite a suite's
    trials by tag or version; disturbed trials (run while the machine was busy with other work) are left out. Each
    trial contributes its own figures — the wake's geometric mean (at a common mix of wake paths, where the runtime
    knows them: the primary figure), each path's p50, the slow share, upstream's p50 and p99, the steps' p50 and p99,
    the rows that answer the family's question (glutton's and durdir's ResumeActor: its geometric mean, primary too,
    its p50 and p99), any --figure, densities, capacity under the SLO, the failure ratio (as counts) — and each
    figure is judged against the trial-to-trial noise of both sides' repeats and of the baseline configuration's
    recent history: its change, its interval, the noise, the change the rule could detect, and a verdict: regressed
    or improved (the change reaches the suite's threshold and its test is below the figure's level), no change (an
    equivalence test puts it inside ±threshold), or inconclusive when the data cannot tell. The two groups of one
    `ab` run are judged round by round."""
    from substrate_assets.warehouse.compare_figures import FigureNotRecorded
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.lake import WarehouseUnavailable
    from substrate_assets.warehouse.sides import AllDisturbed, SideNotFound, select_side

    warehouse = existing_warehouse(warehouse_setting)
    try:
        with connect(warehouse, read_only=True) as connection:
            sides = [select_side(connection, spec, suite, last, include_disturbed) for spec in (baseline, candidate)]
            comparison, source = judged(connection, sides[0], sides[1], figures)
    except AllDisturbed as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(4)
    except FigureNotRecorded as error:
        raise click.UsageError(str(error)) from None
    except (SideNotFound, WarehouseUnavailable) as error:
        raise click.ClickException(str(error)) from None
    sys.exit(show_comparison(comparison, source, output_format))
