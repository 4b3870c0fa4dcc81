"""A real S3 API on 127.0.0.1 for tests: moto's server, in this process's thread, with one bucket."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import boto3
from moto.server import ThreadedMotoServer

from tests.support.ports import free_port

REGION = "us-east-1"
KEY_ID, SECRET = "testing-key", "testing-secret"


@dataclass(frozen=True)
class S3:
    endpoint: str  # host:port
    bucket: str

    def secret_sql(self, name: str = "store") -> str:
        """The DuckDB secret that reaches this endpoint, as a caller builds it from the AWS_* environment."""
        return (f"CREATE OR REPLACE SECRET {name} (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET}', REGION '{REGION}', "
                f"ENDPOINT '{self.endpoint}', URL_STYLE 'path', USE_SSL false)")


@contextmanager
def s3_server(bucket: str = "lake") -> Iterator[S3]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name=REGION, aws_access_key_id=KEY_ID,
                     aws_secret_access_key=SECRET).create_bucket(Bucket=bucket)
        yield S3(f"127.0.0.1:{port}", bucket)
    finally:
        server.stop()
