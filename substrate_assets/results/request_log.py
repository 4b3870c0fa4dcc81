"""The request log: every request a driver made, with its exact latency, as ``requests.parquet``.

A driver process buffers rows and flushes them every few seconds as numbered
Parquet parts (each written atomically), so a killed run keeps everything up
to its last flush. :func:`merge_parts` joins the parts into one file.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from substrate_assets.results.atomic import atomic_path
from substrate_assets.results.readers import REQUESTS_SCHEMA

FLUSH_INTERVAL_S = 2.0


@dataclass(frozen=True)
class RequestRecord:
    ts: float
    request_type: str
    name: str
    latency_ms: float
    response_time_ms: int
    response_length: int
    success: bool
    error: str | None = None
    session_id: str | None = None
    step: str | None = None
    step_index: int | None = None
    lap: int | None = None


class RequestLogWriter:
    """Collects records and writes ``part-<pid>-<n>.parquet`` files into ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._rows: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._parts = 0
        self.written = 0
        self.last_flush = time.monotonic()

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._rows.append(record)

    def flush(self) -> Path | None:
        with self._lock:
            rows, self._rows = self._rows, []
            self._parts += 1
            number = self._parts
        self.last_flush = time.monotonic()
        if not rows:
            return None
        frame = pl.DataFrame([row.__dict__ for row in rows], schema=REQUESTS_SCHEMA, orient="row")
        path = self.directory / f"part-{os.getpid()}-{number:06d}.parquet"
        with atomic_path(path) as partial:
            frame.write_parquet(partial)
        self.written += len(rows)
        return path


def merge_parts(directory: Path, output: Path) -> int:
    """Join every part in ``directory`` into ``output`` (atomically); the number of rows written."""
    parts = sorted(directory.glob("part-*.parquet")) if directory.is_dir() else []
    frames = [pl.read_parquet(part) for part in parts]
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=REQUESTS_SCHEMA)
    frame = frame.sort("ts", maintain_order=True)
    with atomic_path(output) as partial:
        frame.write_parquet(partial)
    return frame.height
