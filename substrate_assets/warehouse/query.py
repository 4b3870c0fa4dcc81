"""Read-only SQL on the warehouse, for people."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import Warehouse

# The functions of DuckDB's postgres extension (loaded for a shared warehouse's catalog) connect wherever their
# argument says, external access or not; `query` and `query_table` run SQL made from strings, which a check of the
# statement's own words cannot see into.
_REFUSED_FUNCTIONS = re.compile(r"postgres_\w*|query|query_table", re.IGNORECASE)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def refused_function(sql: str) -> str | None:
    """The first function ``sql`` calls that sql may not call, or None."""
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return None  # DuckDB itself will say what does not parse
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    words = [(kind, sql[start:end].strip()) for (start, kind), end in zip(tokens, ends, strict=True)]
    for (kind, word), (_, following) in zip(words, [*words[1:], (None, "")], strict=True):
        name = word.strip('"')
        if kind == duckdb.token_type.identifier and following.startswith("(") and _REFUSED_FUNCTIONS.fullmatch(name):
            return name
    return None


def query(warehouse: Warehouse, sql: str, parameters: list[Any] | None = None) -> QueryResult:
    if isinstance(warehouse, Path) and not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}; run a trial (make run) or substrate-bench rebuild")
    refused = refused_function(sql)
    if refused is not None:
        raise duckdb.PermissionException(f"{refused}() reaches beyond the warehouse")
    with connect(warehouse, read_only=True) as connection:
        cursor = connection.execute(sql, parameters or [])
        if cursor.description is None:
            return QueryResult([], [])
        return QueryResult([d[0] for d in cursor.description], cursor.fetchall())
