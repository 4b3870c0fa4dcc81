"""``substrate-bench import`` (upstream runs into the store and the warehouse), ``rebuild`` (the warehouse from the
run store) and ``sql`` (read-only queries)."""

from __future__ import annotations

import sys
from typing import Any

import click

from substrate_assets.cli.output import print_rows, wide_console
from substrate_assets.project import store_directory, warehouse_path


def _say_waiting(message: str) -> None:
    click.echo(message, err=True)


def _exit_on_failed_tests(outcomes: list[Any]) -> None:
    """One line per column test that failed, then exit 1; nothing when all passed."""
    failed = [outcome for outcome in outcomes if not outcome.passed]
    for outcome in failed:
        click.echo(f"test {outcome.test.model}.{outcome.test.name} failed: {outcome.violations} rows", err=True)
    if failed:
        sys.exit(1)


@click.command("import")
@click.argument("root")
def import_command(root: str) -> None:
    """Import every upstream run under ROOT (runs/<name>/run_date=…/run_ts=…/run_tag=…/; a directory or a
    gs://, s3:// or other fsspec URL) as trials: copied unchanged into the run store, then loaded."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.loads import import_upstream
    from substrate_assets.results.layout import RunStore
    from substrate_assets.warehouse.connection import WarehouseBusy

    try:
        outcome = import_upstream(root, RunStore(store_directory()), warehouse_path(), project_instance(),
                                  on_wait=_say_waiting)
    except WarehouseBusy as error:
        raise click.ClickException(str(error)) from None
    console = wide_console()
    if not outcome.runs:
        raise click.ClickException(f"no upstream runs under {root} (expected runs/<name>/run_date=…/run_ts=…/"
                                   "run_tag=…/)")
    print_rows(console, f"imported {len(outcome.runs)} runs", ["trial_id", "copied", "source"],
               [(run.trial_id, "yes" if run.copied else "already in the store", run.source) for run in outcome.runs])
    console.print(f"loaded raw rows {outcome.raw_rows}; rebuilt {', '.join(outcome.models)}", highlight=False)
    _exit_on_failed_tests(outcome.tests)


@click.command()
def rebuild() -> None:
    """Recreate the warehouse from the run store (every trial, then every model). Waits while a run or a query has
    the warehouse open, and replaces it only when nobody does."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.loads import rebuild_warehouse
    from substrate_assets.results.layout import RunStore
    from substrate_assets.warehouse.connection import WarehouseBusy

    try:
        result = rebuild_warehouse(RunStore(store_directory()), warehouse_path(), project_instance(),
                                   on_wait=_say_waiting)
    except WarehouseBusy as error:
        raise click.ClickException(str(error)) from None
    console = wide_console()
    console.print(f"rebuilt {warehouse_path()} from {len(result.trials)} trials in {result.seconds:.2f}s",
                  highlight=False)
    print_rows(console, "tables", ["table", "rows"],
               [*result.raw_rows.items(), *((table.name, table.rows) for table in result.models)])
    _exit_on_failed_tests(result.tests)


@click.command()
@click.argument("statement")
@click.option("--format", "output", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
def sql(statement: str, output: str) -> None:
    """Run read-only SQL on the warehouse: for instance "select trial_id, p50_ms, p99_ms from
    wake_latency_distribution". Fails at once, saying so, while another process writes the warehouse."""
    import csv
    import json

    import duckdb

    from substrate_assets.warehouse.connection import WarehouseBusy
    from substrate_assets.warehouse.query import query

    try:
        result = query(warehouse_path(), statement)
    except (FileNotFoundError, WarehouseBusy) as error:
        raise click.ClickException(str(error)) from None
    except duckdb.Error as error:
        raise click.ClickException(f"SQL error: {error}") from None
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    elif output == "json":
        click.echo(json.dumps([dict(zip(result.columns, row, strict=True)) for row in result.rows], default=str,
                              indent=1))
    else:
        print_rows(wide_console(), "", result.columns, result.rows)
