"""``substrate-bench ab SUITE_A SUITE_B --rounds N``: two suites' trials run alternately through the asset graph,
then compared group against group: the way to compare two lifecycle modes, two sandbox classes or two deployments of
the system under test."""

from __future__ import annotations

import sys

import click

from substrate_assets.cli.compare import EXIT_CODES_HELP, FIGURE, FORMAT, show_comparison, thresholds_of
from substrate_assets.cli.job_results import dead_time_line
from substrate_assets.cli.output import wide_console
from substrate_assets.cli.trials import INJECT_WAKE_DELAY, WAIT_AT_MOST, exit_stopped, main_job_exits
from substrate_assets.cli.warehouse_choice import chosen_warehouse, warehouse_said_unavailable
from substrate_assets.project import store_directory
from substrate_assets.suites import MAX_REPEAT, SuiteError, get_suite

DEFAULT_ROUNDS = 4


@click.command("ab", epilog=EXIT_CODES_HELP)
@click.argument("suite_a", metavar="SUITE_A")
@click.argument("suite_b", metavar="SUITE_B")
@click.option("--rounds", type=click.IntRange(min=1, max=MAX_REPEAT), default=DEFAULT_ROUNDS, show_default=True,
              help="Trials of each suite.")
@INJECT_WAKE_DELAY
@WAIT_AT_MOST
@FIGURE
@FORMAT
def ab(suite_a: str, suite_b: str, rounds: int, inject_wake_delay_ms: int | None, wait_at_most_s: int | None,
       figures: tuple[str, ...], output_format: str) -> None:
    """Run ROUNDS trials of SUITE_A and of SUITE_B alternately (A B, B A, A B, …, so a slow spell of the machine falls
    on both sides alike), each through the asset graph as `run` does, then compare B's group (the candidate) with A's
    (the baseline) as `compare` does, round by round: the two trials of a round ran back to back and share the
    machine's moment, so the comparison judges their differences (and says how correlated they were). A disturbed
    trial (the machine busy with other work) runs again in its round; too many, and the command says the machine is
    too busy to judge (exit 4). Each side's trials form a group (`<suite>-<time>-a<N>`, `-b<N>`), which
    `compare` takes later. SUITE_A and SUITE_B may be the same suite: with --inject-wake-delay-ms, which is added to
    B's trials only, that is a check that the comparison finds a slowdown of known size."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.main_job import ab_rounds, run_ab
    from substrate_assets.app.stopped import Stopped, stopping_on_signals
    from substrate_assets.results.layout import RunStore
    from substrate_assets.warehouse.compare_figures import FigureNotRecorded
    from substrate_assets.warehouse.compare_trials import compare
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.sides import select_side

    try:
        suites = get_suite(suite_a), get_suite(suite_b).with_overrides(inject_wake_delay_ms=inject_wake_delay_ms)
    except SuiteError as error:
        raise click.UsageError(str(error)) from None
    plan = ab_rounds(suite_a, suite_b, rounds, inject_wake_delay_ms, wait_at_most_s=wait_at_most_s)
    console = wide_console()
    with stopping_on_signals():
        try:
            instance = project_instance()
            delay = f", {inject_wake_delay_ms} ms added to every wake of B" if inject_wake_delay_ms else ""
            order = " ".join("A" if trial.group == plan[0].group else "B" for trial in plan)
            console.print(f"a/b: {rounds} rounds of {suite_a} (A, group {plan[0].group}) and {suite_b} (B, group "
                          f"{plan[1].group}){delay}; order {order}", highlight=False)
            with main_job_exits():
                outcome = run_ab(*suites, plan, RunStore(store_directory()), instance, say=click.echo)
        except Stopped as stopped:
            exit_stopped(stopped)
    groups = [plan[0].group, plan[1].group]
    try:
        with warehouse_said_unavailable(), connect(chosen_warehouse(), read_only=True) as connection:
            baseline, candidate = (select_side(connection, group) for group in groups if group)
            thresholds, source = thresholds_of(suite_b, figures)
            try:
                comparison = compare(connection, baseline, candidate, thresholds)
            except FigureNotRecorded as error:
                click.echo(f"groups {groups[0]} and {groups[1]} are kept, but not compared: {error}", err=True)
                sys.exit(2)
        code = show_comparison(comparison, source, output_format)
    finally:
        click.echo(dead_time_line(instance, outcome.loads), err=True)
    sys.exit(code)
