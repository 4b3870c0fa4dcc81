"""The warehouse (a DuckDB file or a shared DuckLake) as a resource."""

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field

from substrate_assets.project import WAREHOUSE_ENV, warehouse_path
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import Warehouse, warehouse_location


class WarehouseResource(DuckDBResource):
    """The warehouse: ``database`` is a file path or a DuckLake location (``ducklake:postgres:…``, never with a
    password: PGPASSWORD and AWS_* carry the secrets). Its connections follow the warehouse's lock discipline (a
    writer waits, and says so in the run's logs, while another process holds the file or the lake's writer lock)
    and come with the warehouse's functions registered."""

    database: str = Field(default_factory=lambda: os.environ.get(WAREHOUSE_ENV) or str(warehouse_path()))

    def location(self) -> Warehouse:
        return warehouse_location(self.database)

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with connect(self.location(), on_wait=dg.get_dagster_logger().info) as connection:
            yield connection

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return self.get_connection()

    def read(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A reader's connection: it does not wait, and holds no writer's lock."""
        return connect(self.location(), read_only=True)
