"""Read-only SQL on the warehouse, for people."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.warehouse.connection import connect


class WarehouseBusy(RuntimeError):
    """Another process is writing the warehouse."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def query(warehouse: Path, sql: str, parameters: list[Any] | None = None) -> QueryResult:
    if not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}; run a trial (make run) or substrate-bench rebuild")
    try:
        with connect(warehouse, read_only=True) as connection:
            cursor = connection.execute(sql, parameters or [])
            if cursor.description is None:
                return QueryResult([], [])
            return QueryResult([d[0] for d in cursor.description], cursor.fetchall())
    except duckdb.IOException as error:
        if "lock" in str(error).lower():
            raise WarehouseBusy(f"the warehouse is being written by another process (a run is loading a trial); "
                                f"try again in a moment ({error})") from None
        raise
