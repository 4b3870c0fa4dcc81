"""A trial directory of the run store read into the rows of its raw tables, in memory, before anything is written.

A trial whose files do not read raises (or, read among many, is reported as) :class:`UnreadableTrial`, naming the
file and line, so that a load writes nothing of it. :func:`check_staged_trial` is the same reading, for checking a run
before it enters the store.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Collection
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from substrate_assets.results.layout import TrialKey
from substrate_assets.results.trial_directory import TRIAL_JSON, TrialDirectory
from substrate_assets.results.trial_key import EARLIEST_TS, LATEST_TS
from substrate_assets.warehouse.raw_tables import FILE_READERS, RAW_TABLES, RawTable


class UnreadableTrial(ValueError):
    """A trial directory whose files do not read into its raw tables: which file (and line, where known), and why,
    in one line."""

    def __init__(self, trial_dir: Path, where: str, reason: str) -> None:
        self.trial_dir, self.where, self.reason = trial_dir, where, reason
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[UnreadableTrial], tuple[Path, str, str]]:
        # Rebuilt from its three parts when it comes back from a reading process (pickled).
        return UnreadableTrial, (self.trial_dir, self.where, self.reason)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _where_and_why(path: Path, error: Exception) -> tuple[str, str]:
    """``error``, raised reading ``path``, as (file[:line], reason) without the directory."""
    if path.stat().st_size == 0:
        return path.name, "empty file"
    if isinstance(error, json.JSONDecodeError):
        return path.name, f"not JSON: {error}"
    if isinstance(error, UnicodeDecodeError):
        return path.name, f"not UTF-8 text ({error.reason} at byte {error.start})"
    text = _first_line(error)
    # The readers name the file themselves (``<path>:<line>: <why>``): keep the line, drop the directory.
    if text.startswith(f"{path}:"):
        line, colon, why = text[len(f"{path}:"):].partition(": ")
        if colon and line.isdigit():
            return f"{path.name}:{line}", why
        return path.name, text[len(f"{path}:"):].strip()
    return path.name, text


def _diagnose(trial: TrialDirectory, table: RawTable, error: Exception) -> UnreadableTrial:
    """Which of ``table``'s files its reader refuses; failing that, the table and the error."""
    names = dict.fromkeys((TRIAL_JSON, *table.files))  # trial.json also names the trial
    present = [(name, path) for name in names if (path := trial.file(name)) is not None]
    for name, path in present:
        try:
            FILE_READERS[name](path)
        except Exception as refused:  # whatever a reader raises, this file is what is wrong
            return UnreadableTrial(trial.path, *_where_and_why(path, refused))
    where = ", ".join(path.name for _, path in present) or trial.path.name
    return UnreadableTrial(trial.path, where, f"does not read as {table.name}: {type(error).__name__}: "
                                              f"{_first_line(error)}")


@dataclass(frozen=True)
class TrialFrames:
    """One trial's rows for each raw table, read and not yet written."""

    trial: TrialDirectory
    trial_id: str
    frames: dict[str, pl.DataFrame]


def read_trial(trial: TrialDirectory, tables: Collection[str] | None = None) -> TrialFrames:
    """``tables`` (default: every raw table) of ``trial``, built in memory; UnreadableTrial if any file does not
    read."""
    frames = {}
    try:
        trial_id = trial.trial_id
    except Exception as error:  # trial.json does not read: one line saying so, not a traceback
        raise _diagnose(trial, RAW_TABLES["trial_manifests"], error) from error
    with trial.reading():
        for name in (tables if tables is not None else RAW_TABLES):
            table = RAW_TABLES[name]
            try:
                frames[name] = table.frame(trial)
            except Exception as error:  # any failure to read is the trial's, reported as one line
                raise _diagnose(trial, table, error) from error
    return TrialFrames(trial, trial_id, frames)


class StagedTrial(TrialDirectory):
    """A run read where it is assembled, before it is renamed into the run store under ``key``: read as it will be
    read there."""

    def __init__(self, path: Path, key: TrialKey) -> None:
        super().__init__(path)
        self._staged_key = key

    @property
    def key(self) -> TrialKey:
        return self._staged_key


def check_staged_trial(path: Path, key: TrialKey) -> None:
    """Read every raw table of the staged trial at ``path`` as it will be loaded once in the store under ``key``;
    UnreadableTrial if any file does not read, or holds a number that is not one (:func:`implausible`)."""
    implausible(read_trial(StagedTrial(path, key)))


def _bad_values(frame: pl.DataFrame, column: str, dtype: pl.DataType) -> tuple[pl.Series, str] | None:
    if dtype.is_float():
        bad = frame.filter(pl.col(column).is_nan() | pl.col(column).is_infinite())[column]
        if bad.len():
            return bad, "not a finite number"
    if column.endswith("_ts") and dtype.is_numeric():
        bad = frame.filter(~pl.col(column).is_between(EARLIEST_TS, LATEST_TS, closed="left"))[column]
        if bad.len():
            return bad, "not a time from 2000 to 2100 (Unix seconds)"
    return None


def implausible(read: TrialFrames) -> None:
    """UnreadableTrial when a trial's rows hold a value no measurement has: NaN or an infinity (a figure not
    measured is null, never NaN), or a time outside 2000–2100. Run on what an import brings, before it is stored."""
    for name, frame in read.frames.items():
        table = RAW_TABLES[name]
        for column, dtype in frame.schema.items():
            found = _bad_values(frame, column, dtype)
            if found is not None:
                bad, why = found
                raise UnreadableTrial(read.trial.path, ", ".join(table.files) or name,
                                      f"{name}.{column}: {bad.len():,} values {why} (the first {bad[0]!r})")


def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))


def _attempt(trial: TrialDirectory, tables: Collection[str] | None) -> TrialFrames | UnreadableTrial:
    try:
        return read_trial(trial, tables)
    except UnreadableTrial as error:
        return error


def reading_processes() -> ProcessPoolExecutor:
    """Worker processes for :func:`read_trials` over thousands of trials: reading a trial's small files is mostly
    Python (a dozen small polars frames), which one process runs on one core whatever its threads. Spawned, not
    forked: the caller holds DuckDB's threads."""
    return ProcessPoolExecutor(max_workers=max(2, os.cpu_count() or 2), mp_context=multiprocessing.get_context("spawn"))


def read_trials(trials: list[TrialDirectory], tables: Collection[str] | None = None,
                processes: Executor | None = None) -> tuple[list[TrialFrames], list[UnreadableTrial]]:
    """Every trial read into memory (on a thread pool: polars releases the GIL while it parses; or on
    ``processes``, from :func:`reading_processes`): those that read, in order, and why each other one does not."""
    if processes is not None:
        outcomes = list(processes.map(_attempt, trials, [tables] * len(trials), chunksize=max(1, len(trials) // 8)))
    else:
        with _pool() as pool:
            outcomes = list(pool.map(_attempt, trials, [tables] * len(trials)))
    return ([outcome for outcome in outcomes if isinstance(outcome, TrialFrames)],
            [outcome for outcome in outcomes if isinstance(outcome, UnreadableTrial)])
