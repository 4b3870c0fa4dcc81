"""Import upstream run directories into the run store, unchanged.

Upstream's runner uploads each run to
``<dest>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``; ``ROOT`` is
that ``<dest>``: a local directory or any fsspec URL (``gs://``, ``s3://``,
``memory://``). Upstream runs are other people's bytes: the directories are walked
without following a link, each path component checked against the partition
grammar, and a run's trial id is the one its path names (:mod:`upstream_files`).
Each run is planned from its listing — only the files upstream writes, each under
its cap, regular files only — then copied file by file into a staging directory
the run store gives this process (``RunStore.claim``), checked there by the
caller's ``check`` — the warehouse reads every file as it will load them — and
only then renamed into place, so the store only ever holds whole runs that load; a
run already in the store is left as it is. A run refused by its plan, by ``check``
(or whose id the store already holds under another tag, or is assembling) is
reported in one line, not copied.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
from fsspec.implementations.local import LocalFileSystem

from substrate_assets.results.atomic import write_json
from substrate_assets.results.import_limits import MAX_RUNS
from substrate_assets.results.layout import RunStore, TrialExists, TrialKey
from substrate_assets.results.trial_directory import IMPORT_JSON, TRIAL_JSON, UPLOADING, WORK
from substrate_assets.results.upstream_files import (
    MIB,
    PARTITIONS,
    REQUIRED,
    Listed,
    cap_of,
    check_csv_header,
    kind_of,
    run_key,
    take_local,
)

log = logging.getLogger(__name__)

RUN_GLOB = "runs/*/run_date=*/run_ts=*/run_tag=*"

# Reads a run where it is staged as it will be read under its key in the store; a ValueError refuses the run.
RunCheck = Callable[[Path, TrialKey], None]


class UploadInProgress(FileNotFoundError):
    """The run directory is still being uploaded (its ``.uploading`` marker is there)."""


class SourceUnreadable(ValueError):
    """The root an import was given cannot be listed at all (a bucket out of reach, a URL no filesystem reads)."""


class TooManyRuns(ValueError):
    """The root holds more runs than one import takes: nothing of it is imported."""


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


def _is_local(filesystem: fsspec.AbstractFileSystem) -> bool:
    return isinstance(filesystem, LocalFileSystem)


def _local_runs(base: Path) -> tuple[list[str], list[RunRefused]]:
    """The run directories under a local ``base``, walked level by level without following a link: a link where a
    directory of the layout should be is refused by name, and so is a directory that cannot be listed."""
    refused: list[RunRefused] = []
    frontier = [base / "runs"]
    if not frontier[0].is_dir() or frontier[0].is_symlink():
        if frontier[0].is_symlink():
            refused.append(RunRefused(str(frontier[0]), "a symbolic link: import never follows links"))
        return [], refused
    for level in PARTITIONS[1:]:
        below = []
        for directory in frontier:
            try:
                entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
            except OSError as error:
                refused.append(RunRefused(str(directory), f"cannot be listed ({error.strerror})"))
                continue
            for entry in entries:
                if level != "<name>" and not entry.name.startswith(level):
                    continue
                if entry.is_symlink():
                    refused.append(RunRefused(entry.path, "a symbolic link: import never follows links"))
                elif entry.is_dir(follow_symlinks=False):
                    below.append(Path(entry.path))
        frontier = below
    return [str(path) for path in frontier], refused


def _keyed(paths: list[str]) -> tuple[list[tuple[TrialKey, str]], list[RunRefused]]:
    """Each run directory with the key its path names, checked component by component; refused where one is
    wrong."""
    keyed, refused = [], []
    for path in paths:
        try:
            keyed.append((run_key(tuple(path.rstrip("/").split("/")[-4:])), path))
        except ValueError as error:
            refused.append(RunRefused(path, str(error)))
    return keyed, refused


def find_runs(root: str) -> tuple[fsspec.AbstractFileSystem, list[str], list[RunRefused]]:
    """The filesystem of ``root``, every run directory under it (oldest first) and the directories refused on the
    way (a link, a path component that is not the partition grammar's)."""
    filesystem, base = fsspec.core.url_to_fs(root)
    base = base.rstrip("/")
    if _is_local(filesystem):
        candidates, refused = _local_runs(Path(base))
        candidates = [path for path in candidates if not os.path.lexists(f"{path}/{UPLOADING}")]
    else:
        listed = filesystem.glob(f"{base}/{RUN_GLOB}")
        # Markers are listed after the runs: an upload that starts in between is caught by import_run.
        uploading = {path.rsplit("/", 1)[0] for path in filesystem.glob(f"{base}/{RUN_GLOB}/{UPLOADING}")}
        candidates = [path for path in listed if path not in uploading and filesystem.isdir(path)]
        refused = []
    keyed, wrong = _keyed(candidates)
    return filesystem, [path for _, path in sorted(keyed, key=lambda found: (found[0].run_ts, found[1]))], \
        refused + wrong


@dataclass(frozen=True)
class RunPlan:
    """What will be copied of a run: the files upstream writes, and the names left out."""

    files: list[Listed]
    left_out: list[str]


def _plan_local(source: str) -> RunPlan:
    files, left_out = [], []
    try:
        entries = sorted(os.scandir(source), key=lambda entry: entry.name)
    except OSError as error:
        raise ValueError(f"cannot be listed ({error.strerror})") from None
    if any(entry.name == UPLOADING for entry in entries):
        raise UploadInProgress(_uploading(source))
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        cap = cap_of(entry.name)
        if stat.S_ISLNK(info.st_mode):
            raise ValueError(f"{entry.name} is a symbolic link: import never follows links")
        if cap is None:
            left_out.append(entry.name)
        elif not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{entry.name} is {kind_of(info.st_mode)}, not a regular file")
        elif info.st_nlink > 1:
            raise ValueError(f"{entry.name} has {info.st_nlink} hard links: a file linked from elsewhere is not "
                             "taken")
        elif info.st_size > cap:
            raise ValueError(f"{entry.name} is {info.st_size:,} bytes, over its cap of {cap // MIB} MiB")
        else:
            files.append(Listed(entry.name, info.st_size, (info.st_dev, info.st_ino)))
    return RunPlan(files, left_out)


def _plan_keys(filesystem: fsspec.AbstractFileSystem, source: str) -> RunPlan:
    files, left_out = [], []
    listing = filesystem.ls(source, detail=True)
    if any(Path(entry["name"]).name == UPLOADING for entry in listing):
        raise UploadInProgress(_uploading(source))
    for entry in listing:
        name, cap = Path(entry["name"]).name, cap_of(Path(entry["name"]).name)
        if cap is None or entry.get("type") != "file":
            left_out.append(name)
        elif (entry.get("size") or 0) > cap:
            raise ValueError(f"{name} is {entry['size']:,} bytes, over its cap of {cap // MIB} MiB")
        else:
            files.append(Listed(name, int(entry.get("size") or 0)))
    return RunPlan(files, left_out)


def plan_run(filesystem: fsspec.AbstractFileSystem, source: str) -> RunPlan:
    """What of an upstream run will be copied, decided from its listing alone; ValueError (the file and why) for a
    run that is refused whole: a link, a FIFO or device, a hard link, a file over its cap, no status.json."""
    plan = _plan_local(source) if _is_local(filesystem) else _plan_keys(filesystem, source)
    if not any(listed.name == REQUIRED for listed in plan.files):
        raise ValueError(f"holds no {REQUIRED}, which every upstream run has: not a run")
    return plan


def _uploading(source: str) -> str:
    return (f"{source} is still being uploaded (it holds {UPLOADING}); if no upload is running, it was cut short: "
            f"delete it or its {UPLOADING} object")


def _copy(filesystem: fsspec.AbstractFileSystem, source: str, plan: RunPlan, staging: Path) -> None:
    for listed in plan.files:
        target = staging / listed.name
        if _is_local(filesystem):
            take_local(Path(source), listed, target)
        else:
            filesystem.get_file(f"{source.rstrip('/')}/{listed.name}", str(target))
            if target.stat().st_size > (cap_of(listed.name) or 0):
                raise ValueError(f"{listed.name}: over its cap of {(cap_of(listed.name) or 0) // MIB} MiB")
        if listed.name.endswith(".csv"):
            check_csv_header(target)


def _copy_all(filesystem: fsspec.AbstractFileSystem, source: str, staging: Path) -> None:
    """Every file of a trial of this project's own run store (an object store: keys, no links)."""
    listing = filesystem.ls(source, detail=False)
    if any(Path(path).name == UPLOADING for path in listing):
        raise UploadInProgress(_uploading(source))
    for path in listing:
        if filesystem.isfile(path) and Path(path).name not in (WORK, IMPORT_JSON):
            filesystem.get_file(path, str(staging / Path(path).name))


def import_run(filesystem: fsspec.AbstractFileSystem, source: str, store: RunStore,
               check: RunCheck | None = None, slo: Mapping[str, float] | None = None,
               *, upstream: bool = True) -> ImportedRun:
    """Copy one run directory into the store (planned, staged, checked, then renamed); a run already there is left
    alone (its files, and the SLO it was imported with, are never rewritten). ``slo`` (``wake_p99_ms``,
    ``failure_ratio``), when given, is kept beside the run's own files (``import.json``). RunRefused, with nothing
    left in the store, when its plan or ``check`` refuses it or the store holds its id otherwise. ``upstream``
    (the default) takes only what upstream's runner writes (:func:`plan_run`); otherwise the source is a trial of
    this project's own object store, taken whole."""
    try:
        key = run_key(tuple(source.rstrip("/").split("/")[-4:])) if upstream else TrialKey.parse(source)
        plan = plan_run(filesystem, source) if upstream else None
    except ValueError as error:
        raise RunRefused(source, str(error)) from None
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
        try:
            if plan is None:
                _copy_all(filesystem, source, staging)
            else:
                _copy(filesystem, source, plan, staging)
        except UploadInProgress:
            raise
        except (ValueError, OSError) as error:
            raise RunRefused(source, str(error) if isinstance(error, ValueError)
                             else f"cannot be copied ({error})") from None
        if slo:
            write_json(staging / IMPORT_JSON, {"slo": dict(slo)})
        if check is not None:
            try:
                check(staging, key)
            except ValueError as error:
                raise RunRefused(source, str(error)) from None
        try:
            store.land(key)  # as a native trial lands: the claim's owner record leaves with the scratch area
        except OSError as error:  # its place in runs/ cannot be made (a file there, a read-only store)
            raise RunRefused(source, f"cannot be put in the store ({error})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # ours: claimed above; gone already once renamed
    return ImportedRun(key, source, target, copied=True)


def import_all(root: str, store: RunStore, check: RunCheck | None = None,
               slo: Mapping[str, float] | None = None, *, max_runs: int = MAX_RUNS,
               on_progress: Callable[[int, int], None] | None = None) -> ImportBatch:
    """Every whole run under ``root`` (runs still being uploaded are left for next time), each refused on its own:
    the others still enter the store. TooManyRuns, before anything is copied, when ``root`` holds more than
    ``max_runs``; ``on_progress(done, total)`` after each run."""
    try:
        filesystem, runs, refused = find_runs(root)
    except Exception as error:  # an unreachable bucket, a bad URL, credentials refused: one line, not a traceback
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise SourceUnreadable(f"{root} cannot be listed: {type(error).__name__}: {first}") from error
    if len(runs) > max_runs:
        raise TooManyRuns(f"{root} holds {len(runs):,} runs, more than the {max_runs:,} one import takes; nothing "
                          "was imported (--max-runs takes more)")
    for line in store.sweep_dead_staging():  # an import killed mid-copy would hold its run's id forever
        log.warning("%s", line)
    batch = ImportBatch(refused=list(refused))
    for done, source in enumerate(runs, 1):
        try:
            batch.imported.append(import_run(filesystem, source, store, check, slo))
        except UploadInProgress as error:
            log.warning("skipped: %s", error)
        except RunRefused as refusal:
            batch.refused.append(refusal)
        if on_progress is not None:
            on_progress(done, len(runs))
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
    return import_run(filesystem, source, store, upstream=False)


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
