"""Rows written by hand into the warehouse's raw tables, every column the rows leave out null, through the same
replace the loads use."""

import duckdb
import polars as pl

from substrate_assets.warehouse.raw_tables import RAW_TABLES
from substrate_assets.warehouse.trial_writes import replace_rows


def insert(connection: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    spec = RAW_TABLES[table]
    frame = pl.DataFrame([{**dict.fromkeys(spec.columns), **row} for row in rows], schema=spec.columns,
                         orient="row")
    replace_rows(connection, spec, {row["trial_id"] for row in rows}, frame)
