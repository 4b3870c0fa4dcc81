"""Which warehouse a command reads or writes: ``$SUBSTRATE_BENCH_WAREHOUSE`` (a file or a DuckLake), or a reading
command's ``--warehouse``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from substrate_assets.warehouse.location import BadWarehouseSetting, Warehouse, warehouse_location

WAREHOUSE_OPTION: Callable[[Callable[..., Any]], Callable[..., Any]] = click.option(
    "--warehouse", "warehouse_setting", metavar="FILE|ducklake:postgres:…",
    help="The warehouse to read: a DuckDB file, or a shared DuckLake 'ducklake:postgres:dbname=… host=… user=…' "
    "(its password from PGPASSWORD or a pgpass file, the object store's keys from AWS_*). Default: "
    "$SUBSTRATE_BENCH_WAREHOUSE, else warehouse.duckdb in the project.")


def chosen_warehouse(setting: str | None = None) -> Warehouse:
    """The warehouse named by ``setting`` or the environment; a bad setting is a usage error naming it."""
    try:
        return warehouse_location(setting)
    except BadWarehouseSetting as error:
        raise click.ClickException(str(error)) from None


def existing_warehouse(setting: str | None = None) -> Warehouse:
    """:func:`chosen_warehouse`, refused when it is a file that does not exist (a reader would find nothing)."""
    warehouse = chosen_warehouse(setting)
    if isinstance(warehouse, Path) and not warehouse.exists():
        raise click.ClickException(f"no warehouse at {warehouse}; run a trial (make run) or substrate-bench rebuild")
    return warehouse


@contextmanager
def warehouse_said_unavailable() -> Iterator[None]:
    """A warehouse that cannot be had (busy, or a lake that does not answer) ends the command with one line naming
    it, as every reading command does: no traceback, and never a secret (the message holds none)."""
    from substrate_assets.warehouse.lake import WarehouseUnavailable

    try:
        yield
    except WarehouseUnavailable as error:
        raise click.ClickException(str(error)) from None
