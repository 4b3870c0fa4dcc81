"""What the warehouse holds, asked of DuckDB's catalog: its tables and their columns (a file's or a lake's alike)."""

from __future__ import annotations

import duckdb


def table_names(connection: duckdb.DuckDBPyConnection, database: str | None = None,
                schema: str = "main") -> list[str]:
    """The tables of ``database`` (default: the one in use; never a TEMP table) in ``schema``, by name."""
    return [row[0] for row in connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = coalesce(?, current_database()) "
        "AND schema_name = ? ORDER BY table_name", [database, schema]).fetchall()]


def has_table(connection: duckdb.DuckDBPyConnection, name: str, schema: str = "main") -> bool:
    """Whether the warehouse (not a TEMP table, not another attached database) has the table ``schema.name``."""
    return name in table_names(connection, schema=schema)


def table_columns(connection: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, str]]:
    """``name``'s columns and their types, in order."""
    return [(row[0], row[1]) for row in connection.execute(f"DESCRIBE {name}").fetchall()]
