"""A trial landing in its staging directory: what Locust left there gathered and read once (:func:`gather`), and
the trial's own files written in one go, each atomically, ``trial.json`` last (:func:`write_trial`).

Each file is read once: stats.csv and stats_history.csv as their bytes (:class:`LocustCsv`: the rows as text, their
damage and their typed frame all come from those bytes) and the merged request log as a frame. Every figure written
when a trial lands (the request log's ``locust_counted``, status.json, stats.jsonl's rows and ``trial_summary``, the
steady window, a ladder's steps, the trial's summary) reads these, not the files again; between the gathering and
the writing the driver measures and judges, and writes no file of the trial itself."""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.results.atomic import json_text, write_parquet, write_text
from substrate_assets.results.load_steps import StepSpan, read_ladder_spans
from substrate_assets.results.readers import (
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    DamagedCsv,
    csv_damage,
    read_requests,
    typed_locust_csv,
)
from substrate_assets.results.request_log import merged_requests
from substrate_assets.results.trial_directory import (
    LADDER_LOG,
    LOCUST_CSVS,
    LOCUST_LOG,
    REQUEST_LOG,
    REQUESTS_PARQUET,
    STATS_CSV,
    STATS_HISTORY_CSV,
    TRIAL_JSON,
    locust_csv,
)


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


@dataclass(frozen=True)
class StagedTrial:
    """What a landing reads from its staging directory, each file once: Locust's CSVs and the merged request log,
    the spans of the ladder's steps that started (none for a flat suite) and Locust's own log ("" without one);
    ``to_write`` is what was gathered but is not in the trial yet (the merged request log, by file name)."""

    files: LocustFiles
    spans: list[StepSpan]
    locust_log: str
    to_write: dict[str, pl.DataFrame] = field(default_factory=dict)

    @classmethod
    def read(cls, staging: Path, work: Path) -> StagedTrial:
        """What ``staging`` and its scratch area ``work`` already hold, nothing moved or merged: no ladder."""
        return cls(LocustFiles.read(staging), [], _locust_log(work))


def gather(staging: Path, work: Path, notes: list[str], *request_log_dirs: Path,
           ladder: Sequence[tuple[int, int]] | None, trial_end: float) -> StagedTrial:
    """Move Locust's CSVs into the trial under their basenames, merge every request-log part into one log (for
    requests.parquet) and read what the landing measures, each file once.

    ``request_log_dirs`` hold distributed workers' parts; without them the parts come from the one Locust
    process whose stats.csv says which rows it counted. ``ladder`` is a ladder suite's planned (users, hold_s)
    per step, whose ladder log says when each started; a step still running at ``trial_end`` ends there."""
    for kind, basename in LOCUST_CSVS.items():
        source = locust_csv(work, kind)
        if source.is_file():
            os.replace(source, staging / basename)
        else:
            notes.append(f"{basename} not produced")
    stats = LocustCsv.read(staging / STATS_CSV)
    history = LocustCsv.read(staging / STATS_HISTORY_CSV)
    counts = None if request_log_dirs or stats is None else stats.request_counts()
    requests = merged_requests([work / REQUEST_LOG, *request_log_dirs], counts)
    notes.append(f"{REQUESTS_PARQUET}: {requests.height} requests")
    spans = [] if ladder is None else read_ladder_spans(work / LADDER_LOG, ladder, trial_end)
    return StagedTrial(LocustFiles(stats, history, requests), spans, _locust_log(work), {REQUESTS_PARQUET: requests})


def _locust_log(work: Path) -> str:
    path = work / LOCUST_LOG
    return path.read_text(errors="replace") if path.exists() else ""


def write_trial(staging: Path, frames: Mapping[str, pl.DataFrame], documents: Mapping[str, str],
                manifest: dict[str, Any]) -> None:
    """Each of ``frames`` (as Parquet), then each of ``documents``, into ``staging`` under its name, atomically and in
    order; then trial.json: ``manifest`` with the size and SHA-256 of every file in the trial. It goes last, so a
    trial with a manifest is whole."""
    for name, frame in frames.items():
        write_parquet(staging / name, frame)
    for name, text in documents.items():
        write_text(staging / name, text)
    digests = {path.name: file_digest(path) for path in sorted(staging.iterdir()) if path.is_file()}
    write_text(staging / TRIAL_JSON, json_text({**manifest, "files": digests}))


def file_digest(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256")
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
