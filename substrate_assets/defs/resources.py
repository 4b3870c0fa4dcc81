"""Resources: where scripts, suites, the run store and the warehouse live."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field

from substrate_assets.project import project_root, scripts_directory, store_directory, warehouse_path
from substrate_assets.results.layout import RunStore
from substrate_assets.suites import Suite, get_suite
from substrate_assets.warehouse.connection import prepare
from substrate_assets.workload import ScriptLibrary


class ScriptLibraryResource(dg.ConfigurableResource):
    """The directory of workload scripts, ``scripts/<name>.yaml``."""

    directory: str = Field(default_factory=lambda: str(scripts_directory()),
                           description="Directory holding one YAML file per script.")

    def library(self) -> ScriptLibrary:
        return ScriptLibrary(Path(self.directory))


class SuitesResource(dg.ConfigurableResource):
    """``suites.yaml``: the named trial configurations."""

    path: str = Field(default_factory=lambda: str(project_root() / "suites.yaml"))

    def suite(self, name: str) -> Suite:
        return get_suite(name, Path(self.path))


class RunStoreResource(dg.ConfigurableResource):
    """The run store holding every trial directory (the source of truth)."""

    root: str = Field(default_factory=lambda: str(store_directory()))

    def store(self) -> RunStore:
        return RunStore(Path(self.root))


class WarehouseResource(DuckDBResource):
    """The DuckDB warehouse; connections come with the warehouse's functions registered."""

    database: str = Field(default_factory=lambda: str(warehouse_path()))

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with self.get_connection() as connection:
            yield prepare(connection)
