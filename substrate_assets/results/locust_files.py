"""What Locust left in a trial as it lands, each file read once: stats.csv and stats_history.csv as their bytes (the
rows as text, their damage and their typed frame all come from those bytes) and the merged request log as a frame.

Every figure written when a trial lands (the request log's ``locust_counted``, status.json, stats.jsonl's rows and
``trial_summary``, the steady window, a ladder's steps, the trial's summary) reads these, not the files again."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from substrate_assets.results.readers import (
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    DamagedCsv,
    csv_damage,
    read_requests,
    typed_locust_csv,
)
from substrate_assets.results.trial_directory import REQUESTS_PARQUET, STATS_CSV, STATS_HISTORY_CSV


class LocustCsv:
    """One of Locust's CSVs, read once."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data = path, data

    @classmethod
    def read(cls, path: Path) -> LocustCsv | None:
        """The CSV at ``path``; None when there is none."""
        return cls(path, path.read_bytes()) if path.is_file() else None

    @cached_property
    def damage(self) -> DamagedCsv | None:
        """Why its rows cannot be trusted one by one (:func:`csv_damage`), or None."""
        return csv_damage(self.path, self.data)

    def typed(self, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """Its rows, named and typed as :func:`~substrate_assets.results.readers.read_stats` types them;
        DamagedCsv for a damaged file, NoDataError for an empty one."""
        if self.damage is not None:
            raise self.damage
        if not self.data:
            raise pl.exceptions.NoDataError(f"{self.path}: empty CSV")
        return typed_locust_csv(pl.read_csv(io.BytesIO(self.data), infer_schema=False), schema)

    @cached_property
    def stats(self) -> pl.DataFrame:
        """As stats.csv: :func:`typed` by ``STATS_SCHEMA``."""
        return self.typed(STATS_SCHEMA)

    @cached_property
    def history(self) -> pl.DataFrame:
        """As stats_history.csv: :func:`typed` by ``STATS_HISTORY_SCHEMA``."""
        return self.typed(STATS_HISTORY_SCHEMA)

    @cached_property
    def records(self) -> list[dict[str, str]]:
        """Its rows as the CSV's own text, by header (``csv.DictReader``, as upstream's runner reads them), parsed
        once for status.json, stats.jsonl's rows and trial_summary; ValueError when it is not UTF-8, csv.Error when
        it is not CSV."""
        return list(csv.DictReader(io.StringIO(self.data.decode("utf-8"), newline="")))

    def request_counts(self) -> dict[tuple[str, str], int] | None:
        """As stats.csv: Locust's final ``Request Count`` per (type, name); None when a count is unreadable."""
        try:
            stats = self.stats.filter(pl.col("name") != "Aggregated")
        except pl.exceptions.PolarsError:  # damaged or empty: the landing warns of it; no locust_counted is known
            return None
        counts = {(kind, name): count for kind, name, count in stats.select("type", "name", "request_count").rows()}
        return None if None in counts.values() else counts


@dataclass(frozen=True)
class LocustFiles:
    """A landing trial's stats.csv and stats_history.csv (None where Locust wrote none) and its merged request log
    (None where it has none)."""

    stats: LocustCsv | None
    history: LocustCsv | None
    requests: pl.DataFrame | None

    @classmethod
    def read(cls, staging: Path) -> LocustFiles:
        """The files already in ``staging``."""
        log = staging / REQUESTS_PARQUET
        return cls(LocustCsv.read(staging / STATS_CSV), LocustCsv.read(staging / STATS_HISTORY_CSV),
                   read_requests(log) if log.is_file() else None)
