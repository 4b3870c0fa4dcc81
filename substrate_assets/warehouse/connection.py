"""Connections to the warehouse file, with the functions every model may call.

- ``py_round(x, digits)``: Python's ``round``, which the reference's figures use
  (half-to-even on the exact binary value; DuckDB's own ``round`` rounds half
  away from zero, so ``round(0.125, 2)`` would differ).
- ``floor_index(values, permille)``: the reference percentile,
  ``sorted[min(floor(n * permille / 1000), n - 1)]``, in integer arithmetic;
  null for an empty list.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

FLOOR_INDEX = """
CREATE OR REPLACE TEMP MACRO floor_index(vals, permille) AS
    CASE WHEN vals IS NULL OR len(vals) = 0 THEN NULL
         ELSE list_sort(vals)[least((len(vals) * permille) // 1000, len(vals) - 1) + 1] END
"""


def _py_round(value: float, digits: int) -> float:
    return round(value, digits)


def prepare(connection: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Register the warehouse's functions on ``connection`` (idempotent)."""
    with contextlib.suppress(duckdb.CatalogException):  # already registered on this connection
        connection.create_function("py_round", _py_round, ["DOUBLE", "INTEGER"], "DOUBLE", side_effects=False)
    connection.execute(FLOOR_INDEX)
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
