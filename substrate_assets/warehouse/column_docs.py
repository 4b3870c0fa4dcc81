"""What each warehouse column holds, in the words of ``dbt_like_sql/schema.yml`` (the models) and
``dbt_like_sql/sources.yml`` (the raw tables)."""

import hashlib
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.cache import cache_directory, files_digest, read_cached, write_cached
from substrate_assets.warehouse.checks import read_yaml
from substrate_assets.warehouse.connection import prepare
from substrate_assets.warehouse.models.discovery import models_directory
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.raw_tables import ensure_schema

SOURCES_FILE = "sources.yml"
SCHEMA_FILE = "schema.yml"


class ColumnDocsError(ValueError):
    """A description file does not read; the message names the file and the entry."""


def _columns(path: Path, table: dict[str, Any], where: str) -> dict[str, str]:
    described = {}
    for column in table.get("columns") or []:
        if not isinstance(column, dict) or not isinstance(column.get("name"), str):
            raise ColumnDocsError(f"{path}: {where}: a column entry without a name: {column!r}")
        description = column.get("description")
        if description is not None:
            described[column["name"]] = str(description).strip()
    return described


def column_descriptions(directory: Path | None = None) -> dict[str, dict[str, str]]:
    """Column descriptions by table, then column; a column without one is absent."""
    directory = directory or models_directory()
    tables: dict[str, dict[str, str]] = {}
    schema, sources = directory / SCHEMA_FILE, directory / SOURCES_FILE
    if schema.is_file():
        for model in read_yaml(schema).get("models") or []:
            tables[model["name"]] = _columns(schema, model, f"model {model['name']}")
    if sources.is_file():
        for source in read_yaml(sources).get("sources") or []:
            for table in source.get("tables") or []:
                tables[table["name"]] = _columns(sources, table, f"table {table['name']}")
    return tables


def table_columns() -> dict[str, list[tuple[str, str]]]:
    """Every warehouse table's columns and their DuckDB types, as an empty warehouse in memory has them once built
    (the raw tables, the models, change_points): what the catalog shows before anything is loaded."""
    with duckdb.connect() as connection:
        prepare(connection)
        ensure_schema(connection)
        build_marts(connection)
        # Schema main only: the bookkeeping of loads (schema changes) is no table anyone queries.
        rows = connection.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                                  "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    return tables


def _columns_key(directory: Path) -> str:
    """What an empty warehouse's columns follow from: DuckDB's version, the package's code (the raw tables' DDL and
    the Python-built models are code, and code they call shapes them) and every file of the models directory."""
    package = Path(__file__).resolve().parents[1]
    models = [path for path in directory.rglob("*") if path.suffix in {".sql", ".yml", ".yaml", ".py"}
              and path.is_file()]
    return hashlib.sha256(f"duckdb {duckdb.__version__}\n{files_digest(package.rglob('*.py'), package)}\n"
                          f"{files_digest(models, directory)}\n".encode()).hexdigest()


def _table_columns_of(value: object) -> dict[str, list[tuple[str, str]]] | None:
    """The tables' columns a cache file holds, or None when it holds anything else (built again, not trusted)."""
    if not isinstance(value, dict):
        return None
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, columns in value.items():
        if not (isinstance(columns, list) and all(
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)
                for pair in columns)):
            return None
        tables[str(table)] = [(column, kind) for column, kind in columns]
    return tables


def known_table_columns(directory: Path) -> dict[str, list[tuple[str, str]]]:
    """:func:`table_columns` for the models of ``directory``, kept across processes: building them on an empty
    warehouse costs ~0.35 s, paid by every process that loads the definitions, and hashing what they follow from
    ~10 ms. Built again when any of it changed; a build that fails is raised, not kept."""
    path = cache_directory("models") / "table-columns.json"
    key = _columns_key(directory)
    cached = read_cached(path)
    if isinstance(cached, dict) and cached.get("key") == key:
        kept = _table_columns_of(cached.get("tables"))
        if kept is not None:
            return kept
    tables = table_columns()
    write_cached(path, {"key": key, "tables": tables})
    return tables
