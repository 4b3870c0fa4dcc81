"""What a built table holds (its columns, row count and first rows), and whether two tables hold the same rows."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.introspection import table_columns
from substrate_assets.warehouse.models.narrowing import narrowed_source
from substrate_assets.warehouse.sql_literal import quoted


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
    SELECT, DuckDB would plan a join of a dozen relations, and ordering it costs tens of milliseconds).

    The preview of a model the refresh updated trial by trial (``books.updated``) is the rows its update wrote,
    newest first, read where the update left them (:func:`narrowed_source`): the lake only counts the table, where
    ordering the whole table reads every file of its history."""
    if not tables:
        return []
    limit = int(preview_rows)
    columns = [booked_columns(connection, name, books) for name, _ in tables]
    if limit > 0:
        found = []
        # Whether trial_manifests has started_at: asked once, and only when a table is ordered by it.
        manifests = functools.cache(lambda: _has_manifests(connection, books))
        newest = functools.cache(lambda trial_ids: _newest_trials_first(connection, trial_ids, manifests))
        for (name, updated), described in zip(tables, columns, strict=True):
            names = {column for column, _ in described}
            if updated and books is not None and name in books.updated:
                # The trials' start is asked only for a table whose rows do not carry their own.
                ordered = sorted(set(updated), reverse=True) if "started_at" in names else \
                    newest(tuple(sorted(set(updated))))
                found.append(_updated_rows(connection, name, narrowed_source(name, updated, books, books.database),
                                           ordered, names, limit))
                continue
            cursor = connection.execute(f"SELECT (SELECT count(*) FROM {name}) AS count_rows, * FROM {name} AS t "
                                        f"{_newest_first(name, names, manifests)} LIMIT {limit}")
            names_in_order = [d[0] for d in cursor.description][1:]
            preview = cursor.fetchall()
            # An empty preview is an empty table (the count rides on each preview row).
            found.append((preview[0][0] if preview else 0,
                          [dict(zip(names_in_order, values[1:], strict=True)) for values in preview]))
    else:
        counts = dict(connection.execute(" UNION ALL ".join(
            f"SELECT {index} AS part, count(*) FROM {name}" for index, (name, _) in enumerate(tables))).fetchall())
        found = [(counts[index], []) for index in range(len(tables))]
    return [BuiltTable(name, rows, described, preview, None if updated is None else tuple(updated))
            for (name, updated), described, (rows, preview) in zip(tables, columns, found, strict=True)]


def _updated_rows(connection: duckdb.DuckDBPyConnection, name: str, source: str, trial_ids: Sequence[str],
                  columns: set[str], limit: int) -> tuple[int, list[dict[str, Any]]]:
    """``name``'s row count and the first ``limit`` rows of ``trial_ids`` (read from ``source``, which holds them),
    newest first, in one statement whatever the rows: the count joined to the numbered rows, a row of nulls when
    there are none."""
    cursor = connection.execute(
        f"SELECT c.count_rows, t.* FROM (SELECT count(*) AS count_rows FROM {name}) AS c LEFT JOIN "
        f"(SELECT row_number() OVER ({_within(trial_ids, columns)}) AS preview_row, * FROM {source} AS t "
        f"WHERE t.trial_id IN ({_literals(trial_ids)})) AS t ON t.preview_row <= {limit} ORDER BY t.preview_row")
    names = [d[0] for d in cursor.description][2:]
    found = cursor.fetchall()
    return found[0][0], [dict(zip(names, values[2:], strict=True)) for values in found if values[1] is not None]


def _literals(trial_ids: Sequence[str]) -> str:
    return ", ".join(quoted(trial_id) for trial_id in trial_ids)


def _newest_trials_first(connection: duckdb.DuckDBPyConnection, trial_ids: tuple[str, ...],
                         manifests: Callable[[], bool]) -> list[str]:
    """``trial_ids`` in the order :func:`_newest_first` puts their rows: by their trial's start, newest first (a
    trial without one last), then by id, descending."""
    by_id = sorted(trial_ids, reverse=True)
    if len(by_id) < 2 or not manifests():
        return by_id
    started = dict(connection.execute(f"SELECT trial_id, max(started_at) FROM trial_manifests WHERE trial_id IN "
                                      f"({_literals(by_id)}) GROUP BY trial_id").fetchall())
    dated = sorted((trial_id for trial_id in by_id if started.get(trial_id) is not None),
                   key=lambda trial_id: started[trial_id], reverse=True)
    # sorted() is stable, also reversed: trials that started together keep their descending ids.
    return dated + [trial_id for trial_id in by_id if started.get(trial_id) is None]


def _within(trial_ids: Sequence[str], columns: set[str]) -> str:
    """The ORDER BY of ``trial_ids``' rows, newest first: by the row's own started_at when it has one, else by its
    trial's place in ``trial_ids``."""
    if "started_at" in columns:
        return 'ORDER BY t."started_at" DESC NULLS LAST, t."trial_id" DESC'
    if len(trial_ids) < 2:
        return ""
    return f"ORDER BY list_position([{_literals(trial_ids)}], t.trial_id)"


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
