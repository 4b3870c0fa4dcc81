"""Import upstream run directories into the run store, unchanged.

Upstream's runner uploads each run to
``<dest>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``; ``ROOT`` is
that ``<dest>``: a local directory or any fsspec URL (``gs://``, ``s3://``,
``memory://``). Each run is copied file by file into a staging directory the run
store gives this process (``RunStore.claim``), checked there by the caller's
``check`` — the warehouse reads every file as it will load them — and only then
renamed into place, so the store only ever holds whole runs that load; a run
already in the store is left as it is. A run refused by ``check`` (or whose id the
store already holds under another tag, or is assembling) is reported, not copied.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import fsspec

from substrate_assets.results.atomic import write_json
from substrate_assets.results.layout import RunStore, TrialExists, TrialKey
from substrate_assets.results.trial_directory import IMPORT_JSON, TRIAL_JSON, UPLOADING, WORK

log = logging.getLogger(__name__)

RUN_GLOB = "runs/*/run_date=*/run_ts=*/run_tag=*"

# Reads a run where it is staged as it will be read under its key in the store; a ValueError refuses the run.
RunCheck = Callable[[Path, TrialKey], None]


class UploadInProgress(FileNotFoundError):
    """The run directory is still being uploaded (its ``.uploading`` marker is there)."""


class RunRefused(ValueError):
    """A run that does not enter the store: where it is and why, in one line."""

    def __init__(self, source: str, reason: str) -> None:
        self.source, self.reason = source, reason
        super().__init__(f"refused {source}: {reason}")


@dataclass(frozen=True)
class ImportedRun:
    key: TrialKey
    source: str
    trial_dir: Path
    copied: bool

    @property
    def trial_id(self) -> str:
        return self.key.trial_id


@dataclass(frozen=True)
class ImportBatch:
    """What an import of every run under a root did: the runs now in the store, and those refused."""

    imported: list[ImportedRun] = field(default_factory=list)
    refused: list[RunRefused] = field(default_factory=list)


def find_runs(root: str) -> tuple[fsspec.AbstractFileSystem, list[str]]:
    """The filesystem of ``root`` and every run directory under it, oldest first."""
    filesystem, base = fsspec.core.url_to_fs(root)
    base = base.rstrip("/")
    candidates = filesystem.glob(f"{base}/{RUN_GLOB}")
    # Markers are listed after the runs: an upload that starts in between is caught by import_run.
    uploading = {path.rsplit("/", 1)[0] for path in filesystem.glob(f"{base}/{RUN_GLOB}/{UPLOADING}")}
    found = [path for path in candidates if path not in uploading and filesystem.isdir(path)]
    return filesystem, sorted(found, key=lambda path: (TrialKey.parse(path).run_ts, path))


def import_run(filesystem: fsspec.AbstractFileSystem, source: str, store: RunStore,
               check: RunCheck | None = None, slo: Mapping[str, float] | None = None) -> ImportedRun:
    """Copy one run directory into the store (staged, checked, then renamed); a run already there is left alone
    (its files, and the SLO it was imported with, are never rewritten). ``slo`` (``wake_p99_ms``,
    ``failure_ratio``), when given, is kept beside the run's own files (``import.json``). RunRefused, with nothing
    left in the store, when ``check`` refuses it or the store holds its id otherwise."""
    key = TrialKey.parse(source)
    target = store.trial_dir(key)
    if target.exists():
        return ImportedRun(key, source, target, copied=False)
    try:
        # A staging directory of this id belongs to whoever claimed it (a live run, or one the sweep judged alive):
        # never removed here.
        staging = store.claim(key)
    except TrialExists as error:
        raise RunRefused(source, str(error)) from None
    try:
        listing = filesystem.ls(source, detail=False)
        if any(Path(path).name == UPLOADING for path in listing):
            raise UploadInProgress(f"{source} is still being uploaded (it holds {UPLOADING}); if no upload is "
                                   f"running, it was cut short: delete it or its {UPLOADING} object")
        for path in listing:
            if filesystem.isfile(path) and Path(path).name not in (WORK, IMPORT_JSON):
                filesystem.get_file(path, str(staging / Path(path).name))
        if slo:
            write_json(staging / IMPORT_JSON, {"slo": dict(slo)})
        if check is not None:
            try:
                check(staging, key)
            except ValueError as error:
                raise RunRefused(source, str(error)) from None
        # The claim's owner record leaves with the scratch area, as a native trial's does when it lands.
        shutil.rmtree(staging / WORK, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # ours: claimed above; gone already once renamed
    return ImportedRun(key, source, target, copied=True)


def import_all(root: str, store: RunStore, check: RunCheck | None = None,
               slo: Mapping[str, float] | None = None) -> ImportBatch:
    """Every whole run under ``root`` (runs still being uploaded are left for next time), each refused on its own:
    the others still enter the store."""
    filesystem, runs = find_runs(root)
    for line in store.sweep_dead_staging():  # an import killed mid-copy would hold its run's id forever
        log.warning("%s", line)
    batch = ImportBatch()
    for source in runs:
        try:
            batch.imported.append(import_run(filesystem, source, store, check, slo))
        except UploadInProgress as error:
            log.warning("skipped: %s", error)
        except RunRefused as refusal:
            batch.refused.append(refusal)
    return batch


def import_runs(root: str, store: RunStore, check: RunCheck | None = None) -> list[ImportedRun]:
    """Every whole run under ``root``; RunRefused for the first run refused."""
    batch = import_all(root, store, check)
    if batch.refused:
        raise batch.refused[0]
    return batch.imported


def fetch_trial(store_url: str, key: TrialKey, store: RunStore) -> ImportedRun:
    """Mirror one trial of an object-store run store into the local store."""
    filesystem, base = fsspec.core.url_to_fs(store_url)
    source = f"{base.rstrip('/')}/{key.relative_path}"
    if not filesystem.exists(f"{source}/{TRIAL_JSON}"):
        raise FileNotFoundError(f"trial {key.trial_id} is not in {store_url}: {key.relative_path} has no "
                                f"{TRIAL_JSON}")
    return import_run(filesystem, source, store)


def already_stored(store_url: str, key: TrialKey) -> str | None:
    """Why a trial cannot be written to ``store_url`` (it is there, whole or cut short), or None."""
    filesystem, base = fsspec.core.url_to_fs(store_url)
    target = f"{base.rstrip('/')}/{key.relative_path}"
    if not filesystem.exists(target):
        return None
    cut_short = filesystem.exists(f"{target}/{UPLOADING}")
    partial = f" (an upload cut short: it holds {UPLOADING})" if cut_short else ""
    return f"trial {key.trial_id} already exists in {store_url}{partial}; results are never rewritten"


def upload_trial(directory: Path, store_url: str, key: TrialKey) -> str:
    """Write a finished trial directory to an object-store run store.

    The first object put is an ``.uploading`` marker and the last ``trial.json``, after which the
    marker is removed: a reader skips a directory with the marker or without ``trial.json``, so it
    never takes a half-uploaded trial for a whole one. An existing trial is never overwritten.
    """
    refusal = already_stored(store_url, key)
    if refusal is not None:
        raise FileExistsError(refusal)
    filesystem, base = fsspec.core.url_to_fs(store_url)
    target = f"{base.rstrip('/')}/{key.relative_path}"
    files = sorted(path for path in directory.iterdir() if path.is_file())
    filesystem.makedirs(target, exist_ok=True)
    filesystem.pipe_file(f"{target}/{UPLOADING}", f"{key.trial_id}\n".encode())
    for path in sorted(files, key=lambda p: p.name == TRIAL_JSON):
        filesystem.put_file(str(path), f"{target}/{path.name}")
    filesystem.rm_file(f"{target}/{UPLOADING}")
    return f"{store_url.rstrip('/')}/{key.relative_path}"
