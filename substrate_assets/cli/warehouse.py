"""``substrate-bench import`` (upstream runs into the store and the warehouse), ``rebuild`` (the warehouse from the
run store) and ``sql`` (read-only queries)."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import click
from rich.console import Console

from substrate_assets.cli.output import count_display, print_rows, wide_console
from substrate_assets.cli.warehouse_choice import WAREHOUSE_OPTION, chosen_warehouse, existing_warehouse
from substrate_assets.project import store_directory
from substrate_assets.results.import_limits import MAX_RUNS

# Refusals printed one by one; past these, counted by reason (an import of thousands of bad runs stays readable).
SHOWN_REFUSALS = 20


def _say_waiting(message: str) -> None:
    click.echo(message, err=True)


def _exit_on_failed_tests(outcomes: list[Any], exit_now: bool = True) -> None:
    """One line per column test that failed, then exit 1 (unless the caller exits itself); nothing when all
    passed."""
    failed = [outcome for outcome in outcomes if not outcome.passed]
    for outcome in failed:
        click.echo(f"test {outcome.test.model}.{outcome.test.name} failed: {outcome.violations} rows", err=True)
    if failed and exit_now:
        sys.exit(1)


@click.command("import")
@click.argument("root")
@click.option("--slo-wake-p99-ms", type=click.FloatRange(min=0, min_open=True),
              help="The SLO the imported runs' load points are judged by: the highest p99 wake latency, ms.")
@click.option("--slo-failure-ratio", type=click.FloatRange(0, 1),
              help="The SLO the imported runs' load points are judged by: the highest share of failed requests.")
@click.option("--max-runs", type=click.IntRange(min=1), default=MAX_RUNS, show_default=True,
              help="Refuse a ROOT holding more runs than this, before copying any.")
def import_command(root: str, slo_wake_p99_ms: float | None, slo_failure_ratio: float | None,
                   max_runs: int) -> None:
    """Import every upstream run under ROOT (runs/<name>/run_date=…/run_ts=…/run_tag=…/; a directory or a
    gs://, s3:// or other fsspec URL) as trials: each read whole first, then copied unchanged into the run store and
    loaded. A run whose files do not read is refused (one line naming the file; nothing of it is stored) and the
    others still load; the exit code is then 1. A bar (or, off a terminal, a line every 10 s) counts the runs.

    Upstream runs record no SLO: --slo-* give the one a ladder run's capacity is found under (kept beside the run in
    the store, import.json). A run already in the store keeps what it was first imported with. Without a request log
    an imported run measured no exact wake latencies, so only its failure ratio can be judged per step."""
    slo = {name: value for name, value in (("wake_p99_ms", slo_wake_p99_ms), ("failure_ratio", slo_failure_ratio))
           if value is not None}
    from substrate_assets.app.load_records import RecordNotWritten, RecordWriter

    # A child imports Dagster and opens the instance (about a second of Python) while this process copies and
    # loads the runs; it writes the load's records once the load is committed.
    with RecordWriter() as records:
        from substrate_assets.app.loads import import_upstream
        from substrate_assets.results.importer import SourceUnreadable, TooManyRuns
        from substrate_assets.results.layout import RunStore
        from substrate_assets.warehouse.lake import WarehouseUnavailable

        display, counted = count_display(Console(stderr=True), "runs imported")
        try:
            with display:
                outcome = import_upstream(root, RunStore(store_directory()), chosen_warehouse(), records.write,
                                          on_wait=_say_waiting, slo=slo or None, max_runs=max_runs,
                                          on_progress=counted)
        except (WarehouseUnavailable, SourceUnreadable, TooManyRuns, RecordNotWritten) as error:
            raise click.ClickException(str(error)) from None
    for refusal in outcome.refused[:SHOWN_REFUSALS]:
        click.echo(str(refusal), err=True)
    if len(outcome.refused) > SHOWN_REFUSALS:
        reasons = Counter(refusal.reason for refusal in outcome.refused[SHOWN_REFUSALS:]).most_common(3)
        click.echo(f"… and {len(outcome.refused) - SHOWN_REFUSALS:,} more refused (most often: "
                   + "; ".join(f"{reason} ×{count:,}" for reason, count in reasons) + ")", err=True)
    console = wide_console()
    if not outcome.runs and not outcome.refused:
        raise click.ClickException(f"no upstream runs under {root} (expected runs/<name>/run_date=…/run_ts=…/"
                                   "run_tag=…/)")
    if outcome.runs:
        print_rows(console, f"imported {len(outcome.runs)} runs", ["trial_id", "copied", "source"],
                   [(run.trial_id, "yes" if run.copied else "already in the store", run.source)
                    for run in outcome.runs])
        console.print(f"loaded raw rows {outcome.raw_rows}; rebuilt {', '.join(outcome.models)}", highlight=False)
    if outcome.skipped:
        click.echo("not refreshed, a key test of what they read failed (the next refresh takes them up): "
                   + "; ".join(f"{name} (after {cause})" for name, cause in outcome.skipped.items()), err=True)
    _exit_on_failed_tests(outcome.tests, exit_now=not outcome.refused)
    if outcome.refused:
        others = f"; the other {len(outcome.runs)} loaded" if outcome.runs else ""
        raise click.ClickException(f"{len(outcome.refused)} of {len(outcome.runs) + len(outcome.refused)} runs "
                                   f"refused (above){others}")


@click.command()
def rebuild() -> None:
    """Recreate the warehouse from the run store (every trial, then every model). Waits while a run or a query has
    the warehouse open, and replaces it only when nobody does; loads that start meanwhile wait for it and land in
    the new warehouse. A trial whose files do not read is skipped, one line naming the file; the others load and
    the exit code is then 1."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.loads import rebuild_warehouse
    from substrate_assets.results.layout import RunStore
    from substrate_assets.warehouse.lake import WarehouseUnavailable

    warehouse = chosen_warehouse()
    try:
        result = rebuild_warehouse(RunStore(store_directory()), warehouse, project_instance(),
                                   on_wait=_say_waiting)
    except WarehouseUnavailable as error:
        raise click.ClickException(str(error)) from None
    for problem in result.skipped:
        click.echo(f"skipped {problem.trial_dir}: {problem}", err=True)
    console = wide_console()
    console.print(f"rebuilt {warehouse} from {len(result.trials)} trials in {result.seconds:.2f} s",
                  highlight=False)
    print_rows(console, "tables", ["table", "rows"],
               [*result.raw_rows.items(), *((table.name, table.rows) for table in result.models)])
    _exit_on_failed_tests(result.tests, exit_now=not result.skipped)
    if result.skipped:
        raise click.ClickException(f"{len(result.skipped)} unreadable trials skipped (above: fix or remove them in "
                                   f"the run store); {len(result.trials)} loaded")


def _refusal(error: Exception) -> str | None:
    """The one line saying why ``sql`` would not run a statement that reaches past the warehouse or writes, or
    None for an ordinary SQL error."""
    import duckdb

    said = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    if isinstance(error, duckdb.PermissionException):
        return f"refused: sql reads the warehouse only, not files, other databases or extensions ({said})"
    if "read-only mode" in said:
        return f"refused: sql is read-only ({said})"
    if "configuration has been locked" in said:
        return f"refused: sql cannot change DuckDB's settings ({said})"
    return None


@click.command()
@click.argument("statement")
@click.option("--format", "output", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@WAREHOUSE_OPTION
def sql(statement: str, output: str, warehouse_setting: str | None) -> None:
    """Run read-only SQL on the warehouse: for instance "select trial_id, p50_ms, p99_ms from
    wake_latency_distribution". Fails at once, saying so, while another process writes the warehouse. Reads the
    warehouse and nothing else: writes, files (COPY … TO, EXPORT DATABASE, read_text, glob), other databases
    (ATTACH), extensions (INSTALL, LOAD) and settings are refused (exit 1)."""
    import csv
    import json

    import duckdb

    from substrate_assets.warehouse.lake import WarehouseUnavailable
    from substrate_assets.warehouse.query import query

    try:
        result = query(existing_warehouse(warehouse_setting), statement)
    except (FileNotFoundError, WarehouseUnavailable) as error:
        raise click.ClickException(str(error)) from None
    except duckdb.Error as error:
        raise click.ClickException(_refusal(error) or f"SQL error: {error}") from None
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    elif output == "json":
        click.echo(json.dumps([dict(zip(result.columns, row, strict=True)) for row in result.rows], default=str,
                              indent=1))
    else:
        print_rows(wide_console(), "", result.columns, result.rows, whole_cells=True)
