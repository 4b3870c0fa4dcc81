"""What a built table holds (its columns, row count and first rows), and whether two tables hold the same rows."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.introspection import table_columns


@dataclass(frozen=True)
class BuiltTable:
    name: str
    rows: int
    columns: list[tuple[str, str]]
    preview: list[dict[str, Any]]
    # The trials whose rows this build replaced; None when it built the whole table.
    updated: tuple[str, ...] | None = None


def describe_table(connection: duckdb.DuckDBPyConnection, name: str, preview_rows: int = 10,
                   updated: Sequence[str] | None = None, books: changes.Books | None = None) -> BuiltTable:
    """``name``'s columns (as ``books`` knows them, when given), row count and first rows."""
    return describe_tables(connection, [(name, updated)], preview_rows, books)[0]


def describe_tables(connection: duckdb.DuckDBPyConnection, tables: Sequence[tuple[str, Sequence[str] | None]],
                    preview_rows: int = 10, books: changes.Books | None = None) -> list[BuiltTable]:
    """:func:`describe_table` of each (table, the trials its build updated) of ``tables``: a query per table for its
    count and first rows, or, without a preview, one for every count (a UNION ALL: as scalar subqueries of one
    SELECT, DuckDB would plan a join of a dozen relations, and ordering it costs tens of milliseconds)."""
    if not tables:
        return []
    limit = int(preview_rows)
    columns = [booked_columns(connection, name, books) for name, _ in tables]
    if limit > 0:
        found = []
        # Whether trial_manifests has started_at: asked once, and only when a table is ordered by it.
        manifests = functools.cache(lambda: _has_manifests(connection, books))
        for (name, _), described in zip(tables, columns, strict=True):
            newest = _newest_first(name, {column for column, _ in described}, manifests)
            cursor = connection.execute(f"SELECT (SELECT count(*) FROM {name}) AS count_rows, * FROM {name} AS t "
                                        f"{newest} LIMIT {limit}")
            names = [d[0] for d in cursor.description][1:]
            preview = cursor.fetchall()
            # An empty preview is an empty table (the count rides on each preview row).
            found.append((preview[0][0] if preview else 0,
                          [dict(zip(names, values[1:], strict=True)) for values in preview]))
    else:
        counts = dict(connection.execute(" UNION ALL ".join(
            f"SELECT {index} AS part, count(*) FROM {name}" for index, (name, _) in enumerate(tables))).fetchall())
        found = [(counts[index], []) for index in range(len(tables))]
    return [BuiltTable(name, rows, described, preview, None if updated is None else tuple(updated))
            for (name, updated), described, (rows, preview) in zip(tables, columns, found, strict=True)]


def _newest_first(name: str, columns: set[str], manifests: Callable[[], bool]) -> str:
    """The ORDER BY that puts a table's newest rows first in its preview: by the row's own started_at, else by its
    trial's (trial_manifests), then trial id; nothing for a table with neither (a person looks at the newest trial,
    and a table's scan order is its oldest rows first). ``manifests``: whether trial_manifests has started_at."""
    if "started_at" in columns:
        return 'ORDER BY t."started_at" DESC NULLS LAST' + (', t."trial_id" DESC' if "trial_id" in columns else "")
    if "trial_id" in columns and name != "trial_manifests" and manifests():
        return ('ORDER BY (SELECT max(m.started_at) FROM trial_manifests AS m WHERE m.trial_id = t.trial_id) '
                'DESC NULLS LAST, t."trial_id" DESC')
    return ""


def _has_manifests(connection: duckdb.DuckDBPyConnection, books: changes.Books | None) -> bool:
    if books is not None and "trial_manifests" in books.columns:
        return any(column == "started_at" for column, _ in books.columns["trial_manifests"])
    # Asked of the catalog, not by DESCRIBE: an error would abort the refresh's transaction.
    found = connection.execute(
        "SELECT count(*) > 0 FROM information_schema.columns WHERE table_catalog = current_database() AND "
        "table_schema = current_schema() AND table_name = 'trial_manifests' AND column_name = 'started_at'"
    ).fetchone()
    assert found is not None  # an aggregate over the whole table is one row
    return bool(found[0])


def booked_columns(connection: duckdb.DuckDBPyConnection, name: str,
                   books: changes.Books | None = None) -> list[tuple[str, str]]:
    """``name``'s columns and their types, in order: from ``books`` when it knows them (read with the bookkeeping,
    for every table at once), else asked (and kept there)."""
    if books is not None and name in books.columns:
        return books.columns[name]
    columns = table_columns(connection, name)
    if books is not None:
        books.columns[name] = columns
    return columns


def comparable(connection: duckdb.DuckDBPyConnection, table: str, books: changes.Books | None = None) -> str:
    """``table``'s columns for comparing its rows with another's: a MAP's entries sorted by key (a map is a set of
    entries, but DuckDB compares them in the order they were built, which a ``list`` aggregate leaves open).
    ``books``: the bookkeeping, when it knows the table's columns."""
    columns = booked_columns(connection, table, books)
    return ", ".join(f'map_from_entries(list_sort(map_entries("{name}"))) AS "{name}"'
                     if kind.startswith("MAP(") else f'"{name}"' for name, kind in columns)


def rows_apart(connection: duckdb.DuckDBPyConnection, left: str, right: str) -> int:
    """The rows of ``left`` that ``right`` lacks plus those of ``right`` that ``left`` lacks, copies counted: 0 when
    the two tables hold the same rows (in any order)."""
    one = f"SELECT {comparable(connection, left)} FROM {left}"
    other = f"SELECT {comparable(connection, right)} FROM {right}"
    found = connection.execute(f"SELECT (SELECT count(*) FROM ({one} EXCEPT ALL {other})) + "
                               f"(SELECT count(*) FROM ({other} EXCEPT ALL {one}))").fetchone()
    assert found is not None  # a SELECT without FROM is one row
    return int(found[0])
