"""A shared warehouse for tests: a DuckLake whose catalog is a database of a real PostgreSQL server (its own per
test) and whose data sits under a prefix of a real S3 API (moto), with the environment a writer or a reader
process is given: the warehouse setting, the catalog role's password in PGPASSWORD and the store's keys in AWS_*."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import duckdb

from substrate_assets.project import WAREHOUSE_ENV
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import CATALOG_PREFIX, DATA_PATH_ENV, Lake
from tests.support.postgres import READER, WRITER, Postgres, postgres_server
from tests.support.s3 import KEY_ID, REGION, S3, SECRET, s3_server

_NUMBERS = itertools.count(1)


@dataclass(frozen=True)
class Servers:
    postgres: Postgres
    s3: S3


@dataclass(frozen=True)
class SharedLake:
    servers: Servers
    database: str
    data_path: str

    def location(self, role: str = WRITER) -> Lake:
        return Lake(self.servers.postgres.dsn(role, self.database), self.data_path)

    def env(self, role: str = WRITER) -> dict[str, str]:
        """What a process of ``role`` is given to reach the lake: no secret is in the setting itself."""
        return {WAREHOUSE_ENV: f"{CATALOG_PREFIX}{self.servers.postgres.dsn(role, self.database)}",
                DATA_PATH_ENV: self.data_path, "PGPASSWORD": self.servers.postgres.passwords[role],
                "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": REGION,
                "AWS_ENDPOINT_URL": f"http://{self.servers.s3.endpoint}"}


@contextmanager
def opened(lake: SharedLake, role: str = READER, read_only: bool = True,
           wait_s: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to ``lake`` in this process as ``role``, with the role's environment set while it is open
    (libpq reads PGPASSWORD whenever it opens a catalog connection, not only at the attach); a writer waits up to
    ``wait_s`` for the writer lock (default: connect's)."""
    with mock.patch.dict(os.environ, lake.env(role)), connect(lake.location(role), read_only=read_only,
                                                              wait_s=wait_s) as connection:
        yield connection


@contextmanager
def lake_servers() -> Iterator[Servers]:
    with postgres_server() as postgres, s3_server() as s3:
        yield Servers(postgres, s3)


def new_lake(servers: Servers) -> SharedLake:
    """A lake of its own: a new catalog database and a new data prefix."""
    number = next(_NUMBERS)
    database = servers.postgres.new_database(f"lake_{number}")
    return SharedLake(servers, database, f"s3://{servers.s3.bucket}/lake-{number}/")


__all__ = ["READER", "WRITER", "Servers", "SharedLake", "lake_servers", "new_lake", "opened"]
