"""The request log: every request a driver made, with its exact latency, as ``requests.parquet``.

A driver process buffers rows and flushes them every few seconds as numbered
Parquet parts (each written atomically), so a killed run keeps everything up
to its last flush. :func:`merge_parts` joins the parts into one file.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import fsspec
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
    """Collects records and writes ``part-<pid>-<writer>-<n>.parquet`` files into ``directory``.

    ``<writer>`` is random per writer: Locust workers in different pods often share a PID, and their
    parts meet in one place.

    With ``upload_to`` (an fsspec URL), each part is also copied there as soon as it is written: a
    distributed Locust worker's requests reach the store that its master merges from.
    """

    def __init__(self, directory: Path, upload_to: str | None = None) -> None:
        self.directory = directory
        self.upload_to = upload_to.rstrip("/") if upload_to else None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._rows: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._parts = 0
        self._writer = secrets.token_hex(4)
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
        path = self.directory / f"part-{os.getpid()}-{self._writer}-{number:06d}.parquet"
        with atomic_path(path) as partial:
            frame.write_parquet(partial)
        if self.upload_to is not None:
            filesystem, base = fsspec.core.url_to_fs(self.upload_to)
            filesystem.makedirs(base, exist_ok=True)
            filesystem.put_file(str(path), f"{base}/{path.name}")  # one object per part: whole or absent
        self.written += len(rows)
        return path


def merge_parts(directories: Path | list[Path], output: Path) -> int:
    """Join every part in ``directories`` into ``output`` (atomically); the number of rows written."""
    if isinstance(directories, Path):
        directories = [directories]
    parts = sorted(part for directory in directories if directory.is_dir()
                   for part in directory.glob("part-*.parquet"))
    frames = [pl.read_parquet(part) for part in parts]
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=REQUESTS_SCHEMA)
    frame = frame.sort("ts", maintain_order=True)
    with atomic_path(output) as partial:
        frame.write_parquet(partial)
    return frame.height


def take_uploaded_parts(url: str, into: Path) -> Path:
    """Copy the parts that ``RequestLogWriter(upload_to=url)`` writers uploaded into ``into``, then remove them
    from ``url``; ``into`` is ready for :func:`merge_parts`."""
    filesystem, base = fsspec.core.url_to_fs(url)
    base = base.rstrip("/")
    into.mkdir(parents=True, exist_ok=True)
    for path in filesystem.glob(f"{base}/part-*.parquet"):
        filesystem.get_file(path, str(into / Path(path).name))
    if filesystem.exists(base):
        filesystem.rm(base, recursive=True)
    return into
