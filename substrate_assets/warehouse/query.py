"""Read-only SQL on the warehouse, for people.

Before anything is opened, every statement is parsed by DuckDB itself (:func:`refusal`): only queries run, that is
statements DuckDB parses as SELECT (which includes ``SHOW``, ``DESCRIBE``, ``SUMMARIZE`` and a ``PRAGMA`` that only
reads, such as ``PRAGMA table_info('t')``: DuckDB turns those into a query of a ``pragma_…`` table function) and
can serialize to its syntax tree. Everything else is refused by its type, read-only or not: ``COPY … TO`` and
``EXPORT DATABASE`` (a lake's reader may write under its data path when its keys can), ``ATTACH``, ``SET``,
``CALL``, a ``PRAGMA`` that sets, ``EXPLAIN`` (``EXPLAIN ANALYZE`` runs its statement). In the tree, the
postgres extension's functions and ``query()``/``query_table()`` are refused however they are spelled (case,
quotes, comments, whitespace): the parser has already taken those apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.warehouse.connection import calls_python_functions, connect
from substrate_assets.warehouse.location import Warehouse

# The functions of DuckDB's postgres extension (loaded for a shared warehouse's catalog) connect wherever their
# argument says, external access or not; `query` and `query_table` run SQL made from strings, which a check of the
# statement's tree cannot see into.
_REFUSED_FUNCTIONS = re.compile(r"postgres_\w*|query|query_table")


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def _function_names(tree: Any) -> set[str]:
    """Every function a serialized syntax tree calls (scalar, aggregate or table function), as the parser named it
    (lower case, quotes gone)."""
    if isinstance(tree, dict):
        names = {tree["function_name"]} if isinstance(tree.get("function_name"), str) else set()
        for value in tree.values():
            names |= _function_names(value)
        return names
    if isinstance(tree, list):
        return set().union(*(_function_names(item) for item in tree)) if tree else set()
    return set()


def refusal(sql: str) -> str | None:
    """Why ``sql`` may not run as read-only SQL, or None when it may (or does not parse: DuckDB will say why)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return None
    parser = duckdb.connect()
    try:
        for statement in statements:
            if statement.type != duckdb.StatementType.SELECT:
                return f"{statement.type.name} statements are refused; sql runs queries only"
            serialized = parser.execute("SELECT json_serialize_sql(?)", [statement.query]).fetchone()
            assert serialized is not None  # a scalar SELECT is one row
            tree = json.loads(serialized[0])
            if tree.get("error"):
                return f"only plain queries run ({tree.get('error_message', 'not a query')})"
            refused = sorted(name for name in _function_names(tree) if _REFUSED_FUNCTIONS.fullmatch(name.lower()))
            if refused:
                return f"{refused[0]}() reaches beyond the warehouse"
    finally:
        parser.close()
    return None


def query(warehouse: Warehouse, sql: str, parameters: list[Any] | None = None) -> QueryResult:
    if isinstance(warehouse, Path) and not warehouse.exists():
        raise FileNotFoundError(f"no warehouse at {warehouse}; run a trial (make run) or substrate-bench rebuild")
    refused = refusal(sql)
    if refused is not None:
        raise duckdb.PermissionException(refused)
    with connect(warehouse, read_only=True, python_functions=calls_python_functions(sql)) as connection:
        cursor = connection.execute(sql, parameters or [])
        if cursor.description is None:
            return QueryResult([], [])
        return QueryResult([d[0] for d in cursor.description], cursor.fetchall())
