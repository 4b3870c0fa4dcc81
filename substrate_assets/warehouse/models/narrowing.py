"""A model's SQL run over some trials only: each table it reads narrowed to their rows, read where they are cheapest
to pick out (a model's rows updated earlier in the refresh, the copy of a recent load, or the table itself)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import duckdb

from substrate_assets.warehouse import changes

# The parameter a narrowed query (:func:`narrowed_query`) takes the trials' ids in.
NARROWED_IDS = "narrowed_ids"


def updated_rows(name: str) -> str:
    """The temporary table an update computes a per-trial model's new rows into before they replace the old ones,
    and leaves them in until the refresh ends (:func:`drop_updated_rows`): the models that read it, and its tests,
    read the updated trials' rows there instead of picking them out of its whole table."""
    return f'temp.main."{name}__updated_rows"'


def held_rows(books: changes.Books | None) -> dict[str, str]:
    """Per model updated trial by trial in this refresh, its :func:`updated_rows` table: the ``rows`` its column
    tests read (:func:`run_test_groups`)."""
    return {name: updated_rows(name) for name in books.updated} if books is not None else {}


def drop_updated_rows(connection: duckdb.DuckDBPyConnection, books: changes.Books) -> None:
    """Drop every model's :func:`updated_rows` table of this refresh (in one round trip)."""
    if books.updated:
        connection.execute(";\n".join(f"DROP TABLE IF EXISTS {updated_rows(name)}" for name in sorted(books.updated)))
        books.updated.clear()


def narrowed_source(name: str, trial_ids: Collection[str], books: changes.Books | None, database: str) -> str:
    """Where a narrowed query reads ``name``'s rows of ``trial_ids``: the rows a model's update left in this refresh,
    the copies :mod:`changes` keeps of a raw table's recent loads, or the table itself."""
    if books is not None and name in books.updated and set(trial_ids) <= set(books.updated[name]):
        return updated_rows(name)
    copies = books.copies(name, trial_ids) if books is not None else None
    if copies is None:
        return f'"{database}".main."{name}"'
    if len(copies) == 1:
        return copies[0]
    return "(" + " UNION ALL BY NAME ".join(f"SELECT * FROM {copy}" for copy in copies) + ")"


def narrowed_query(connection: duckdb.DuckDBPyConnection, select: str, tables: Collection[str],
                   trial_ids: Sequence[str], books: changes.Books | None = None) -> str:
    """``select`` with each of ``tables`` holding only the rows of the trials given in the parameter
    ``$narrowed_ids`` (:data:`NARROWED_IDS`): a CTE of each table's name around it, which its table references
    resolve to before the warehouse's tables (within nested queries and CTEs too), so it costs no statement of its
    own. A raw table reads the copy :mod:`changes` keeps of a recent load when it has one for every trial, and a
    model updated earlier in the refresh the rows its update left (:func:`updated_rows`): picking a trial out of a
    whole table reads all its trial_ids. ``books``: the bookkeeping, when already read (none for a warehouse without
    it)."""
    database = books.database if books is not None else changes.database(connection)
    ctes = [f'"{name}" AS (SELECT * FROM {narrowed_source(name, trial_ids, books, database)} '
            f"WHERE list_contains(${NARROWED_IDS}::VARCHAR[], trial_id))" for name in sorted(tables)]
    return f"WITH {', '.join(ctes)}\nSELECT * FROM (\n{select}\n)" if ctes else select
