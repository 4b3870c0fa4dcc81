"""Where the warehouse is: one DuckDB file (the default), or a DuckLake shared by a team.

``$SUBSTRATE_BENCH_WAREHOUSE`` (or a reading command's ``--warehouse``) is either a file path or a DuckLake
location in DuckLake's own words, ``ducklake:postgres:<libpq connection string>``: the catalog in PostgreSQL. The
data path (``s3://bucket/prefix/`` or ``gs://…``) is ``$SUBSTRATE_BENCH_WAREHOUSE_DATA_PATH``; a reader may leave it
out (the catalog remembers it), the first writer may not.

Secrets never travel in the setting: the catalog's password comes from libpq's own sources (``PGPASSWORD``, a
pgpass file, a service file), and the object store's keys from the standard ``AWS_*`` variables
(:func:`object_store_secret`). A setting that carries a password in any libpq form (``password=``,
``sslpassword=``, a URI's ``?password=`` or ``user:password@``) is refused, without being repeated, so an accepted
one can be printed, logged and shown in Dagster metadata as it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from substrate_assets.project import LAKE_PREFIX, WAREHOUSE_ENV, warehouse_path
from substrate_assets.warehouse.sql_literal import quoted

DATA_PATH_ENV = "SUBSTRATE_BENCH_WAREHOUSE_DATA_PATH"
CATALOG_PREFIX = "ducklake:postgres:"
# The name the lake is attached under in every connection; models name tables without it (USE).
LAKE_ALIAS = "lake"


class BadWarehouseSetting(ValueError):
    """The warehouse setting does not name a file or a DuckLake this project can attach."""


@dataclass(frozen=True)
class Lake:
    """A DuckLake: its catalog's libpq connection string (no password) and its data path (None: the catalog's)."""

    conninfo: str
    data_path: str | None

    @property
    def catalog(self) -> str:
        return f"{CATALOG_PREFIX}{self.conninfo}"

    def __str__(self) -> str:
        return self.catalog if self.data_path is None else f"{self.catalog} (data in {self.data_path})"


Warehouse = Path | Lake


# A password in any libpq form: a keyword (``password=``, ``sslpassword=``) in a key=value string or in a URI's
# query (``?password=``, ``&password=``), or a URI's user information (``postgres://user:password@host``).
_SECRET = re.compile(r"password\s*=|://[^/@\s]*:[^/@\s]*@", re.IGNORECASE)


def _password_given(setting: str) -> bool:
    return _SECRET.search(setting) is not None


def parse_lake(setting: str, data_path: str | None) -> Lake:
    """The lake named by ``setting`` (``ducklake:postgres:…``), with ``data_path`` checked. The whole setting is
    checked for a password before anything else, and no error repeats a setting: a refused one may hold a secret."""
    if _password_given(setting):
        raise BadWarehouseSetting(f"{WAREHOUSE_ENV} carries a password: give it in PGPASSWORD, a pgpass file or a "
                                  "libpq service file instead, so it never shows in a command line, a log or the UI")
    if not setting.startswith(CATALOG_PREFIX):
        raise BadWarehouseSetting(f"{WAREHOUSE_ENV}: a DuckLake warehouse is "
                                  f"'{CATALOG_PREFIX}dbname=… host=… port=… user=…' (its catalog in PostgreSQL)")
    conninfo = setting[len(CATALOG_PREFIX):].strip()
    if not conninfo:
        raise BadWarehouseSetting(f"{WAREHOUSE_ENV}: the PostgreSQL connection string is empty")
    if data_path is not None:
        data_path = data_path.strip()
        scheme = urlsplit(data_path).scheme
        if scheme not in ("s3", "gs"):
            raise BadWarehouseSetting(f"{DATA_PATH_ENV}: expected s3://bucket/prefix/ or gs://bucket/prefix/, "
                                      f"not a {scheme + ':// URL' if scheme else 'local path'}")
        if not data_path.endswith("/"):
            data_path += "/"
    return Lake(conninfo, data_path)


def warehouse_location(setting: str | None = None) -> Warehouse:
    """The warehouse named by ``setting``, else ``$SUBSTRATE_BENCH_WAREHOUSE``, else ``<project>/warehouse.duckdb``."""
    text = setting if setting is not None else os.environ.get(WAREHOUSE_ENV)
    if text and text.startswith(LAKE_PREFIX):
        return parse_lake(text, os.environ.get(DATA_PATH_ENV) or None)
    return Path(text).resolve() if text else warehouse_path()


def object_store_secret(data_path: str, environ: dict[str, str] | None = None) -> str | None:
    """The DuckDB ``CREATE SECRET`` that reaches ``data_path`` with the keys of the standard ``AWS_*`` variables
    (``AWS_ENDPOINT_URL`` for an S3-compatible store; for ``gs://``, a bucket's HMAC key in the same two
    variables, as Google's S3 interoperability issues them), or None when the environment holds no key (a public
    bucket, or credentials DuckDB finds on its own)."""
    env = os.environ if environ is None else environ
    key_id, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not key_id or not secret:
        return None

    scheme = urlsplit(data_path).scheme
    options = [f"TYPE {'gcs' if scheme == 'gs' else 's3'}", f"KEY_ID {quoted(key_id)}", f"SECRET {quoted(secret)}",
               f"SCOPE {quoted(data_path)}"]
    if env.get("AWS_SESSION_TOKEN"):
        options.append(f"SESSION_TOKEN {quoted(env['AWS_SESSION_TOKEN'])}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options.append(f"REGION {quoted(region)}")
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint and scheme == "s3":
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options += [f"ENDPOINT {quoted(parts.netloc)}", "URL_STYLE 'path'",
                    f"USE_SSL {'false' if parts.scheme == 'http' else 'true'}"]
    return f"CREATE OR REPLACE SECRET warehouse_data ({', '.join(options)})"
