"""Connections to the warehouse file, with the functions every model may call.

They are :mod:`substrate_assets.analysis.statistics` in SQL, and a property test keeps each equal to its
Python original:

- ``py_round(x, digits)``: the reference's rounding (Python's ``round``; DuckDB's own ``round`` goes half away
  from zero, so ``round(0.125, 2)`` would differ). A Python function, so it *is* the original.
- ``floor_index(values, permille)``: the floor-index percentile, in integer arithmetic; null for an empty list.
- ``locust_bucket(ms)``: the response time Locust files ``ms`` under in its histogram.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from substrate_assets.analysis.statistics import reference_round

MACROS = ("""
CREATE OR REPLACE TEMP MACRO floor_index(vals, permille) AS
    CASE WHEN vals IS NULL OR len(vals) = 0 THEN NULL
         ELSE list_sort(vals)[least((len(vals) * permille) // 1000, len(vals) - 1) + 1] END
""", """
CREATE OR REPLACE TEMP MACRO locust_bucket(ms) AS
    CAST(CASE WHEN ms < 100 THEN round_even(ms, 0)
              WHEN ms < 1000 THEN round_even(ms, -1)
              WHEN ms < 10000 THEN round_even(ms, -2)
              ELSE round_even(ms, -3) END AS BIGINT)
""")


def prepare(connection: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Register the warehouse's functions on ``connection`` (idempotent)."""
    with contextlib.suppress(duckdb.CatalogException):  # already registered on this connection
        connection.create_function("py_round", reference_round, ["DOUBLE", "INTEGER"], "DOUBLE",
                                   side_effects=False)
    for macro in MACROS:
        connection.execute(macro)
    return connection


@contextmanager
def connect(path: Path, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived connection; DuckDB allows one writing process per file."""
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    connection = duckdb.connect(str(path), read_only=read_only)
    try:
        yield prepare(connection)
    finally:
        connection.close()
