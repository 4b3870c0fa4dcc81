"""The last total row of a ``stats_history.csv`` that Locust is still appending to, read at a constant cost per
look: each look reads only the bytes appended since the one before.

Re-reading the whole file each second (as a one-off reader does) costs a soak of hours a time that grows with the
trial, quadratic over it. Locust only ever appends rows here, each ended by a line end; a row still being written
has none yet and is kept back until it has.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from substrate_assets.results.keys import measurement_key
from substrate_assets.results.trial_directory import TOTAL_ROW_NAMES


class StatsHistoryTail:
    """Follows one ``stats_history.csv``: :meth:`latest_totals` gives users, requests and failures of the last total
    row seen so far; ``bytes_read`` counts every byte read from the file, so a caller can see what a look cost."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_read = 0
        self._offset = 0
        self._pending = b""
        self._header: list[str] | None = None
        self._latest: dict[str, Any] = {}

    def latest_totals(self) -> dict[str, Any]:
        """Users, requests and failures of the last complete total row; empty while there is none."""
        try:
            with self.path.open("rb") as handle:
                if handle.seek(0, io.SEEK_END) < self._offset:
                    self._restart()  # the file was replaced by a shorter one: follow the new file from its start
                handle.seek(self._offset)
                appended = handle.read()
        except OSError:
            return self._latest
        self.bytes_read += len(appended)
        self._offset += len(appended)
        data = self._pending + appended
        complete, _, self._pending = data.rpartition(b"\n")
        if complete:
            self._take(complete.decode("utf-8", errors="replace"))
        return self._latest

    def _restart(self) -> None:
        self._offset, self._pending, self._header, self._latest = 0, b"", None, {}

    def _take(self, text: str) -> None:
        for record in csv.reader(io.StringIO(text, newline="")):
            if not record:
                continue
            if self._header is None:
                self._header = [measurement_key(column) for column in record]
                continue
            if len(record) != len(self._header):
                continue  # not Locust's row: the finished trial's reader names it, the progress line skips it
            row = dict(zip(self._header, record, strict=True))
            if row.get("name", "").strip() in TOTAL_ROW_NAMES:
                self._latest = {"users": _count(row.get("user_count")),
                                "requests": _count(row.get("total_request_count")),
                                "failures": _count(row.get("total_failure_count"))}


def _count(text: str | None) -> int | None:
    """A CSV count as an int; None where the row has none (``N/A``, empty)."""
    try:
        return None if text is None else int(float(text))
    except ValueError:
        return None
