"""The runtime's event log: every checkpoint, restore, pause, unpause and crash, with exact timings, and every
warm host that failed to start (a wake that finds no warm host waits for a cold start). A restore says whether its
host came warm from the pool or was started for it (``host_start``): the two are a wake's fast and slow paths."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path

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
    "host_start": pl.Utf8,
}
# How a restore got its host: idle and started from the warm pool, or started while the wake waited.
HOST_STARTS = ("warm", "cold")


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
    host_start: str | None = None


class EventLog:
    """Every event of a runtime's life, in order. With :meth:`spill_to`, each ``spill_every`` events go to a Parquet
    part on disk and leave memory, so a runtime that wakes actors for hours holds a bounded log (a soak's trial
    process grew ~10 MB an hour from its events and samples); :meth:`events` and :meth:`frame` read the parts back."""

    def __init__(self, spill_every: int = 2000) -> None:
        self._events: list[RuntimeEvent] = []
        self._lock = threading.Lock()
        self.spill_every = spill_every
        self._spill_dir: Path | None = None
        self._parts: list[Path] = []

    @property
    def held_in_memory(self) -> int:
        return len(self._events)

    def spill_to(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._spill_dir = directory

    def keep_in_memory(self) -> None:
        """Read every spilled part back and spill no more: the spill directory is about to be removed."""
        with self._lock:
            spilled = self._spilled_events()
            self._events = spilled + self._events
            self._parts, self._spill_dir = [], None

    def append(self, event: RuntimeEvent) -> None:
        if event.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {event.kind!r}")
        with self._lock:
            self._events.append(event)
            if self._spill_dir is not None and len(self._events) >= self.spill_every:
                self._spill(self._spill_dir)

    def _spill(self, directory: Path) -> None:
        part = directory / f"events-{len(self._parts):06d}.parquet"
        # results.atomic sits above the runtime's layer: the same write-then-rename, here.
        written = part.with_suffix(".parquet.tmp")
        pl.DataFrame([asdict(e) for e in self._events], schema=EVENT_SCHEMA).write_parquet(written)
        written.rename(part)
        self._parts.append(part)
        self._events = []

    def _spilled_events(self) -> list[RuntimeEvent]:
        return [RuntimeEvent(**row) for part in self._parts for row in pl.read_parquet(part).iter_rows(named=True)]

    def events(self) -> list[RuntimeEvent]:
        with self._lock:
            return self._spilled_events() + list(self._events)

    def frame(self) -> pl.DataFrame:
        with self._lock:
            held = pl.DataFrame([asdict(e) for e in self._events], schema=EVENT_SCHEMA)
            return pl.concat([*(pl.read_parquet(part) for part in self._parts), held]) if self._parts else held
