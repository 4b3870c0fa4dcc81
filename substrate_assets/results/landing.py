"""A trial landing in its staging directory: what Locust left there gathered and read once (:func:`gather`), and
the trial's own files written in one go, each atomically, ``trial.json`` last (:func:`write_trial`).

Between the two the driver measures and judges; it reads no file of the trial again, and writes none itself."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.results.atomic import json_text, write_parquet, write_text
from substrate_assets.results.load_steps import StepSpan, read_ladder_spans
from substrate_assets.results.locust_files import LocustCsv, LocustFiles
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
