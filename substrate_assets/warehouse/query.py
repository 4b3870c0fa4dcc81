"""Read-only SQL on the warehouse, for people."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import Warehouse


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def query(warehouse: Warehouse, sql: str, parameters: list[Any] | None = None) -> QueryResult:
    if isinstance(warehouse, Path) and not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}; run a trial (make run) or substrate-bench rebuild")
    with connect(warehouse, read_only=True) as connection:
        cursor = connection.execute(sql, parameters or [])
        if cursor.description is None:
            return QueryResult([], [])
        return QueryResult([d[0] for d in cursor.description], cursor.fetchall())
