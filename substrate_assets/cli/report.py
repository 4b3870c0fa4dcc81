"""``substrate-bench report``: one self-contained HTML page of a trial, a comparison of two trials or a suite's
history, read from the warehouse."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from substrate_assets.cli.warehouse_choice import WAREHOUSE_OPTION, existing_warehouse
from substrate_assets.project import project_root

if TYPE_CHECKING:
    import duckdb

REPORTS_DIRECTORY = "reports"


def _trial_page(connection: duckdb.DuckDBPyConnection, trial_id: str, warehouse: str) -> str:
    from substrate_assets.report.pages import trial_report

    return trial_report(connection, trial_id)


def _history_page(connection: duckdb.DuckDBPyConnection, suite: str, warehouse: str) -> str:
    from substrate_assets.report.pages import history_report

    return history_report(connection, suite)


def _comparison_page(connection: duckdb.DuckDBPyConnection, trial_ids: tuple[str, str], warehouse: str) -> str:
    from substrate_assets.cli.compare import judged
    from substrate_assets.report.pages import compared_page
    from substrate_assets.warehouse.sides import select_side

    baseline, candidate = (select_side(connection, trial_id) for trial_id in trial_ids)
    comparison, source = judged(connection, baseline, candidate)
    return compared_page(connection, comparison, source, warehouse=warehouse)


# Each kind of report: the option that asks for it, (its name in the default file name, how its page is built from
# the warehouse, the option's value and the warehouse's name). Exactly one is asked for at a time.
KINDS: dict[str, tuple[str, Callable[[duckdb.DuckDBPyConnection, Any, str], str]]] = {
    "trial_id": ("trial", _trial_page),
    "suite": ("history", _history_page),
    "compare": ("comparison", _comparison_page),
}


def _file_name(value: Any) -> str:
    """The subject of a report (a trial id, a suite name: a user's text) as part of a file name: nothing of it can
    name another directory or a hidden file."""
    words = value if isinstance(value, tuple | list) else (value,)
    name = "-vs-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", str(word)) for word in words).strip("._-")
    return name[:150] or "unnamed"


def default_output(kind: str, value: Any) -> Path:
    """``<project>/reports/<kind>-<subject>.html``."""
    return project_root() / REPORTS_DIRECTORY / f"{kind}-{_file_name(value)}.html"


@click.command()
@click.option("--trial", "trial_id", metavar="TRIAL_ID", help="A trial's report: what ran, its wake-latency "
              "distribution and CDF, density frontier, SLO capacity and knee (with its load points), step latency.")
@click.option("--suite", metavar="SUITE", help="A suite's history: its figures trial by trial per metric and "
              "configuration, and their change points.")
@click.option("--compare", nargs=2, metavar="BASELINE CANDIDATE", help="Two trials or groups compared as "
              "`substrate-bench compare` compares them (its table and verdicts), with both wake-latency CDFs "
              "overlaid.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the page [default: reports/<kind>-<name>.html in the project].")
@WAREHOUSE_OPTION
def report(output: Path | None, warehouse_setting: str | None, **asked: Any) -> None:
    """Write one report as a self-contained HTML page (charts and tables inline; it fetches nothing, so it opens
    offline in any browser) and print its path. Reads the warehouse read-only; fails at once, saying so, while
    another process writes it."""
    from substrate_assets.report.pages import NotInWarehouse
    from substrate_assets.results.atomic import WriteFailed, write_text
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.lake import WarehouseUnavailable
    from substrate_assets.warehouse.sides import SideNotFound

    chosen = [(option, value) for option, value in asked.items() if value is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of " + ", ".join(
            f"--{option.removesuffix('_id')}" for option in KINDS))
    (option, value), = chosen
    kind, build = KINDS[option]
    warehouse = existing_warehouse(warehouse_setting)
    try:
        with connect(warehouse, read_only=True) as connection:
            text = build(connection, value, str(warehouse))
    except (WarehouseUnavailable, NotInWarehouse, SideNotFound) as error:
        raise click.ClickException(str(error)) from None
    path = (output or default_output(kind, value)).resolve()
    try:
        write_text(path, text)
    except WriteFailed as error:
        raise click.ClickException(str(error)) from None
    click.echo(str(path))
