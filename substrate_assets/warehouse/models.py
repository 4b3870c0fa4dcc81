"""A small dbt-like runner: each ``dbt_like_sql/**/*.sql`` file is one model, one table, one asset.

A model's upstream tables are the tables its SQL reads, found by parsing it
with sqlglot (DuckDB dialect): every table reference that is not one of the
query's own CTEs. Building a model replaces its table in one transaction. The
leading ``--`` comment lines of a file are its description.
"""

from __future__ import annotations

from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from substrate_assets.project import project_root
from substrate_assets.warehouse.change_points import CHANGE_POINTS, METRIC_HISTORY, replace_change_points
from substrate_assets.warehouse.checks import TestOutcome, load_tests, run_test
from substrate_assets.warehouse.connection import transaction


class ModelError(ValueError):
    """A model file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    sql: str
    upstream: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class BuiltTable:
    name: str
    rows: int
    columns: list[tuple[str, str]]
    preview: list[dict[str, Any]]


def models_directory() -> Path:
    return project_root() / "dbt_like_sql"


def referenced_tables(sql: str, path: Path) -> tuple[str, ...]:
    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.ParseError as error:
        raise ModelError(f"{path}: cannot parse SQL: {error}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ModelError(f"{path}: a model is exactly one SELECT statement")
    query = statements[0]
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    tables = {table.name for table in query.find_all(exp.Table) if table.name and table.name not in ctes}
    return tuple(sorted(tables))


def _description(sql: str) -> str:
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines).strip()


def discover(directory: Path | None = None) -> dict[str, Model]:
    """Every model under ``directory``, by name (the file stem, unique across folders)."""
    directory = directory or models_directory()
    models: dict[str, Model] = {}
    for path in sorted(directory.rglob("*.sql")):
        name = path.stem
        if name in models:
            raise ModelError(f"{path}: model {name!r} is also defined in {models[name].path}")
        sql = path.read_text()
        models[name] = Model(name, path, sql.strip().rstrip(";"), referenced_tables(sql, path), _description(sql))
    return models


def build_order(models: dict[str, Model]) -> list[Model]:
    graph = {name: {u for u in model.upstream if u in models} for name, model in models.items()}
    try:
        return [models[name] for name in TopologicalSorter(graph).static_order()]
    except CycleError as error:
        raise ModelError(f"models depend on each other in a cycle: {' -> '.join(error.args[1])}") from None


def describe_table(connection: duckdb.DuckDBPyConnection, name: str, preview_rows: int = 10) -> BuiltTable:
    columns = [(row[0], row[1]) for row in connection.execute(f"DESCRIBE {name}").fetchall()]
    rows = connection.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
    cursor = connection.execute(f"SELECT * FROM {name} LIMIT {preview_rows}")
    names = [d[0] for d in cursor.description]
    return BuiltTable(name, rows, columns, [dict(zip(names, values, strict=True)) for values in cursor.fetchall()])


def build(connection: duckdb.DuckDBPyConnection, model: Model) -> BuiltTable:
    """Replace ``model``'s table with the result of its SQL, in one transaction."""
    try:
        with transaction(connection):
            connection.execute(f"CREATE OR REPLACE TABLE {model.name} AS\n{model.sql}")
    except duckdb.Error as error:
        raise ModelError(f"{model.path}: {error}") from None
    return describe_table(connection, model.name)


def build_all(connection: duckdb.DuckDBPyConnection, models: dict[str, Model]) -> list[BuiltTable]:
    return [build(connection, model) for model in build_order(models)]


def build_marts(connection: duckdb.DuckDBPyConnection,
                directory: Path | None = None) -> tuple[list[BuiltTable], list[TestOutcome]]:
    """Every model under ``directory`` built in order, then change_points from metric_history (when that is one of
    them), then every column test of its schema.yml run."""
    directory = directory or models_directory()
    models = discover(directory)
    built = build_all(connection, models)
    if METRIC_HISTORY in models:
        replace_change_points(connection)
        built.append(describe_table(connection, CHANGE_POINTS))
    tests = load_tests(directory / "schema.yml", set(models))
    return built, [run_test(connection, test) for group in tests.values() for test in group]
