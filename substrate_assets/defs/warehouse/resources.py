"""The DuckDB warehouse as a resource."""

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field

from substrate_assets.project import warehouse_path
from substrate_assets.warehouse.connection import connect


class WarehouseResource(DuckDBResource):
    """The DuckDB warehouse. Its connections follow the warehouse's lock discipline (a writer waits, and says so in
    the run's logs, while another process holds the file) and come with the warehouse's functions registered."""

    database: str = Field(default_factory=lambda: str(warehouse_path()))

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with connect(Path(self.database), on_wait=dg.get_dagster_logger().info) as connection:
            yield connection

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return self.get_connection()

    def read(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A reader's connection: it does not wait, and holds no writer's lock."""
        return connect(Path(self.database), read_only=True)
