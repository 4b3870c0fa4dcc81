"""The request log: every request a driver made, with its exact latency, as ``requests.parquet``.

A driver process buffers rows and flushes them every few seconds as numbered
Parquet parts (each written atomically), so a killed run keeps everything up
to its last flush. :func:`merged_requests` joins the parts into one log, :func:`merge_parts` into one file.

Locust's stats.csv and the log are one population: every row carries the
load ``phase`` it completed in (``ramp_up`` while Locust spawns users,
``steady`` while it runs them, ``stopping`` once the run is over and sessions
tear down) and ``locust_seq``, its 1-based position among the requests of its
(type, name) that the process booked. Locust rewrites stats.csv every second
and not after its users have stopped, so the requests it counts for a name are
exactly the first ``Request Count`` of them: ``locust_counted`` says which rows
those are (null where that cannot be known: a distributed run, whose master
counts its workers' reports).

``wake`` marks the requests that are the first touch of a parked actor, each workload family's wake row
(``WakeFirstTouch``, the first ``GluttonPing`` after a resume, ``DurDirServeAfterResume``,
``ResumeToFirstExec``): true for those, false for the family's other requests.

A part that cannot be written (a full disk) stops the writer for good: it raises
:class:`~substrate_assets.results.atomic.WriteFailed` once, keeps every part
written before (each is whole) and drops what it is given afterwards. The Locust
process then stops its run and leaves the reason in a *stop-reason file*
(:func:`write_stop_reason`) outside the full disk, which the driver reads
(:func:`stop_reason`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsFloat

import fsspec
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from substrate_assets.results.atomic import WriteFailed, atomic_path, write_parquet
from substrate_assets.results.readers import REQUESTS_SCHEMA, read_requests

FLUSH_INTERVAL_S = 2.0
# Which rows Locust counted is known only once its stats.csv is final, when the parts are merged.
PART_SCHEMA = {name: dtype for name, dtype in REQUESTS_SCHEMA.items() if name != "locust_counted"}
# The load phase a request completed in, by the state of the Locust runner that booked it.
PHASES = ("ramp_up", "steady", "stopping")
# Locust's exit code when it stopped its run because a write failed: the driver knows why even when the
# stop-reason file could not be written either.
WRITE_FAILED_EXIT_CODE = 3
STOP_REASON_FILE = "locust-stop-reason.txt"
_PART_FIELDS = tuple(PART_SCHEMA)
_PART_ARROW = pl.DataFrame(schema=PART_SCHEMA).to_arrow().schema
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestRecord:
    ts: float | None
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
    phase: str | None = None
    locust_seq: int | None = None
    wake: bool | None = None


def start_seconds(value: SupportsFloat | str | None) -> float | None:
    """A request's start as Unix seconds; a request reported without one has none (it did not start at the epoch)."""
    return None if value is None else float(value)


class RequestLogWriter:
    """Collects records and writes ``part-<pid>-<writer>-<n>.parquet`` files into ``directory``.

    ``<writer>`` is random per writer: Locust workers in different pods often share a PID, and their
    parts meet in one place.

    With ``upload_to`` (an fsspec URL), each part is also copied there as soon as it is written (a part
    whose upload fails is tried again at the next flush), and :meth:`finish` uploads a
    ``done-<pid>-<writer>.json`` marker after the last part: a distributed Locust worker's requests reach
    the store its master merges from, and the master knows when they are all there.
    """

    def __init__(self, directory: Path, upload_to: str | None = None) -> None:
        self.directory = directory
        self.upload_to = upload_to.rstrip("/") if upload_to else None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._rows: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._parts = 0
        self._writer = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._unsent: list[Path] = []
        self._sent: list[str] = []
        self.written = 0
        self.failed: WriteFailed | None = None
        self.dropped = 0
        self.last_flush = time.monotonic()
        self._store = fsspec.core.url_to_fs(self.upload_to) if self.upload_to is not None else None
        if self._store is not None:
            filesystem, base = self._store
            filesystem.makedirs(base, exist_ok=True)

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            if self.failed is not None:
                self.dropped += 1
                return
            self._rows.append(record)

    def flush(self) -> Path | None:
        """Write the rows collected since the last flush as one part; :class:`WriteFailed` the first time a part
        cannot be written, nothing (and no writing) after that."""
        with self._lock:
            if self.failed is not None:
                self.dropped += len(self._rows)
                self._rows = []
                return None
            rows, self._rows = self._rows, []
            self._parts += 1
            number = self._parts
        self.last_flush = time.monotonic()
        path = None
        if rows:
            data = part_bytes(rows)
            path = self.directory / f"part-{self._writer}-{number:06d}.parquet"
            try:
                with atomic_path(path) as partial:
                    partial.write_bytes(data)
            except WriteFailed as error:
                with self._lock:
                    self.failed = error
                    self.dropped += len(rows)
                raise
            self.written += len(rows)
            if self._store is not None:
                self._unsent.append(path)
        self._upload()
        return path

    def _upload(self) -> bool:
        """Send every part not sent yet (one object per part: whole or absent); False if some could not be."""
        if self._store is None:
            return True
        filesystem, base = self._store
        while self._unsent:
            path = self._unsent[0]
            try:
                filesystem.put_file(str(path), f"{base}/{path.name}")
            except Exception as error:  # a store hiccup must not end the worker's logging
                log.warning("request log: uploading %s to %s failed (%s); trying again at the next flush",
                            path.name, self.upload_to, error)
                return False
            self._sent.append(self._unsent.pop(0).name)
        return True

    def finish(self, attempts: int = 5, pause_s: float = 2.0) -> bool:
        """The last flush; with ``upload_to``, every part sent and then the ``done`` marker. False if the
        store kept refusing."""
        self.flush()
        if self._store is None:
            return True
        filesystem, base = self._store
        for attempt in range(attempts):
            if self._upload():
                marker = {"writer": self._writer, "parts": self._sent, "rows": self.written}
                try:
                    filesystem.pipe_file(f"{base}/done-{self._writer}.json", json.dumps(marker).encode())
                    return True
                except Exception as error:  # reported below, after the last attempt
                    log.warning("request log: writing the done marker to %s failed (%s)", self.upload_to, error)
            if attempt + 1 < attempts:
                time.sleep(pause_s)
        log.error("request log: %d parts never reached %s", len(self._unsent), self.upload_to)
        return False


def part_bytes(rows: list[RequestRecord]) -> bytes:
    """One part's Parquet file, the same table polars writes for ``PART_SCHEMA``, built column by column with
    pyarrow in memory: a part every 2 s woke polars' thread pools in the Locust process (about 1.5 ms of CPU for
    a few rows); the bytes then go to disk as a plain write, so a full disk is an ``OSError`` with its errno."""
    columns = zip(*([getattr(row, name) for name in _PART_FIELDS] for row in rows), strict=True)
    table = pa.Table.from_arrays([pa.array(column, type=field.type) for column, field in zip(
        columns, _PART_ARROW, strict=True)], schema=_PART_ARROW)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def write_stop_reason(path: Path, reason: str) -> bool:
    """Leave ``reason`` (one line) for the driver; False if even that cannot be written."""
    try:
        path.write_text(reason.strip().replace("\n", " ") + "\n")
    except OSError as error:
        log.error("cannot leave the stop reason in %s (%s)", path, error)
        return False
    return True


def stop_reason(path: Path | None, exit_code: int | None) -> str | None:
    """Why Locust stopped its run early, in one line: what it left in ``path``, else what its exit code says;
    None when it did not stop on a failed write."""
    if path is not None:
        try:
            text = path.read_text(errors="replace").strip()
        except OSError:
            text = ""
        if text:
            return text.splitlines()[0]
    if exit_code == WRITE_FAILED_EXIT_CODE:
        return "a write failed (the reason could not be written either; see locust.log)"
    return None


def merge_parts(directories: Path | list[Path], output: Path,
                locust_counts: Mapping[tuple[str, str], int] | None = None) -> pl.DataFrame:
    """Join every part in ``directories`` into ``output`` (atomically); the rows written (:func:`merged_requests`)."""
    frame = merged_requests(directories, locust_counts)
    write_parquet(output, frame)
    return frame


def merged_requests(directories: Path | list[Path],
                    locust_counts: Mapping[tuple[str, str], int] | None = None) -> pl.DataFrame:
    """Every part in ``directories`` joined into one log, as :func:`~substrate_assets.results.readers.read_requests`
    reads the written file back.

    ``locust_counts`` is Locust's final ``Request Count`` per (type, name) of the one process that logged
    every part; with it each row's ``locust_counted`` is set, without it (unknown) left null."""
    if isinstance(directories, Path):
        directories = [directories]
    parts = sorted(part for directory in directories if directory.is_dir()
                   for part in directory.glob("part-*.parquet"))
    frames = [read_requests(part).drop("locust_counted") for part in parts]
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=REQUESTS_SCHEMA).drop("locust_counted")
    frame = frame.with_columns(_counted(frame, locust_counts)).select(list(REQUESTS_SCHEMA))
    return frame.sort("ts", maintain_order=True)


def _counted(frame: pl.DataFrame, locust_counts: Mapping[tuple[str, str], int] | None) -> pl.Expr:
    if locust_counts is None:
        return pl.lit(None, dtype=pl.Boolean()).alias("locust_counted")
    counts = pl.DataFrame([{"request_type": kind, "name": name, "_count": count}
                           for (kind, name), count in locust_counts.items()],
                          schema={"request_type": pl.Utf8(), "name": pl.Utf8(), "_count": pl.Int64()})
    joined = frame.select("request_type", "name").join(counts, on=["request_type", "name"], how="left",
                                                       maintain_order="left")
    # A name stats.csv does not list was booked after its last write: none of its rows were counted.
    return (pl.col("locust_seq") <= joined["_count"].fill_null(0)).alias("locust_counted")


@dataclass(frozen=True)
class TakenParts:
    directory: Path
    writers_done: int
    rows_reported: int


def take_uploaded_parts(url: str, into: Path, *, writers: int = 0, wait_s: float = 0.0,
                        poll_s: float = 1.0) -> TakenParts:
    """Copy the parts that ``RequestLogWriter(upload_to=url)`` writers uploaded into ``into``, then remove them
    from ``url``. Waits up to ``wait_s`` for ``writers`` done markers first: a Locust master exits before its
    workers have torn their sessions down and sent their last parts."""
    filesystem, base = fsspec.core.url_to_fs(url)
    base = base.rstrip("/")
    deadline = time.monotonic() + wait_s
    while True:
        filesystem.invalidate_cache()
        markers = filesystem.glob(f"{base}/done-*.json")
        if len(markers) >= writers or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    rows = sum(json.loads(filesystem.cat_file(marker))["rows"] for marker in markers)
    into.mkdir(parents=True, exist_ok=True)
    for path in filesystem.glob(f"{base}/part-*.parquet"):
        filesystem.get_file(path, str(into / Path(path).name))
    if filesystem.exists(base):
        filesystem.rm(base, recursive=True)
    return TakenParts(into, len(markers), rows)
