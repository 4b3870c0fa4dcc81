"""The runtime's event log: every checkpoint, restore, pause, unpause and crash, with exact timings, and every
warm host that failed to start (a wake that finds no warm host waits for a cold start)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

import polars as pl

EVENT_KINDS = ("checkpoint", "restore", "pause", "unpause", "crash", "host_start_failed", "revert")

EVENT_SCHEMA = {
    "kind": pl.Utf8,
    "atespace": pl.Utf8,
    "actor": pl.Utf8,
    "start_ts": pl.Float64,
    "duration_s": pl.Float64,
    "bytes": pl.Int64,
    "pages_bytes": pl.Int64,
    "files_bytes": pl.Int64,
    "worker": pl.Int64,
    "detail": pl.Utf8,
}


@dataclass(frozen=True)
class RuntimeEvent:
    """One lifecycle event. ``start_ts`` is Unix seconds; byte counts are null when nothing was moved."""

    kind: str
    atespace: str
    actor: str
    start_ts: float
    duration_s: float
    bytes: int | None = None
    pages_bytes: int | None = None
    files_bytes: int | None = None
    worker: int | None = None
    detail: str | None = None


class EventLog:
    def __init__(self) -> None:
        self._events: list[RuntimeEvent] = []
        self._lock = threading.Lock()

    def append(self, event: RuntimeEvent) -> None:
        if event.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {event.kind!r}")
        with self._lock:
            self._events.append(event)

    def events(self) -> list[RuntimeEvent]:
        with self._lock:
            return list(self._events)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame([asdict(e) for e in self.events()], schema=EVENT_SCHEMA)
